//! Observers and takeovers: a researcher's read-only connection receives every frame both roles
//! are sent (wrapped as `observed`, with the role) plus `seats`, the state of each role's seat;
//! nothing about observers reaches the participants or the log. A takeover seats a researcher's
//! participant in a role whose participant is not connected, and logs `TakenOver`.

use std::sync::Arc;

use tokio::sync::mpsc;
use wozkit_core::event::{Actor, EventKind, Role};
use wozkit_store::NewEvent;

use super::{Observer, RoomActor};
use crate::app::now_ms;
use crate::room::TakeOverRefused;
use crate::room::view;
use crate::ws::frames::{ServerFrame, error_frame};

/// `frame` (a server frame's JSON text) as an observer receives it: `{"type":"observed",
/// "role":ROLE,"frame":FRAME}`. Built from the text already serialised for the role.
pub fn observed(role: Role, frame: &str) -> Arc<str> {
    format!(
        "{{\"type\":\"observed\",\"role\":\"{}\",\"frame\":{frame}}}",
        role.as_str()
    )
    .into()
}

impl RoomActor {
    /// Sends a frame of `role` to every observer; an observer whose queue is full is dropped
    /// (its connection then closes; the page reconnects and catches up).
    pub(super) fn send_observers(&mut self, role: Role, frame: &Arc<str>) {
        if self.observers.is_empty() || frame.is_empty() {
            return;
        }
        let wrapped = observed(role, frame);
        self.observers
            .retain(|o| o.out.try_send(wrapped.clone()).is_ok());
    }

    fn send_observer(&mut self, conn: u64, frame: Arc<str>) {
        if frame.is_empty() {
            return;
        }
        self.observers
            .retain(|o| o.id != conn || o.out.try_send(frame.clone()).is_ok());
    }

    /// The state of one role's seat: `bot`, `here` (connected), `away` (in its grace period),
    /// `absent` (not joined yet, or gone without a grace period), `ended`.
    fn seat(&self, role: Role) -> &'static str {
        if self.session.is_ended() {
            "ended"
        } else if self.bots.iter().any(|b| b.role == role) {
            "bot"
        } else if self.conns.iter().any(|c| c.role == role) {
            "here"
        } else if self.session.away.iter().any(|(r, _)| *r == role) {
            "away"
        } else {
            "absent"
        }
    }

    /// Why the seat of `role` cannot be taken over now, if it cannot.
    fn take_over_refusal(&self, role: Role) -> Option<TakeOverRefused> {
        match self.seat(role) {
            "ended" => Some(TakeOverRefused::Ended),
            "bot" => Some(TakeOverRefused::Bot),
            "here" => Some(TakeOverRefused::Present),
            _ => None,
        }
    }

    /// The `seats` frame: each role's seat, and whether the wizard's may be taken over.
    fn seats_frame(&self) -> Arc<str> {
        serde_json::json!({
            "type": "seats",
            "user": self.seat(Role::User),
            "wizard": self.seat(Role::Wizard),
            "can_take_over": self.take_over_refusal(Role::Wizard).is_none(),
        })
        .to_string()
        .into()
    }

    /// Sends `seats` to every observer (after anything that may change a seat).
    pub(super) fn send_seats(&mut self) {
        if self.observers.is_empty() {
            return;
        }
        let frame = self.seats_frame();
        self.observers
            .retain(|o| o.out.try_send(frame.clone()).is_ok());
    }

    /// An observer joins: both roles' welcome, the events after `last_seq` as each role sees
    /// them, each role's view (and partner and end notices), then `seats`.
    pub(super) async fn observe(&mut self, conn: u64, last_seq: u64, out: mpsc::Sender<Arc<str>>) {
        self.observers.push(Observer { id: conn, out });
        self.recipient_added();
        let missed = match self.app.store.events(&self.session.id, last_seq).await {
            Ok(events) => events,
            Err(e) => {
                tracing::error!(session = self.session.id, "cannot read the log: {e}");
                let frame = error_frame(None, "internal", "the server could not read the session");
                self.send_observer(conn, frame.into());
                return;
            }
        };
        let basis = view::Basis::new(&self.study, &self.session);
        let next = format!("/researcher/session/{}", self.session.id);
        let mut frames: Vec<Arc<str>> = vec![];
        for role in [Role::User, Role::Wizard] {
            let participant = self
                .humans
                .iter()
                .find(|(r, _)| *r == role)
                .map_or("", |(_, p)| p.as_str());
            let welcome = ServerFrame::Welcome {
                role,
                session: &self.session.id,
                participant,
                study: view::welcome_study(&self.study, role),
            };
            frames.push(observed(role, &welcome.text()));
            for e in missed
                .iter()
                .filter_map(|e| view::event_for(&self.study, role, e))
            {
                frames.push(observed(role, &ServerFrame::Event { event: &e }.text()));
            }
            frames.push(observed(role, &self.view_frame(role, &basis)));
            if self.session.away.iter().any(|(r, _)| *r == role.other()) {
                let away = ServerFrame::Partner {
                    status: "reconnecting",
                };
                frames.push(observed(role, &away.text()));
            }
            let ended = self.ended_frame(&next);
            if !ended.is_empty() {
                frames.push(observed(role, &ended));
            }
        }
        frames.push(self.seats_frame());
        for f in frames {
            self.send_observer(conn, f);
        }
    }

    /// Seats `participant` (a researcher's) in `role` instead of its absent participant: logs
    /// `TakenOver` (acted by the researcher's participant) and sends it like any event. The
    /// participant who left is refused if they come back ([`RoomActor::seated`]).
    pub(super) async fn take_over(
        &mut self,
        role: Role,
        researcher: String,
        participant: String,
    ) -> Result<(), TakeOverRefused> {
        if let Some(refusal) = self.take_over_refusal(role) {
            return Err(refusal);
        }
        let new = NewEvent {
            actor: Actor::Participant {
                role,
                participant: Some(participant.clone()),
            },
            kind: EventKind::TakenOver {
                role,
                researcher,
                participant: participant.clone(),
            },
            at_ms: now_ms().max(self.session.now_ms),
        };
        let append = self
            .app
            .store
            .append_after(&self.session.id, self.last_seq, vec![new]);
        let stored = match append.await {
            Ok(stored) => stored,
            Err(e) => {
                tracing::error!(session = self.session.id, "cannot log a takeover: {e}");
                self.unstored(e);
                return Err(TakeOverRefused::Store);
            }
        };
        self.last_seq = stored.last().map_or(self.last_seq, |e| e.seq);
        self.humans.retain(|(r, _)| *r != role);
        self.humans.push((role, participant));
        self.broadcast(&stored);
        Ok(())
    }
}
