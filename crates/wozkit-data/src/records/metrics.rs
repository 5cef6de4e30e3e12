//! The automatic metrics of one session, computed from its events alone (as the CRWIZ post-task
//! analysis did): turns and words per role, how often the wizard typed instead of choosing an
//! option, duration, time and turns per subtask, how it ended and whether the goal was reached.

use std::collections::BTreeMap;

use serde::Serialize;
use wozkit_core::event::{Event, EventKind, MessageSource, Role};

/// A number for each role.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PerRole<T> {
    pub user: T,
    pub wizard: T,
}

impl<T> PerRole<T> {
    pub fn get_mut(&mut self, role: Role) -> &mut T {
        match role {
            Role::User => &mut self.user,
            Role::Wizard => &mut self.wizard,
        }
    }
}

/// Time and turns spent in one subtask.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SubtaskTime {
    pub subtask: String,
    /// From entering the subtask to its milestone (or the next subtask, or the end).
    pub seconds: f64,
    pub turns: PerRole<u32>,
    /// Its milestone was reached.
    pub completed: bool,
}

/// The metrics of a session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    pub turns: PerRole<u32>,
    pub words: PerRole<u32>,
    pub words_per_turn: PerRole<f64>,
    /// Percentage of the wizard's turns that were typed (not an offered or fixed option).
    pub wizard_free_text_percent: f64,
    /// Wizard turns by dialogue-act type (`free` for typed text).
    pub wizard_turns_by_act_type: BTreeMap<String, u32>,
    /// Seconds from the start to the end (or the last event of an unfinished session).
    pub duration_s: f64,
    pub subtasks: Vec<SubtaskTime>,
    pub milestones: Vec<String>,
    pub robot_actions: u32,
    pub hints: u32,
    pub disconnects: u32,
    /// Roles played by a bot.
    pub bots: Vec<Role>,
    /// `None` while the session is live.
    pub end_reason: Option<String>,
    pub goal_reached: Option<bool>,
}

fn words(text: &str) -> u32 {
    text.split_whitespace().count() as u32
}

/// The subtasks' times as the events go: each subtask entered, and the one open.
#[derive(Default)]
struct Subtasks {
    times: Vec<SubtaskTime>,
    /// The open subtask: its index in `times` and when it was entered.
    open: Option<(usize, u64)>,
}

impl Subtasks {
    /// Closes the open subtask at `at`, adding its time (and marking it completed).
    fn close(&mut self, at: u64, completed: bool) {
        if let Some((i, since)) = self.open.take()
            && let Some(t) = self.times.get_mut(i)
        {
            t.seconds += at.saturating_sub(since) as f64 / 1000.0;
            t.completed |= completed;
        }
    }

    /// Enters `subtask` at `at`, closing the one open.
    fn enter(&mut self, subtask: &str, at: u64) {
        self.close(at, false);
        let i = match self.times.iter().position(|t| t.subtask == subtask) {
            Some(i) => i,
            None => {
                self.times.push(SubtaskTime {
                    subtask: subtask.to_string(),
                    seconds: 0.0,
                    turns: PerRole::default(),
                    completed: false,
                });
                self.times.len() - 1
            }
        };
        self.open = Some((i, at));
    }

    /// The milestone of `subtask` at `at`: completes it, closing it when it is the one open.
    fn milestone(&mut self, subtask: &str, at: u64) {
        if self
            .open
            .is_some_and(|(i, _)| self.times.get(i).is_some_and(|t| t.subtask == subtask))
        {
            self.close(at, true);
        } else if let Some(t) = self.times.iter_mut().find(|t| t.subtask == subtask) {
            t.completed = true;
        }
    }

    /// Counts a message of `role` in the open subtask.
    fn message(&mut self, role: Role) {
        if let Some((i, _)) = self.open
            && let Some(t) = self.times.get_mut(i)
        {
            *t.turns.get_mut(role) += 1;
        }
    }
}

/// The act type a wizard's message is counted under: `free` for free text.
fn act_key(source: &MessageSource) -> String {
    match source {
        MessageSource::Free => "free".to_string(),
        other => other.act().map_or("free", |(_, t)| t.as_str()).to_string(),
    }
}

/// `w / t`, 0 when `t` is 0.
fn ratio(w: u32, t: u32) -> f64 {
    if t == 0 {
        0.0
    } else {
        f64::from(w) / f64::from(t)
    }
}

/// Computes the metrics of one session's events (in `seq` order).
pub fn metrics(events: &[Event]) -> Metrics {
    let mut turns = PerRole::<u32>::default();
    let mut word_count = PerRole::<u32>::default();
    let mut by_act: BTreeMap<String, u32> = BTreeMap::new();
    let mut subtasks = Subtasks::default();
    let mut milestones = vec![];
    let (mut actions, mut hints, mut disconnects) = (0, 0, 0);
    let mut bots = vec![];
    let mut end = None;
    let start = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::SessionStarted { .. }))
        .or(events.first())
        .map_or(0, |e| e.at_ms);
    let mut end_ms = events.last().map_or(start, |e| e.at_ms);
    for e in events {
        match &e.kind {
            EventKind::Message { role, text, source } => {
                *turns.get_mut(*role) += 1;
                *word_count.get_mut(*role) += words(text);
                if *role == Role::Wizard {
                    *by_act.entry(act_key(source)).or_default() += 1;
                }
                subtasks.message(*role);
            }
            EventKind::SubtaskEntered { subtask } => subtasks.enter(subtask, e.at_ms),
            EventKind::Milestone { subtask, .. } => {
                milestones.push(subtask.clone());
                subtasks.milestone(subtask, e.at_ms);
            }
            EventKind::ActionStarted { .. } => actions += 1,
            EventKind::HintGiven { .. } => hints += 1,
            EventKind::Disconnected { .. } => disconnects += 1,
            EventKind::Joined { role, bot: true } => bots.push(*role),
            EventKind::SessionEnded {
                reason,
                goal_reached,
            } => {
                end = Some((reason.as_str().to_string(), *goal_reached));
                end_ms = e.at_ms;
                subtasks.close(e.at_ms, false);
            }
            _ => {}
        }
    }
    subtasks.close(end_ms, false);
    let free = by_act.get("free").copied().unwrap_or(0);
    Metrics {
        turns,
        words: word_count,
        words_per_turn: PerRole {
            user: ratio(word_count.user, turns.user),
            wizard: ratio(word_count.wizard, turns.wizard),
        },
        wizard_free_text_percent: 100.0 * ratio(free, turns.wizard),
        wizard_turns_by_act_type: by_act,
        duration_s: end_ms.saturating_sub(start) as f64 / 1000.0,
        subtasks: subtasks.times,
        milestones,
        robot_actions: actions,
        hints,
        disconnects,
        bots,
        end_reason: end.as_ref().map(|(r, _)| r.clone()),
        goal_reached: end.map(|(_, g)| g),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wozkit_core::event::{Actor, EndReason};
    use wozkit_core::model::ActType;

    fn ev(seq: u64, at_ms: u64, kind: EventKind) -> Event {
        Event {
            v: 1,
            session: "s".into(),
            seq,
            at_ms,
            actor: Actor::System,
            kind,
        }
    }

    fn msg(role: Role, text: &str, source: MessageSource) -> EventKind {
        EventKind::Message {
            role,
            text: text.into(),
            source,
        }
    }

    #[test]
    fn counts_turns_words_subtasks_and_the_end() {
        let said = MessageSource::State {
            state: "greet".into(),
            label: "greet".into(),
            act_type: ActType::Interaction,
            template: 0,
        };
        let events = vec![
            ev(
                1,
                0,
                EventKind::SessionStarted {
                    study: "t".into(),
                    study_version: "1".into(),
                    seed: 1,
                    initial_state: "s".into(),
                },
            ),
            ev(2, 1000, msg(Role::Wizard, "Hello there", said)),
            ev(
                3,
                2000,
                EventKind::SubtaskEntered {
                    subtask: "a".into(),
                },
            ),
            ev(
                4,
                3000,
                msg(Role::User, "send robot one now", MessageSource::Free),
            ),
            ev(5, 4000, msg(Role::Wizard, "ok", MessageSource::Free)),
            ev(
                6,
                6000,
                EventKind::Milestone {
                    subtask: "a".into(),
                    progress: 50,
                },
            ),
            ev(
                7,
                10_000,
                EventKind::SessionEnded {
                    reason: EndReason::Finished,
                    goal_reached: true,
                },
            ),
        ];
        let m = metrics(&events);
        assert_eq!(m.turns, PerRole { user: 1, wizard: 2 });
        assert_eq!(
            m.words_per_turn,
            PerRole {
                user: 4.0,
                wizard: 1.5
            }
        );
        assert!((m.wizard_free_text_percent - 50.0).abs() < 1e-9);
        assert_eq!(m.duration_s, 10.0);
        assert_eq!(m.subtasks.len(), 1);
        assert_eq!(m.subtasks[0].seconds, 4.0);
        assert!(m.subtasks[0].completed);
        assert_eq!(m.subtasks[0].turns, PerRole { user: 1, wizard: 1 });
        assert_eq!(m.end_reason.as_deref(), Some("finished"));
        assert_eq!(m.goal_reached, Some(true));
    }
}
