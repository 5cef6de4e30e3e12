//! The room task: a loop around `engine::step` that owns one session.
//!
//! Order of every step: run the engine on a copy → append the emitted events (durable) → adopt
//! the new state → if the session ended, record that on the session and move both participants
//! on to their next page → send the events and views → ack. A refused command changes nothing
//! and is answered with an error frame; a failed append changes nothing either.
//!
//! Randomness: each step's RNG is seeded from the session seed and the step's first `seq`, so a
//! room rebuilt after a restart draws exactly what the lost task would have drawn.

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use wozkit_core::engine::{self, Command, Refusal, Session};
use wozkit_core::event::{Actor, EndReason, Event, EventKind, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_store::{NewEvent, StoreError};

mod fanout;
mod observe;
mod presence;

use super::RoomMsg;
use super::bot::Bot;
use crate::app::{AppState, now_ms, sleep_until_ms};
use crate::ws::frames::{ServerFrame, error_frame, refusal_frame};

/// Pause before timers are fired again after a failed tick.
const TIMER_RETRY_MS: u64 = 1000;

/// What a participant is told when their command could not be stored (the `not_saved` error
/// of docs/protocol.md): nothing of it happened, and it may be sent again.
const NOT_SAVED: &str = "Your last action could not be saved, so it did not happen: the \
                         server cannot store anything right now. Please wait a moment and try \
                         again.";

/// How the room came to be.
pub enum Origin {
    /// Just paired: start the session and seat the bots.
    Fresh,
    /// Rebuilt from the log: fire overdue timers and wait for the participants to come back.
    Log,
}

/// One connection of a participant.
struct Conn {
    id: u64,
    role: Role,
    next: String,
    out: mpsc::Sender<Arc<str>>,
}

/// One observer's connection: frames go out wrapped as `observed` (see docs/protocol.md).
struct Observer {
    id: u64,
    out: mpsc::Sender<Arc<str>>,
}

enum StepError {
    Refused(Refusal),
    Store(StoreError),
    /// Another writer appended to the log (see [`RoomActor::moved`]): nothing was stored.
    Moved,
}

pub struct RoomActor {
    app: AppState,
    study: Arc<LoadedStudy>,
    /// The engine state: the fold of every event appended so far.
    session: Session,
    /// Seed of the session (from its record), for `Start` and the per-step RNGs.
    seed: u64,
    /// `seq` of the last event appended.
    last_seq: u64,
    /// Roles played by people, with their participant ids.
    humans: Vec<(Role, String)>,
    bots: Vec<Bot>,
    conns: Vec<Conn>,
    /// Researchers watching (read-only); never counted as participants.
    observers: Vec<Observer>,
    /// Paired participants who have not joined by then make the session end.
    join_deadline: Option<u64>,
    /// When this task saw the session end; it lingers a little for late connections.
    ended_at: Option<u64>,
    /// The session just ended: `ended` goes out once the current message is answered.
    announce_end: bool,
    /// Timers are not fired again before this (after a tick that failed to be stored or fired
    /// nothing), so a store outage cannot make the task spin.
    retry_at: u64,
    /// The action panel every wizard connection and observer holds from the views sent so
    /// far (`None`: someone may hold none or another), so later views can leave it out.
    panel_sent: Option<super::view::PanelSent>,
    /// The room's own inbox, weakly held: a simulated user's answer comes back through it, and
    /// a room that stops is not kept alive by the tasks asking for one.
    inbox: Option<mpsc::WeakSender<RoomMsg>>,
    /// The log grew past `last_seq` without this task (another instance took the room over
    /// while this one stalled past its lease, or wrote into it before this one stopped): this
    /// state is no longer the log's fold, so the task stops without storing anything more and
    /// its connections close; they reconnect to whoever runs the room now, rebuilt from the log.
    moved: bool,
    /// The copilot's requests (studies with `copilot:` and a person in the wizard's seat).
    copilot: CopilotAsks,
}

/// Where the copilot's requests stand. One is in flight at a time; a suggestion that comes
/// back after the dialogue moved on answers nothing and is dropped (and asked again if the
/// user has spoken since).
#[derive(Default)]
struct CopilotAsks {
    in_flight: bool,
    /// The user spoke while a request was in flight, and the wizard has not answered since.
    again: bool,
    /// The wizard's opening was asked for (once per room task).
    opening_asked: bool,
}

impl RoomActor {
    pub fn new(
        app: AppState,
        study: Arc<LoadedStudy>,
        session: Session,
        seed: u64,
        last_seq: u64,
        humans: Vec<(Role, String)>,
        bots: Vec<Role>,
    ) -> RoomActor {
        let pace = app.tunables.bot_pace_ms;
        RoomActor {
            bots: bots.into_iter().map(|r| Bot::new(r, seed, pace)).collect(),
            app,
            study,
            session,
            seed,
            last_seq,
            humans,
            conns: vec![],
            observers: vec![],
            join_deadline: None,
            ended_at: None,
            announce_end: false,
            retry_at: 0,
            panel_sent: None,
            inbox: None,
            moved: false,
            copilot: CopilotAsks::default(),
        }
    }

    /// Seats a simulated user in the user's seat (instead of a built-in user bot).
    pub fn seat_model_user(&mut self, user: Arc<super::ModelUser>) {
        let pace = self.app.tunables.bot_pace_ms;
        self.bots.retain(|b| b.role != Role::User);
        self.bots.push(Bot::model_user(self.seed, pace, user));
    }

    /// Seats a system under test in the wizard's seat (instead of the built-in wizard bot).
    pub fn seat_system_wizard(&mut self, system: Arc<super::SystemWizard>) {
        let pace = self.app.tunables.bot_pace_ms;
        self.bots.retain(|b| b.role != Role::Wizard);
        self.bots.push(Bot::system_wizard(self.seed, pace, system));
    }

    pub fn set_inbox(&mut self, inbox: mpsc::WeakSender<RoomMsg>) {
        self.inbox = Some(inbox);
    }

    pub async fn run(mut self, mut inbox: mpsc::Receiver<RoomMsg>, origin: Origin) {
        // The steps' futures (engine, store append, fan-out) are boxed while they run: held
        // inline they would make every room's task as large as the largest of them for the
        // room's whole life (~6 KB per room; docs/performance.md).
        Box::pin(self.on_start(origin)).await;
        self.flush_end();
        loop {
            if self.finished() || self.moved {
                break;
            }
            let wake = self.next_wake();
            tokio::select! {
                msg = inbox.recv() => match msg {
                    Some(msg) => Box::pin(self.handle(msg)).await,
                    None => break,
                },
                () = sleep_until_ms(wake.unwrap_or(u64::MAX)), if wake.is_some() => Box::pin(self.on_timer()).await,
                () = self.app.stopping() => break,
            }
            self.flush_end();
        }
        let id = self.session.id.clone();
        drop(inbox);
        self.app.rooms.remove_closed(&id);
    }

    async fn on_start(&mut self, origin: Origin) {
        let grace = u64::from(self.study.study.session.disconnect_grace_s) * 1000;
        match origin {
            Origin::Fresh => self.start_session().await,
            // Killed while pairing, before `Start` was stored: start it now as the lost task
            // would have. A session nobody was seated in has nobody to play it: it ends.
            Origin::Log if !self.session.started => {
                self.start_session().await;
                if self.humans.is_empty() && self.bots.is_empty() {
                    let abort = Command::Abort {
                        reason: EndReason::Aborted,
                    };
                    let _ = self.step(Actor::System, abort).await;
                    self.finalize().await;
                    return;
                }
            }
            Origin::Log => {
                if self.session.is_ended() {
                    self.finalize().await;
                    return;
                }
                // Killed after the room stored `Start` but before either seat was stored: nobody
                // was told of this session and nobody can come, so it ends now, as one never
                // started does, instead of waiting out the join deadline as if a partner had left.
                if self.humans.is_empty() && self.bots.is_empty() && self.session.joined.is_empty()
                {
                    let abort = Command::Abort {
                        reason: EndReason::Aborted,
                    };
                    let _ = self.step(Actor::System, abort).await;
                    self.finalize().await;
                    return;
                }
                if engine::next_wakeup(&self.study, &self.session).is_some_and(|t| t <= now_ms()) {
                    let _ = self.step(Actor::System, Command::Tick).await;
                }
                // Everybody was cut off by the restart: their grace periods start now.
                let present: Vec<Role> = self
                    .humans
                    .iter()
                    .map(|(r, _)| *r)
                    .filter(|r| {
                        self.session.joined.contains(r)
                            && !self.session.away.iter().any(|(a, _)| a == r)
                    })
                    .collect();
                for role in present {
                    let _ = self.step(Actor::System, Command::Disconnect { role }).await;
                }
            }
        }
        if !self.session.is_ended() && !self.everyone_joined() {
            self.join_deadline = Some(now_ms() + grace);
        }
        self.schedule_bots(&[]);
    }

    /// Starts the session and seats the bots.
    async fn start_session(&mut self) {
        let _ = self
            .step(Actor::System, Command::Start { seed: self.seed })
            .await;
        let seats: Vec<(Role, String)> =
            self.bots.iter().map(|b| (b.role, b.actor_name())).collect();
        for (role, name) in seats {
            let bot = Actor::Bot { role, name };
            let _ = self.step(bot, Command::Join { role, bot: true }).await;
        }
    }

    /// Whether both roles have joined. Both count, not only the seated humans: after a kill
    /// between seating the two participants of a pair, one role has nobody seated and nobody
    /// will come; the join deadline then ends the session.
    pub(super) fn everyone_joined(&self) -> bool {
        [Role::User, Role::Wizard]
            .iter()
            .all(|r| self.session.joined.contains(r))
    }

    /// The earliest of: engine timers, bot moves, the join deadline, the end of lingering.
    fn next_wake(&self) -> Option<u64> {
        let engine = engine::next_wakeup(&self.study, &self.session).map(|t| t.max(self.retry_at));
        let linger = self.ended_at.map(|t| t + self.app.tunables.room_linger_ms);
        [engine, self.join_deadline, linger]
            .into_iter()
            .chain(self.bots.iter().map(|b| b.next_at))
            .flatten()
            .min()
    }

    fn finished(&self) -> bool {
        match self.ended_at {
            Some(t) => self.conns.is_empty() || now_ms() >= t + self.app.tunables.room_linger_ms,
            None => false,
        }
    }

    async fn on_timer(&mut self) {
        let now = now_ms();
        if self.join_deadline.is_some_and(|t| t <= now) {
            self.join_deadline = None;
            if !self.everyone_joined() && !self.session.is_ended() {
                // Whoever came and is still here waits for another partner (at the front of
                // the queue) instead of losing the session to someone who never arrived.
                let stranded: Vec<String> = self
                    .humans
                    .iter()
                    .filter(|(r, _)| {
                        self.session.joined.contains(r) && self.conns.iter().any(|c| c.role == *r)
                    })
                    .map(|(_, p)| p.clone())
                    .collect();
                let requeue = crate::pairing::requeue_stranded(
                    &self.app,
                    &self.study,
                    &self.session.id,
                    &stranded,
                );
                if let Err(e) = requeue.await {
                    tracing::error!(session = self.session.id, "cannot requeue: {e}");
                }
                let _ = self
                    .step(
                        Actor::System,
                        Command::Abort {
                            reason: EndReason::Disconnect,
                        },
                    )
                    .await;
            }
        }
        if now >= self.retry_at
            && engine::next_wakeup(&self.study, &self.session).is_some_and(|t| t <= now)
        {
            let failed = self.step(Actor::System, Command::Tick).await.is_err();
            let still_due =
                engine::next_wakeup(&self.study, &self.session).is_some_and(|t| t <= now);
            self.retry_at = if failed || still_due {
                now + TIMER_RETRY_MS
            } else {
                0
            };
        }
        for i in 0..self.bots.len() {
            if self.bots[i].next_at.is_some_and(|t| t <= now) {
                if self.bots[i].model.is_some() && self.session.lock.is_none() {
                    self.bots[i].next_at = None;
                    self.simulated_user_turn(i).await;
                    continue;
                }
                if self.bots[i].system.is_some() {
                    self.bots[i].next_at = None;
                    self.system_wizard_turn(i);
                    continue;
                }
                let mv = self.bots[i].decide(&self.study, &self.session, now);
                if let Some(cmd) = mv {
                    let role = self.bots[i].role;
                    let actor = Actor::Bot {
                        role,
                        name: self.bots[i].actor_name(),
                    };
                    if let Err(StepError::Refused(r)) = self.step(actor, cmd).await {
                        tracing::debug!(session = self.session.id, "bot move refused: {r}");
                    }
                }
            }
        }
    }

    async fn handle(&mut self, msg: RoomMsg) {
        match msg {
            RoomMsg::Connect {
                conn,
                role,
                participant,
                last_seq,
                next,
                out,
            } => {
                self.connect(conn, role, &participant, last_seq, next, out)
                    .await;
                self.send_seats();
            }
            RoomMsg::Cmd {
                conn,
                role,
                participant,
                id,
                cmd,
            } => {
                let actor = Actor::Participant {
                    role,
                    participant: Some(participant),
                };
                let reply = match self.step(actor, *cmd).await {
                    Ok(seq) => ServerFrame::Ack { id: &id, seq }.text(),
                    Err(StepError::Refused(r)) => refusal_frame(&id, &r),
                    Err(StepError::Store(e)) => {
                        self.log_unsaved(role, &e);
                        error_frame(Some(&id), "not_saved", NOT_SAVED)
                    }
                    // Nothing stored; the connection closes with the room and the page
                    // reconnects, unacknowledged commands unanswered as after a cut.
                    Err(StepError::Moved) => return,
                };
                self.send_to(conn, reply.into());
            }
            RoomMsg::Typing { role } => {
                let frame: Arc<str> = ServerFrame::Partner { status: "typing" }.text().into();
                self.send_role(role.other(), &frame);
            }
            RoomMsg::Leave {
                conn,
                role,
                participant,
            } => {
                // The connection may already be gone (dropped for being too slow).
                self.conns.retain(|c| c.id != conn);
                // A participant whose seat was taken over leaves nothing behind.
                if self.seated(role, &participant) {
                    self.maybe_disconnect(role).await;
                }
                self.send_seats();
            }
            RoomMsg::Observe {
                conn,
                last_seq,
                out,
            } => self.observe(conn, last_seq, out).await,
            RoomMsg::Unobserve { conn } => self.observers.retain(|o| o.id != conn),
            RoomMsg::TakeOver {
                role,
                researcher,
                participant,
                reply,
            } => {
                let result = self.take_over(role, researcher, participant).await;
                let _ = reply.send(result);
                self.send_seats();
            }
            RoomMsg::SimulatedUser { outcome } => self.on_simulated_user(outcome).await,
            RoomMsg::SystemWizard { outcome } => self.on_system_wizard(outcome).await,
            RoomMsg::Copilot { outcome, asked_at } => self.on_copilot(outcome, asked_at).await,
            RoomMsg::Append { key, events, reply } => {
                let stored = self.append_once(&key, events).await;
                let _ = reply.send(stored);
            }
        }
    }

    /// Appends a participant's events from outside the dialogue (see [`RoomMsg::Append`]) and
    /// folds them in, as the room's own steps are. Events that do not follow this task's last
    /// one mean another writer appended meanwhile: the task stops, as [`Self::unstored`] says.
    async fn append_once(
        &mut self,
        key: &str,
        events: Vec<NewEvent>,
    ) -> Result<Option<Vec<Event>>, StoreError> {
        if self.moved {
            return Err(StoreError::LogMoved {
                session: self.session.id.clone(),
                after: self.last_seq,
                last: self.last_seq,
            });
        }
        let stored = self
            .app
            .store
            .append_once(&self.session.id, key, events)
            .await?;
        let Some(new) = &stored else {
            return Ok(stored);
        };
        if new.first().is_some_and(|e| e.seq != self.last_seq + 1) {
            let _ = self.unstored(StoreError::LogMoved {
                session: self.session.id.clone(),
                after: self.last_seq,
                last: new.last().map_or(self.last_seq, |e| e.seq),
            });
            return Ok(stored);
        }
        for e in new {
            engine::apply(&self.study, &mut self.session, &e.actor, &e.kind, e.at_ms);
        }
        self.last_seq = new.last().map_or(self.last_seq, |e| e.seq);
        self.broadcast(new);
        Ok(stored)
    }

    /// Asks the copilot for the wizard's next message when the wizard's turn comes: after the
    /// user spoke, and (if the study says so) for the opening once both have joined. Only a
    /// person in the wizard's seat is helped.
    fn schedule_copilot(&mut self, stored: &[Event]) {
        let Some(copilot) = &self.study.study.copilot else {
            return;
        };
        if self.session.is_ended() || self.bots.iter().any(|b| b.role == Role::Wizard) {
            return;
        }
        let said = |role: Role| {
            stored
                .iter()
                .any(|e| matches!(&e.kind, EventKind::Message { role: r, .. } if *r == role))
        };
        let user_spoke = said(Role::User);
        // The wizard answered: a request the user's words were waiting for is owed no more.
        if said(Role::Wizard) && !user_spoke {
            self.copilot.again = false;
        }
        let opening = copilot.opening
            && !self.copilot.opening_asked
            && !self.session.wizard_spoke
            && self.session.suggested == 0
            && self.everyone_joined();
        if !(user_spoke || opening) {
            return;
        }
        self.copilot.opening_asked |= opening;
        if self.copilot.in_flight {
            self.copilot.again |= user_spoke;
            return;
        }
        self.ask_copilot();
    }

    fn ask_copilot(&mut self) {
        let (Some(copilot), Some(inbox)) = (&self.study.study.copilot, self.inbox.clone()) else {
            return;
        };
        let Some(client) = self
            .app
            .systems
            .client(&self.study.study.id, &copilot.system)
        else {
            return;
        };
        self.copilot.in_flight = true;
        tokio::spawn(super::model_user::ask_copilot(
            client,
            self.app.store.clone(),
            self.session.id.clone(),
            self.session.messages,
            inbox,
        ));
    }

    /// Shows the copilot's suggestion to the wizard, unless the dialogue has moved on since it
    /// was asked for; then the copilot is asked again if the user has spoken since.
    async fn on_copilot(&mut self, outcome: super::model_user::WizardOutcome, asked_at: u32) {
        self.copilot.in_flight = false;
        if self.session.is_ended() {
            return;
        }
        if self.session.messages != asked_at {
            if std::mem::take(&mut self.copilot.again) {
                self.ask_copilot();
            }
            return;
        }
        self.copilot.again = false;
        let system = self
            .study
            .study
            .copilot
            .as_ref()
            .map(|c| c.system.clone())
            .unwrap_or_default();
        match outcome {
            Ok(text) => {
                let suggest = Command::Suggest { system, text };
                if let Err(StepError::Refused(r)) = self.step(Actor::System, suggest).await {
                    tracing::debug!(session = self.session.id, "suggestion refused: {r}");
                }
            }
            // The wizard goes on without help: nothing is shown, nothing logged.
            Err(e) => tracing::warn!(
                session = self.session.id,
                "the copilot could not suggest the wizard's next message: {e}"
            ),
        }
    }

    /// The simulated user's turn (bot `i`): it finishes if it has stopped, else it is asked in
    /// a task of its own unless an answer is already awaited.
    async fn simulated_user_turn(&mut self, i: usize) {
        let (Some(user), Some(inbox)) = (self.bots[i].model.clone(), self.inbox.clone()) else {
            return;
        };
        if self.bots[i].stopped {
            // A user who meant to end but may not yet (the study's finish rule wants more
            // messages) is asked again, as a person would go on talking, unless it stopped for
            // want of answers; a wizard that only answers would otherwise wait for it forever.
            if self.bots[i].gave_up || engine::finish_allowed(&self.study, &self.session) {
                self.simulated_user_finish(i).await;
                return;
            }
        }
        if self.bots[i].in_flight {
            self.bots[i].again = true;
            return;
        }
        self.bots[i].in_flight = true;
        let goal = self.goal_text();
        tokio::spawn(super::model_user::ask(
            user,
            self.app.store.clone(),
            self.session.id.clone(),
            goal,
            inbox,
        ));
    }

    /// Plays the simulated user's answer: its text, then the end of the dialogue if it stopped.
    /// A move the session no longer allows is refused by the engine and dropped.
    async fn on_simulated_user(&mut self, outcome: super::model_user::Outcome) {
        let Some(i) = self.bots.iter().position(|b| b.model.is_some()) else {
            return;
        };
        self.bots[i].in_flight = false;
        if self.session.is_ended() {
            return;
        }
        let actor = Actor::Bot {
            role: Role::User,
            name: self.bots[i].actor_name(),
        };
        match outcome {
            Ok(mv) => {
                if let Some(text) = mv.text {
                    let said = self.step(actor, Command::Text { text }).await;
                    if let Err(StepError::Refused(r)) = said {
                        tracing::debug!(session = self.session.id, "simulated user refused: {r}");
                    }
                }
                if mv.finish {
                    self.bots[i].stopped = true;
                }
            }
            Err(e) => {
                // Retries were the endpoint's business: the user gives up, and the dialogue
                // ends as soon as the study allows.
                tracing::warn!(
                    session = self.session.id,
                    "the simulated user could not answer and stops: {e}"
                );
                self.bots[i].stopped = true;
                self.bots[i].gave_up = true;
            }
        }
        if self.bots[i].stopped {
            self.simulated_user_finish(i).await;
        } else if std::mem::take(&mut self.bots[i].again) {
            self.bots[i].next_at = Some(now_ms());
        }
    }

    /// The system wizard's turn (bot `i`): it is asked in a task of its own, or asked again
    /// once the answer awaited comes back.
    fn system_wizard_turn(&mut self, i: usize) {
        let (Some(system), Some(inbox)) = (self.bots[i].system.clone(), self.inbox.clone()) else {
            return;
        };
        if self.bots[i].in_flight {
            self.bots[i].again = true;
            return;
        }
        self.bots[i].in_flight = true;
        tokio::spawn(super::model_user::ask_system(
            system,
            self.app.store.clone(),
            self.session.id.clone(),
            inbox,
        ));
    }

    /// Plays the system wizard's reply as the wizard's free text. A system that cannot answer
    /// (its retries spent) ends the dialogue: nobody else would speak for the wizard.
    async fn on_system_wizard(&mut self, outcome: super::model_user::WizardOutcome) {
        let Some(i) = self.bots.iter().position(|b| b.system.is_some()) else {
            return;
        };
        self.bots[i].in_flight = false;
        if self.session.is_ended() {
            return;
        }
        match outcome {
            Ok(text) => {
                let actor = Actor::Bot {
                    role: Role::Wizard,
                    name: self.bots[i].actor_name(),
                };
                if let Err(StepError::Refused(r)) = self.step(actor, Command::Text { text }).await {
                    tracing::debug!(session = self.session.id, "system wizard refused: {r}");
                }
            }
            Err(e) => {
                tracing::warn!(
                    session = self.session.id,
                    "the system in the wizard's seat could not answer; the dialogue ends: {e}"
                );
                let abort = Command::Abort {
                    reason: EndReason::Aborted,
                };
                let _ = self.step(Actor::System, abort).await;
                return;
            }
        }
        if std::mem::take(&mut self.bots[i].again) {
            self.bots[i].next_at = Some(now_ms());
        }
    }

    /// The stopped simulated user ends the session if the study allows it now (else on a later
    /// turn, after more messages).
    async fn simulated_user_finish(&mut self, i: usize) {
        if self.session.is_ended() || !engine::finish_allowed(&self.study, &self.session) {
            return;
        }
        let actor = Actor::Bot {
            role: Role::User,
            name: self.bots[i].actor_name(),
        };
        if let Err(StepError::Refused(r)) = self.step(actor, Command::Finish).await {
            tracing::debug!(
                session = self.session.id,
                "simulated user's finish refused: {r}"
            );
        }
    }

    /// The session's goal as a simulated user's prompt shows it: the generated goal's
    /// sentences, or the study's description when it draws none.
    fn goal_text(&self) -> String {
        match &self.session.goal {
            Some(track) => {
                let text = self
                    .study
                    .study
                    .goals
                    .as_ref()
                    .and_then(|g| g.text.as_ref());
                wozkit_core::goals::describe(&track.goal, text).join("\n")
            }
            None => self.study.study.description.trim().to_string(),
        }
    }

    /// Says in the server's log that a participant's command was refused for want of storage,
    /// and why, so the operator sees the cause (a full disk, the database unreachable).
    fn log_unsaved(&self, role: Role, e: &StoreError) {
        if e.is_storage_full() {
            tracing::error!(
                session = self.session.id,
                ?role,
                "a participant's command was not saved: the database's disk is full ({e}); \
                 nothing more is stored until space is freed, and participants are told to \
                 try again"
            );
        } else {
            tracing::error!(
                session = self.session.id,
                ?role,
                "a participant's command was not saved: {e}; they were told to try again"
            );
        }
    }

    /// Runs one command: engine, then store, then the world.
    async fn step(&mut self, actor: Actor, cmd: Command) -> Result<u64, StepError> {
        let now = now_ms().max(self.session.now_ms);
        let mut rng = ChaCha8Rng::seed_from_u64(
            self.seed ^ (self.last_seq + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let out = engine::step(&self.study, &self.session, &actor, cmd, now, &mut rng)
            .map_err(StepError::Refused)?;
        if out.events.is_empty() {
            self.session = out.session;
            return Ok(self.last_seq);
        }
        let new = out
            .events
            .into_iter()
            .map(|(actor, kind)| NewEvent {
                actor,
                kind,
                at_ms: now,
            })
            .collect();
        let stored = match self
            .app
            .store
            .append_after(&self.session.id, self.last_seq, new)
            .await
        {
            Ok(stored) => stored,
            Err(e) => return Err(self.unstored(e)),
        };
        self.session = out.session;
        self.last_seq = stored.last().map_or(self.last_seq, |e| e.seq);
        if self.session.is_ended() && self.ended_at.is_none() {
            self.finalize().await;
        }
        self.broadcast(&stored);
        self.schedule_bots(&stored);
        self.schedule_copilot(&stored);
        Ok(self.last_seq)
    }

    /// What a failed append means for the room: a log that moved on stops the task.
    fn unstored(&mut self, e: StoreError) -> StepError {
        if let StoreError::LogMoved { last, .. } = e {
            tracing::warn!(
                session = self.session.id,
                ours = self.last_seq,
                log = last,
                "another writer appended to this room's log; stopping the room here so that it \
                 is rebuilt from the log"
            );
            self.moved = true;
            return StepError::Moved;
        }
        StepError::Store(e)
    }

    fn schedule_bots(&mut self, stored: &[Event]) {
        if self.session.is_ended() {
            return;
        }
        let now = now_ms();
        for b in &mut self.bots {
            b.observe(stored, &self.session, now);
        }
    }
}
