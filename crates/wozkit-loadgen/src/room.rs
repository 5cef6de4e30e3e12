//! One simulated participant in its room: reads every frame, keeps the latest view, and on
//! each tick of its own clock sends the move the policy picks (at most one command in flight:
//! a participant does not press the next button before the last one answered).
//!
//! Latency bookkeeping (see `stats`): the events a command caused arrive before its `ack`, and
//! a `view` closes each batch of events, so at the ack the sender knows the `seq` of its own
//! event in the last batch; the partner notes the arrival of every event the other role's
//! participant caused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tokio_tungstenite::tungstenite::Message;

use crate::Ctx;
use crate::error::Failure;
use crate::frames::{
    self, AckFrame, EndedFrame, ErrorFrame, EventFrame, SessionFrame, ViewFrame, frame_type,
};
use crate::pages::Ws;
use crate::policy::{self, Dice, Known, Role};
use crate::stats::{Pairing, Recorder};

/// How a stay in the room ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The session ended (terminal state, time limit, …): the participant may join again.
    Ended,
    /// The run is over.
    Stopped,
}

/// The participant's own event in the batch of events closed by the latest `view`.
#[derive(Clone, Copy)]
struct Batch {
    mine: Option<u64>,
    arrived: Instant,
}

struct Play<'a> {
    ctx: &'a Ctx,
    /// The run's figures and those of this participant's URL.
    stats: Recorder<'a>,
    role: Role,
    /// Set by `welcome`: the session and the map shared with the partner.
    session: Option<(String, Arc<Mutex<Pairing>>)>,
    /// Commands sent and not yet answered, with their send instants.
    pending: HashMap<String, Instant>,
    /// The batch being received, and the last complete one.
    batch: Option<Batch>,
    last_batch: Option<Batch>,
    /// The latest `view` frame, parsed only when a move is decided.
    view: Option<String>,
    /// The latest `view` frame that carried the action panel (views leave out an unchanged one).
    panel_view: Option<String>,
    /// The database's tables and rows (wizard) or the goal (user) learned from the frames.
    known: Known,
    next_id: u64,
}

/// Plays in the room until the session ends, the run stops or the connection fails.
/// `first_visit` is cleared when the participant reaches a room for the first time.
pub async fn play(
    ctx: &Ctx,
    stats: Recorder<'_>,
    mut ws: Ws,
    role: Role,
    dice: &mut Dice,
    stop: &mut watch::Receiver<bool>,
    first_visit: &mut bool,
) -> Result<Outcome, Failure> {
    let mut p = Play {
        ctx,
        stats,
        role,
        session: None,
        pending: HashMap::new(),
        batch: None,
        last_batch: None,
        view: None,
        panel_view: None,
        known: Known::default(),
        next_id: 1,
    };
    let result = p.run(&mut ws, dice, stop, first_visit).await;
    if let Some((session, pairing)) = p.session.take() {
        stats.left_room();
        stats.release_pairing(&session, pairing);
    }
    let _ = ws.close(None).await;
    result
}

impl Play<'_> {
    async fn run(
        &mut self,
        ws: &mut Ws,
        dice: &mut Dice,
        stop: &mut watch::Receiver<bool>,
        first_visit: &mut bool,
    ) -> Result<Outcome, Failure> {
        let period = self.ctx.period;
        let first = tokio::time::Instant::now() + period.mul_f64(dice.unit());
        let mut ticks = tokio::time::interval_at(first, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            if *stop.borrow() {
                return Ok(Outcome::Stopped);
            }
            tokio::select! {
                msg = ws.next() => {
                    let text = match msg {
                        Some(Ok(Message::Text(t))) => t,
                        Some(Ok(Message::Close(_))) | None => {
                            return Err(Failure::new("ws_closed", "the server closed the room connection"));
                        }
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => return Err(Failure::new("ws_closed", e.to_string())),
                    };
                    if let Some(outcome) = self.on_frame(text.as_str(), first_visit) {
                        return Ok(outcome);
                    }
                }
                _ = ticks.tick() => self.on_tick(ws, dice).await?,
                _ = stop.changed() => return Ok(Outcome::Stopped),
            }
        }
    }

    /// Handles one frame; `Some` when the stay is over.
    fn on_frame(&mut self, text: &str, first_visit: &mut bool) -> Option<Outcome> {
        let now = Instant::now();
        let stats = self.stats;
        let Some(kind) = frame_type(text) else {
            stats.error("bad_frame");
            return None;
        };
        match kind.as_str() {
            "event" => self.on_event(text, now),
            "view" => {
                self.last_batch = self.batch.take();
                // A wizard's view leaves out an unchanged action panel: keep the last view
                // that had one (a key, not text inside a string, where quotes are escaped).
                if text.contains("\"actions\":") {
                    self.panel_view = Some(text.to_string());
                }
                self.view = Some(text.to_string());
            }
            "ack" => {
                let Ok(ack) = serde_json::from_str::<AckFrame>(text) else {
                    stats.error("bad_frame");
                    return None;
                };
                if let Some(sent) = self.pending.remove(&ack.id) {
                    stats.count_in_window(|s| &s.acked, sent);
                    self.correlate(sent, ack.seq, now);
                }
            }
            "error" => {
                let e = serde_json::from_str::<ErrorFrame>(text).ok();
                let code = e.as_ref().map_or("bad_frame", |e| e.code.as_str());
                stats.error(code);
                if let Some(id) = e.as_ref().and_then(|e| e.id.as_ref()) {
                    self.pending.remove(id);
                }
            }
            "ended" => {
                let reason = serde_json::from_str::<EndedFrame>(text)
                    .map_or_else(|_| "unknown".to_string(), |e| e.reason);
                stats.ended(&reason);
                return Some(Outcome::Ended);
            }
            "welcome" => self.on_welcome(text, first_visit),
            _ => {}
        }
        None
    }

    /// Handles an event frame arrived at `now`: counts it, notes the batch it starts (and its
    /// first event of ours), and samples the latency of the other side's event.
    fn on_event(&mut self, text: &str, now: Instant) {
        let stats = self.stats;
        stats.count_in_window(|s| &s.events, now);
        let Ok(f) = serde_json::from_str::<EventFrame>(text) else {
            stats.error("bad_frame");
            return;
        };
        self.known.event(text);
        let by = f.event.actor.participant_role();
        if by == Some(self.role) {
            let b = self.batch.get_or_insert(Batch {
                mine: None,
                arrived: now,
            });
            b.mine.get_or_insert(f.event.seq);
        } else {
            self.batch.get_or_insert(Batch {
                mine: None,
                arrived: now,
            });
        }
        if by == Some(self.role.other())
            && let Some((_, pairing)) = &self.session
        {
            let matched = lock(pairing).received(f.event.seq, now);
            if let Some((sent, latency)) = matched {
                stats.sample(sent, latency);
            }
        }
    }

    /// Handles the room's welcome: the session joined (only the first welcome counts).
    fn on_welcome(&mut self, text: &str, first_visit: &mut bool) {
        let stats = self.stats;
        if self.session.is_some() {
            return;
        }
        let Ok(w) = serde_json::from_str::<SessionFrame>(text) else {
            stats.error("bad_frame");
            return;
        };
        self.known.welcome(text);
        stats.joined_room(&w.session, std::mem::take(first_visit));
        let pairing = stats.pairing(&w.session);
        self.session = Some((w.session, pairing));
    }

    /// At the ack of a command sent at `sent`: its own event is the first event of ours in the
    /// batch that arrived after the send (a command that stored nothing has none).
    fn correlate(&mut self, sent: Instant, ack_seq: u64, now: Instant) {
        let stats = self.stats;
        let mine = self
            .last_batch
            .filter(|b| b.arrived >= sent)
            .and_then(|b| b.mine)
            .filter(|seq| *seq <= ack_seq);
        match (mine, &self.session) {
            (Some(seq), Some((_, pairing))) => {
                if let Some((sent, latency)) = lock(pairing).sent(seq, sent) {
                    stats.sample(sent, latency);
                }
            }
            _ => stats.count_in_window(|s| &s.uncorrelated, now),
        }
    }

    async fn on_tick(&mut self, ws: &mut Ws, dice: &mut Dice) -> Result<(), Failure> {
        let stats = self.stats;
        if !self.pending.is_empty() {
            stats.count_in_window(|s| &s.skipped_busy, Instant::now());
            return Ok(());
        }
        let Some(text) = &self.view else {
            return Ok(());
        };
        let mut view = match serde_json::from_str::<ViewFrame>(text) {
            Ok(v) => v.view,
            Err(_) => {
                stats.error("bad_view");
                self.view = None;
                return Ok(());
            }
        };
        if view.actions.is_none()
            && let Some(panel) = &self.panel_view
        {
            view.actions = serde_json::from_str::<ViewFrame>(panel)
                .ok()
                .and_then(|v| v.view.actions);
        }
        let Some(cmd) = policy::next_move(self.role, &view, &self.known, dice) else {
            return Ok(());
        };
        let id = format!("c{}", self.next_id);
        self.next_id += 1;
        let frame = frames::command(&id, cmd);
        let now = Instant::now();
        self.pending.insert(id, now);
        stats.count_in_window(|s| &s.sent, now);
        ws.send(Message::Text(frame.into()))
            .await
            .map_err(|e| Failure::new("ws_closed", e.to_string()))
    }
}

fn lock(p: &Mutex<Pairing>) -> std::sync::MutexGuard<'_, Pairing> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}
