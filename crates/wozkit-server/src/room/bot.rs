//! Built-in bots that take a role nobody came for (`pairing.on_timeout: bot`).
//!
//! The wizard bot is the simulator's wizard (`sim::wizard_move`, options weighted by their hint
//! priors). It answers news (a user message, a finished robot action, an unlocked option) after
//! a few seconds and otherwise keeps quiet for a while after speaking, so the user has time to
//! reply. The user bot answers locks (approve or deny, reply) and replies to the wizard with a few
//! scripted lines. Both act through the same engine commands as people and are logged as
//! `Actor::Bot`; their RNG is separate from the engine's, seeded from the session seed.
//!
//! A simulated user ([`Bot::model_user`]) is planned like the user bot, but its replies come
//! from a language model: the room asks it in a task of its own (`model_user.rs`) and plays the
//! move when the answer comes back; only locks are answered by the scripted rule.

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wozkit_core::engine::{self, Command, Session};
use wozkit_core::event::{Actor, Event, EventKind, MessageSource, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::ActType;
use wozkit_core::sim::{self, WizardPolicy};

use super::model_user::{ModelUser, SystemWizard};

/// Name of the built-in bot in the log.
pub const NAME: &str = "builtin";

/// Replies of the user bot to a question.
const ANSWERS: &[&str] = &[
    "Yes, go ahead.",
    "Send the closest robot that can do it.",
    "Okay, do what you suggest.",
    "Yes please.",
    "What would you recommend?",
];
/// Replies of the user bot to a statement.
const ACKS: &[&str] = &[
    "Okay.",
    "Thanks.",
    "Understood.",
    "Good, keep me posted.",
    "What is the status now?",
];

/// A bot in a room.
pub struct Bot {
    pub role: Role,
    /// When the bot moves next; `None` while it waits for something to happen.
    pub next_at: Option<u64>,
    rng: ChaCha8Rng,
    pace: (u64, u64),
    /// The wizard bot does not speak again before this (unless there is news).
    quiet_until: u64,
    /// Whether the wizard's last message asked something (for the user bot).
    asked: bool,
    /// The language model playing this seat (a simulated user), if any.
    pub model: Option<Arc<ModelUser>>,
    /// The system under test playing this seat (the wizard's), if any.
    pub system: Option<Arc<SystemWizard>>,
    /// The simulated user's answer is awaited: it is not asked again meanwhile.
    pub in_flight: bool,
    /// News came while the answer was awaited: the simulated user is asked again after it.
    pub again: bool,
    /// The simulated user has ended the dialogue: it finishes as soon as the study allows
    /// (until then it is asked again on its turns, unless it gave up).
    pub stopped: bool,
    /// The simulated user stopped because its endpoint could not answer: it is not asked again.
    pub gave_up: bool,
}

impl Bot {
    pub fn new(role: Role, seed: u64, pace: (u64, u64)) -> Bot {
        let salt = match role {
            Role::User => 0x5553_4552,
            Role::Wizard => 0x5749_5a44,
        };
        Bot {
            role,
            next_at: None,
            rng: ChaCha8Rng::seed_from_u64(seed ^ salt),
            pace: (pace.0, pace.1.max(pace.0)),
            quiet_until: 0,
            asked: false,
            model: None,
            system: None,
            in_flight: false,
            again: false,
            stopped: false,
            gave_up: false,
        }
    }

    /// A simulated user in the user's seat.
    pub fn model_user(seed: u64, pace: (u64, u64), model: Arc<ModelUser>) -> Bot {
        Bot {
            model: Some(model),
            ..Bot::new(Role::User, seed, pace)
        }
    }

    /// A system under test in the wizard's seat: it answers every user message at once (the
    /// system takes its own time), and opens the dialogue.
    pub fn system_wizard(seed: u64, pace: (u64, u64), system: Arc<SystemWizard>) -> Bot {
        Bot {
            system: Some(system),
            ..Bot::new(Role::Wizard, seed, pace)
        }
    }

    /// The bot's name in the log: `builtin`, `simulated:NAME` or `system:NAME`.
    pub fn actor_name(&self) -> String {
        match (&self.model, &self.system) {
            (Some(m), _) => m.spec.actor_name(),
            (None, Some(s)) => s.actor_name(),
            (None, None) => NAME.to_string(),
        }
    }

    fn delay(&mut self) -> u64 {
        if self.pace.1 > self.pace.0 {
            self.rng.random_range(self.pace.0..=self.pace.1)
        } else {
            self.pace.0
        }
    }

    /// Looks at a batch of new events (empty at the start) and plans the next move.
    pub fn observe(&mut self, stored: &[Event], s: &Session, now: u64) {
        if self.system.is_some() {
            // A system wizard speaks first, then answers each user message.
            let opening = stored.is_empty() && !s.wizard_spoke;
            let asked = stored.iter().any(|e| {
                matches!(
                    e.kind,
                    EventKind::Message {
                        role: Role::User,
                        ..
                    }
                )
            });
            if (opening || asked) && self.next_at.is_none() {
                self.next_at = Some(now);
            }
            return;
        }
        match self.role {
            Role::Wizard => self.observe_as_wizard(stored, now),
            Role::User => self.observe_as_user(stored, now),
        }
    }

    /// The wizard bot's plan after `stored`: soon after news from the user or the world, quiet
    /// for a while after it spoke itself.
    fn observe_as_wizard(&mut self, stored: &[Event], now: u64) {
        let news = stored.iter().any(|e| {
            matches!(
                e.kind,
                EventKind::Message {
                    role: Role::User,
                    ..
                } | EventKind::ActionCompleted { .. }
                    | EventKind::OptionsUnlocked { .. }
                    | EventKind::LockReleased { .. }
                    | EventKind::Joined {
                        role: Role::User,
                        ..
                    }
            )
        });
        let spoke = stored.iter().any(|e| {
            matches!(
                e.actor,
                Actor::Bot {
                    role: Role::Wizard,
                    ..
                }
            ) && matches!(
                e.kind,
                EventKind::Message { .. } | EventKind::ActionStarted { .. }
            )
        });
        if news {
            self.quiet_until = 0;
            let soon = now + self.delay();
            self.next_at = Some(self.next_at.map_or(soon, |t| t.min(soon)));
        } else if spoke {
            self.quiet_until = now + self.pace.1 * 3;
            self.next_at = Some(self.quiet_until);
        } else if self.next_at.is_none() {
            self.next_at = Some((now + self.delay()).max(self.quiet_until));
        }
    }

    /// The user bot's plan after `stored`: an answer once the wizard said something (noting
    /// whether it was asked something) or asked for an approval.
    fn observe_as_user(&mut self, stored: &[Event], now: u64) {
        let mut prompted = false;
        for e in stored {
            match &e.kind {
                EventKind::Message {
                    role: Role::Wizard,
                    text,
                    source,
                } => {
                    prompted = true;
                    self.asked = matches!(
                        source,
                        MessageSource::State {
                            act_type: ActType::Request,
                            ..
                        }
                    ) || text.trim_end().ends_with('?');
                }
                EventKind::LockStarted { .. } => prompted = true,
                _ => {}
            }
        }
        if prompted && self.next_at.is_none() {
            // A model takes its own time to answer: it is asked at once.
            let delay = if self.model.is_some() {
                0
            } else {
                self.delay()
            };
            self.next_at = Some(now + delay);
        }
    }

    /// The move due now, if any.
    pub fn decide(&mut self, study: &LoadedStudy, s: &Session, now: u64) -> Option<Command> {
        self.next_at = None;
        match self.role {
            Role::Wizard => {
                if now < self.quiet_until {
                    self.next_at = Some(self.quiet_until);
                    return None;
                }
                sim::wizard_move(study, s, WizardPolicy::Priors, &mut self.rng)
            }
            Role::User => self.user_reply(study, s),
        }
    }

    fn user_reply(&mut self, study: &LoadedStudy, s: &Session) -> Option<Command> {
        if s.lock.is_some() {
            return sim::user_move(study, s, &mut self.rng);
        }
        if study.study.session.user_waits_for_wizard && !s.wizard_spoke {
            return None;
        }
        if engine::finish_allowed(study, s) && self.rng.random_bool(0.1) {
            return Some(Command::Finish);
        }
        let line = if std::mem::take(&mut self.asked) {
            ANSWERS[self.rng.random_range(0..ANSWERS.len())]
        } else if self.rng.random_bool(0.4) {
            ACKS[self.rng.random_range(0..ACKS.len())]
        } else {
            return None;
        };
        Some(Command::Text {
            text: line.to_string(),
        })
    }
}
