//! The room's outputs: recording the end of the session (and moving the participants on), and
//! sending frames to connections. Every frame for a role is serialised once and shared.

use std::borrow::Cow;
use std::sync::Arc;

use wozkit_core::event::{Event, EventKind, Role};
use wozkit_core::model::PageKind;
use wozkit_store::ParticipantPatch;

use super::RoomActor;
use crate::app::now_ms;
use crate::flow;
use crate::room::view;
use crate::ws::frames::ServerFrame;

impl RoomActor {
    /// Records the end on the session and sends both participants on to their next page.
    /// Idempotent, so a room rebuilt after a crash in the middle of it finishes the job.
    pub(super) async fn finalize(&mut self) {
        self.ended_at = Some(now_ms());
        self.join_deadline = None;
        for b in &mut self.bots {
            b.next_at = None;
        }
        let Some((reason, _)) = self.session.ended else {
            return;
        };
        let store = &self.app.store;
        if let Err(e) = store
            .end_session(&self.session.id, reason, self.session.now_ms)
            .await
        {
            tracing::error!(
                session = self.session.id,
                "cannot mark the session ended: {e}"
            );
        }
        let participants = match store.participants_in_session(&self.session.id).await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(session = self.session.id, "cannot list participants: {e}");
                return;
            }
        };
        for p in participants {
            let Some(role) = p.role else { continue };
            let i = flow::index(&p.flow_step);
            if flow::kind_at(&self.study.study, role, i) != PageKind::Room {
                continue;
            }
            let patch = ParticipantPatch {
                flow_step: Some(flow::encode(&self.study.study, role, i + 1)),
                ..ParticipantPatch::default()
            };
            if let Err(e) = store.update_participant(&p.id, patch).await {
                tracing::error!(participant = p.id, "cannot move the participant on: {e}");
            }
        }
    }

    /// Sends stored events, partner notices, views and (at the end) `ended` to every connection.
    ///
    /// Every connection gets its events before any view is computed: a view (the wizard's
    /// evaluates every action's condition for every robot and place) costs far more than the
    /// events, and the partner should not wait for it to see a message. Each connection still
    /// receives its events first and then its view.
    pub(super) fn broadcast(&mut self, stored: &[Event]) {
        // Observers see both sides, whether or not each has a connection.
        let watched = !self.observers.is_empty();
        let roles: Vec<Role> = [Role::User, Role::Wizard]
            .into_iter()
            .filter(|role| watched || self.conns.iter().any(|c| c.role == *role))
            .collect();
        // An event most roles see unchanged is serialised once for all of them.
        let mut shared: Vec<Option<Arc<str>>> = vec![None; stored.len()];
        for &role in &roles {
            let mut frames: Vec<Arc<str>> = vec![];
            for (e, shared) in stored.iter().zip(shared.iter_mut()) {
                match view::event_for(&self.study, role, e) {
                    Some(Cow::Borrowed(e)) => frames.push(
                        shared
                            .get_or_insert_with(|| ServerFrame::Event { event: e }.text().into())
                            .clone(),
                    ),
                    Some(Cow::Owned(e)) => {
                        frames.push(ServerFrame::Event { event: &e }.text().into());
                    }
                    None => {}
                }
                let status = match &e.kind {
                    EventKind::Disconnected { role: r, .. } if *r != role => Some("reconnecting"),
                    EventKind::Reconnected { role: r } if *r != role => Some("back"),
                    _ => None,
                };
                if let Some(status) = status {
                    frames.push(ServerFrame::Partner { status }.text().into());
                }
            }
            for f in &frames {
                self.send_role(role, f);
            }
        }
        // One condition context for both views (see `view::Basis`).
        let basis = view::Basis::new(&self.study, &self.session);
        for &role in &roles {
            let view = self.role_view_frame(role, &basis);
            self.send_role(role, &view);
        }
        if stored
            .iter()
            .any(|e| matches!(e.kind, EventKind::SessionEnded { .. }))
        {
            self.announce_end = true;
        }
    }

    /// Sends `ended` to everyone, after the step's ack (so a client sees its ack first).
    pub(super) fn flush_end(&mut self) {
        if !std::mem::take(&mut self.announce_end) {
            return;
        }
        let targets: Vec<(u64, String)> =
            self.conns.iter().map(|c| (c.id, c.next.clone())).collect();
        for (id, next) in targets {
            let frame = self.ended_frame(&next);
            self.send_to(id, frame);
        }
        if !self.observers.is_empty() {
            let next = format!("/researcher/session/{}", self.session.id);
            let frame = self.ended_frame(&next);
            for role in [Role::User, Role::Wizard] {
                self.send_observers(role, &frame);
            }
            self.send_seats();
        }
    }

    /// A whole view for one new recipient (a connection or an observer joining).
    pub(super) fn view_frame(&self, role: Role, basis: &view::Basis) -> Arc<str> {
        let _timed = self.app.metrics.view_timer();
        view::view(&self.study, &self.session, role, now_ms(), basis)
            .frame()
            .into()
    }

    /// The view for every recipient of `role` (its connections and the observers): the action
    /// panel is left out when they all hold it already ([`view::View::omit_panel_if_sent`];
    /// a recipient added since then resets that, see [`RoomActor::recipient_added`]).
    fn role_view_frame(&mut self, role: Role, basis: &view::Basis) -> Arc<str> {
        let _timed = self.app.metrics.view_timer();
        let mut v = view::view(&self.study, &self.session, role, now_ms(), basis);
        if role == Role::Wizard {
            self.panel_sent = v.omit_panel_if_sent(self.panel_sent.as_ref());
        }
        v.frame().into()
    }

    /// A connection or observer joined: it holds no panel yet, so the next view to its role
    /// carries the whole panel again.
    pub(super) fn recipient_added(&mut self) {
        self.panel_sent = None;
    }

    /// `ended` when the session is over, else an empty frame (skipped).
    pub(super) fn ended_frame(&self, next: &str) -> Arc<str> {
        match self.session.ended {
            Some((reason, _)) => ServerFrame::Ended {
                reason: reason.as_str(),
                next,
            }
            .text()
            .into(),
            None => "".into(),
        }
    }

    pub(super) fn send_role(&mut self, role: Role, frame: &Arc<str>) {
        // A connection whose queue is full is too slow to keep up: drop it (its task then
        // closes the socket and the browser reconnects with its last seq).
        self.conns
            .retain(|c| c.role != role || c.out.try_send(frame.clone()).is_ok());
        self.send_observers(role, frame);
    }

    pub(super) fn send_to(&mut self, conn: u64, frame: Arc<str>) {
        if frame.is_empty() {
            return;
        }
        self.conns
            .retain(|c| c.id != conn || c.out.try_send(frame.clone()).is_ok());
    }
}
