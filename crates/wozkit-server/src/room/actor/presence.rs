//! Presence: a connection joining the room (catching up on what it missed, then `Join` or
//! `Reconnect`, whose broadcast brings its first view) and the last connection of a role leaving (`Disconnect`, which starts the grace
//! period).

use std::sync::Arc;

use tokio::sync::mpsc;
use wozkit_core::engine::Command;
use wozkit_core::event::{Actor, Role};

use super::{Conn, RoomActor};
use crate::room::view;
use crate::ws::frames::{ServerFrame, error_frame};

impl RoomActor {
    pub(super) async fn connect(
        &mut self,
        conn: u64,
        role: Role,
        participant: &str,
        last_seq: u64,
        next: String,
        out: mpsc::Sender<Arc<str>>,
    ) {
        if !self.seated(role, participant) {
            refuse_taken_seat(&out, &next);
            return;
        }
        self.conns.push(Conn {
            id: conn,
            role,
            next,
            out,
        });
        self.recipient_added();
        let missed = match self.app.store.events(&self.session.id, last_seq).await {
            Ok(events) => events,
            Err(e) => {
                tracing::error!(session = self.session.id, "cannot read the log: {e}");
                self.send_to(
                    conn,
                    error_frame(None, "internal", "the server could not read the session").into(),
                );
                return;
            }
        };
        // A participant who joins or comes back gets the view after its `Join` or `Reconnect`
        // is stored (that step's broadcast sends it), so its first view already counts it in.
        let presence = self.presence_command(role);
        let frames = self.catch_up(conn, role, &missed, presence.is_none());
        for f in frames.into_iter().filter(|f| !f.is_empty()) {
            self.send_to(conn, f);
        }
        let Some((actor, command)) = presence else {
            return;
        };
        let joining = matches!(command, Command::Join { .. });
        let before = self.last_seq;
        let stored = self.step(actor, command).await.is_ok() && self.last_seq != before;
        if !stored {
            // Nothing was stored, so no broadcast: the connection still needs its view.
            let frame = self.view_frame(role, &view::Basis::new(&self.study, &self.session));
            self.send_to(conn, frame);
        }
        if joining && self.everyone_joined() {
            self.join_deadline = None;
        }
    }

    /// The frames a connection of `role` gets on joining: the events it missed, its view
    /// (`with_view`), the partner's absence and the session's end.
    fn catch_up(
        &self,
        conn: u64,
        role: Role,
        missed: &[wozkit_core::event::Event],
        with_view: bool,
    ) -> Vec<Arc<str>> {
        let mut frames: Vec<Arc<str>> = missed
            .iter()
            .filter_map(|e| view::event_for(&self.study, role, e))
            .map(|e| ServerFrame::Event { event: &e }.text().into())
            .collect();
        if with_view {
            frames.push(self.view_frame(role, &view::Basis::new(&self.study, &self.session)));
        }
        if self.session.away.iter().any(|(r, _)| *r == role.other()) {
            frames.push(
                ServerFrame::Partner {
                    status: "reconnecting",
                }
                .text()
                .into(),
            );
        }
        if let Some(c) = self.conns.iter().find(|c| c.id == conn) {
            frames.push(self.ended_frame(&c.next));
        }
        frames
    }

    /// Whether `participant` holds the seat of `role` (a role nobody is recorded in counts
    /// anybody of that role in, as before seats could be taken over).
    pub(super) fn seated(&self, role: Role, participant: &str) -> bool {
        let mut of_role = self.humans.iter().filter(|(r, _)| *r == role).peekable();
        of_role.peek().is_none() || of_role.any(|(_, p)| p == participant)
    }

    /// What a new connection of `role` records: `Join` the first time, `Reconnect` after a
    /// drop, nothing for a second tab, a bot's role or an ended session.
    fn presence_command(&self, role: Role) -> Option<(Actor, Command)> {
        if self.session.is_ended() {
            return None;
        }
        let participant = self
            .humans
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, p)| p.clone())?;
        if !self.session.joined.contains(&role) {
            let actor = Actor::Participant {
                role,
                participant: Some(participant),
            };
            Some((actor, Command::Join { role, bot: false }))
        } else if self.session.away.iter().any(|(r, _)| *r == role) {
            Some((Actor::System, Command::Reconnect { role }))
        } else {
            None
        }
    }

    /// After a role's last connection closed: start its grace period (not while stopping: a
    /// restart is not the participant's doing, and the rebuilt room records it anyway).
    pub(super) async fn maybe_disconnect(&mut self, role: Role) {
        let still_here = self.conns.iter().any(|c| c.role == role);
        if still_here
            || self.session.is_ended()
            || *self.app.shutdown.borrow()
            || !self.session.joined.contains(&role)
        {
            return;
        }
        let _ = self.step(Actor::System, Command::Disconnect { role }).await;
    }
}

/// Tells a connection whose seat a researcher took over while the participant was away that
/// it cannot rejoin, and ends this page's session (it does not reconnect) without seating them
/// again.
fn refuse_taken_seat(out: &mpsc::Sender<Arc<str>>, next: &str) {
    let refused = error_frame(
        None,
        "seat_taken",
        "A researcher has taken over your place in this conversation while you were away, so you cannot rejoin it. Thank you for taking part.",
    );
    let ended = ServerFrame::Ended {
        reason: "seat_taken",
        next,
    }
    .text();
    let _ = out.try_send(refused.into());
    let _ = out.try_send(ended.into());
}
