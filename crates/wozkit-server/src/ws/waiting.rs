//! A waiting-room connection: holds the participant's place in the lobby while it is open, sends
//! `waiting` updates, and ends with `paired` (go to the room), `ended` (no partner: go to the
//! completion page) or `reassigned` (the lobby moved this waiter to the other role: go read its
//! instructions; see [`Lobby::switch_role`](crate::lobby::Lobby::switch_role)). The wait limit counts from the first time the participant was queued.
//!
//! Heartbeat: the connection is pinged every `heartbeat_ms` (browsers answer WebSocket pings by
//! themselves). Whatever the client sends counts as a sign of life and is passed on to the
//! lobby, which pairs only waiters heard from within `stale_after_ms`; a connection silent for
//! longer gives its place up and closes, as if the tab had been closed.
//!
//! A partner's notice goes to the place it took. If that was an earlier place of this
//! participant (a connection cut by a killed instance, not yet gone from the table) while this
//! connection was queuing, no notice reaches this one and its own place stays held; so the
//! participant's record is read right after queuing and then every refresh, and a seat found
//! there sends them to that session.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use wozkit_core::event::Role;
use wozkit_core::load::LoadedStudy;
use wozkit_core::model::OnNoPartner;
use wozkit_store::{Participant, Platform};

use super::frames::{self, ClientFrame, ServerFrame, error_frame};
use super::{incoming, send};
use crate::app::{AppState, now_ms, sleep_until_ms};
use crate::lobby::{self, Enqueued, QueueKey, Ticket, Told};
use crate::security::RateLimiter;
use crate::{flow, pairing};
use tokio::time::Instant;

/// Key of the private pair in a participant's external ids (lab links and `/try`).
pub const PAIR_KEY: &str = "pair";

/// The queue of test participants (`test=1`) whose link names no pair: they are paired among
/// themselves, never with the crowd, whose sessions would otherwise be lost from payments and
/// exports along with theirs. No link can name it (ids from links have no control characters).
pub const TEST_QUEUE: &str = "\u{1}test";

/// The queue a participant waits in: their link's private pair, the test queue for a test
/// participant without one, or the study's public queue (`None`).
pub fn queue_of(p: &Participant) -> Option<String> {
    match p.external_ids.get(PAIR_KEY) {
        Some(pair) => Some(pair.clone()),
        None if p.is_test() => Some(TEST_QUEUE.to_owned()),
        None => None,
    }
}

/// How long a finished waiting connection waits for the client's answer to its close frame.
const CLOSE_LINGER: Duration = Duration::from_secs(5);

/// How a waiting connection ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// The last frame (`paired`, `ended`, an error) is sent: close with a handshake.
    Done,
    /// The client is gone, silent or the server stops: nothing more to say.
    Gone,
}

/// Serves a waiting-room connection until the participant is paired, gives up or leaves.
pub async fn run(
    app: AppState,
    mut socket: WebSocket,
    limiter: RateLimiter,
    p: Participant,
    study: Arc<LoadedStudy>,
    role: Role,
    next: String,
) {
    if serve(&app, &mut socket, limiter, p, study, role, next).await == End::Done {
        close(&app, socket).await;
    }
}

/// Ends a connection whose last frame is sent with a closing handshake: a close frame, then the
/// client's frames are read (and dropped) until its close frame comes, for at most
/// [`CLOSE_LINGER`]. Dropping the socket at once would reset the connection if a frame of the
/// client (a pong) were still unread, and a client may then lose the last frame (`paired`)
/// before reading it.
async fn close(app: &AppState, mut socket: WebSocket) {
    let bye = Message::Close(Some(CloseFrame {
        code: close_code::NORMAL,
        reason: "".into(),
    }));
    if socket.send(bye).await.is_err() {
        return;
    }
    let drain = async {
        while let Some(Ok(msg)) = socket.recv().await {
            if matches!(msg, Message::Close(_)) {
                return;
            }
        }
    };
    tokio::select! {
        () = drain => {}
        () = tokio::time::sleep(CLOSE_LINGER) => {}
        () = app.stopping() => {}
    }
}

/// What the waiting loop does after one of its events.
enum Step {
    /// Keep waiting in the same place.
    Stay,
    /// Queue again (the partner's pairing failed, or the place was lost and given back).
    Requeue,
    /// The connection is done.
    End(End),
}

/// One waiting connection: who waits, where, and the lobby's times for it.
struct Waiter<'a> {
    app: &'a AppState,
    p: Participant,
    study: Arc<LoadedStudy>,
    role: Role,
    /// Where the page goes once paired.
    next: String,
    key: QueueKey,
    ticket: Ticket,
    /// A waiter heard from less recently than this is not paired (and gives its place up).
    stale_after: Duration,
    /// How often the lobby's table is told that this connection is alive: well within the
    /// stale cut-off, without a write per frame.
    refresh: Duration,
    /// How long the lobby keeps this participant's waiting time after the connection is gone.
    grace: Duration,
    /// Only the public queue's crowd participants change roles: a lab link may have named
    /// the role, and a private pair has its two people.
    switchable: bool,
}

/// Serves a waiting-room connection until the participant is paired, gives up or leaves: the
/// pilot's shortcut, then queue, wait (each event its own method of [`Waiter`]), and queue again
/// when told to.
async fn serve(
    app: &AppState,
    socket: &mut WebSocket,
    mut limiter: RateLimiter,
    p: Participant,
    study: Arc<LoadedStudy>,
    role: Role,
    next: String,
) -> End {
    let w = Waiter::new(app, p, study, role, next);
    if let Some(end) = w.pilot(socket).await {
        return end;
    }
    lobby::listen(app).await;
    let mut last_heard = Instant::now();
    'enqueue: loop {
        let (since_ms, mut rx) = match w.enqueue(socket).await {
            Ok(queued) => queued,
            Err(end) => return end,
        };
        let limit_ms = u64::from(w.study.study.pairing.wait_limit_s) * 1000;
        let mut deadline = Some(since_ms + limit_ms);
        let mut ticker = tokio::time::interval(Duration::from_millis(
            app.tunables.waiting_update_ms.max(100),
        ));
        let mut heartbeat =
            tokio::time::interval(Duration::from_millis(app.tunables.heartbeat_ms.max(10)));
        // The participant's record is read now and then: a partner may have taken an earlier
        // place of theirs (a connection cut by a killed instance, its place not yet gone from
        // the table) and seated them while this connection was queuing. The notice then went
        // to that place, and this one is still held, so neither tells them. The first tick is
        // at once, right after queuing.
        let mut seat_check = tokio::time::interval(w.refresh);
        // When the table was first found without this connection's place, no notice having come.
        let mut lost_since: Option<Instant> = None;
        loop {
            let step = tokio::select! {
                told = &mut rx => w.told(socket, told.unwrap_or(Told::Retry)).await,
                _ = seat_check.tick() => w.check_seat(socket).await,
                _ = ticker.tick() => w.update(socket, since_ms).await,
                _ = heartbeat.tick() => w.heartbeat(socket, last_heard).await,
                () = sleep_until_ms(deadline.unwrap_or(u64::MAX)), if deadline.is_some() => {
                    w.wait_limit(socket, &mut deadline).await
                }
                msg = socket.recv() => {
                    if let Some(Ok(_)) = &msg {
                        last_heard = Instant::now();
                        match w.heard(&mut lost_since).await {
                            Some(told) => w.told(socket, told).await,
                            None => w.answer(socket, msg, &mut limiter).await,
                        }
                    } else {
                        w.answer(socket, msg, &mut limiter).await
                    }
                }
                () = app.stopping() => {
                    let _ = app.lobby.leave(app.store.as_ref(), &w.p.id, w.ticket.conn).await;
                    Step::End(End::Gone)
                }
            };
            match step {
                Step::Stay => {}
                Step::Requeue => continue 'enqueue,
                Step::End(end) => return end,
            }
        }
    }
}

impl<'a> Waiter<'a> {
    fn new(
        app: &'a AppState,
        p: Participant,
        study: Arc<LoadedStudy>,
        role: Role,
        next: String,
    ) -> Waiter<'a> {
        let key = QueueKey {
            study: study.study.id.clone(),
            pair: queue_of(&p),
        };
        let ticket = Ticket {
            participant: p.id.clone(),
            worker: p
                .worker_id
                .as_ref()
                .map(|w| format!("{}:{w}", p.platform.as_str())),
            role,
            conn: app.conn_id(),
        };
        let stale_after = Duration::from_millis(app.tunables.stale_after_ms);
        let switchable = key.pair.is_none() && p.platform != Platform::Lab;
        Waiter {
            app,
            grace: Duration::from_secs(u64::from(study.study.session.disconnect_grace_s)),
            p,
            study,
            role,
            next,
            key,
            ticket,
            stale_after,
            refresh: stale_after / 3,
            switchable,
        }
    }

    /// The connection is gone: the place goes, the waiting time stays for a while.
    async fn gone(&self) -> Step {
        let app = self.app;
        if let Err(e) = app
            .lobby
            .leave(app.store.as_ref(), &self.p.id, self.ticket.conn)
            .await
        {
            tracing::error!(
                participant = self.p.id,
                "lobby: cannot give up a place: {e}"
            );
        }
        app.lobby
            .gone(&self.p.id, self.ticket.conn, Instant::now() + self.grace);
        Step::End(End::Gone)
    }

    /// Sends the participant to their session (`partner`: `human` or `bot`).
    async fn paired(&self, socket: &mut WebSocket, session: &str, partner: &'static str) -> Step {
        let frame = ServerFrame::Paired {
            session,
            role: self.role,
            partner,
            next: &self.next,
        };
        let _ = send(socket, &frame.text()).await;
        Step::End(End::Done)
    }

    /// Says why the connection ends (`code`, `message`).
    async fn refuse(&self, socket: &mut WebSocket, code: &'static str, message: &str) -> Step {
        let _ = send(socket, &error_frame(None, code, message)).await;
        Step::End(End::Done)
    }

    /// A researcher piloting alone (`serve --simulated-user`): a test participant arriving as
    /// the wizard gets the simulated user at once, without queueing.
    async fn pilot(&self, socket: &mut WebSocket) -> Option<End> {
        let user = self.app.tunables.simulated_user.clone()?;
        if self.role != Role::Wizard || !self.p.is_test() {
            return None;
        }
        let step =
            match pairing::with_simulated_user(self.app, &self.study, &self.ticket, user).await {
                Ok(session) => self.paired(socket, &session, "bot").await,
                Err(e) => {
                    tracing::error!("cannot start a session with the simulated user: {e}");
                    let why = "could not start the session; reload the page";
                    self.refuse(socket, "internal", why).await
                }
            };
        match step {
            Step::End(end) => Some(end),
            Step::Stay | Step::Requeue => None,
        }
    }

    /// Queues the participant: `(since when they wait, where the lobby's notice comes)`, or the
    /// end of the connection when a partner was waiting (the pair is made here) or the lobby
    /// cannot be reached.
    async fn enqueue(
        &self,
        socket: &mut WebSocket,
    ) -> Result<(u64, tokio::sync::oneshot::Receiver<Told>), End> {
        let app = self.app;
        let enqueued = app
            .lobby
            .enqueue(
                app.store.as_ref(),
                self.key.clone(),
                self.ticket.clone(),
                now_ms(),
                self.stale_after,
            )
            .await;
        let step = match enqueued {
            Ok(Enqueued::Queued { since_ms, rx }) => return Ok((since_ms, rx)),
            Ok(Enqueued::Matched { partner, place }) => self.pair(socket, &partner, &place).await,
            Err(e) => {
                tracing::error!(participant = self.p.id, "lobby: cannot queue: {e}");
                let why = "could not join the queue; reload the page";
                self.refuse(socket, "internal", why).await
            }
        };
        Err(match step {
            Step::End(end) => end,
            Step::Stay | Step::Requeue => End::Done,
        })
    }

    /// A partner was waiting: the session is made, the partner told at its place.
    async fn pair(&self, socket: &mut WebSocket, partner: &Ticket, place: &lobby::Place) -> Step {
        let app = self.app;
        let store = app.store.as_ref();
        match pairing::pair(app, &self.study, partner, &self.ticket).await {
            Ok(session) => {
                let told = Told::Paired {
                    session: session.clone(),
                };
                if let Err(e) = app
                    .lobby
                    .tell(store, place, &partner.participant, told)
                    .await
                {
                    tracing::error!(
                        session,
                        partner = partner.participant,
                        "lobby: cannot tell the partner of their pairing: {e}"
                    );
                }
                self.paired(socket, &session, "human").await
            }
            Err(e) => {
                // The partner queues again.
                tracing::error!("cannot create the session of a pair: {e}");
                let retry = Told::Retry;
                let _ = app
                    .lobby
                    .tell(store, place, &partner.participant, retry)
                    .await;
                self.refuse(socket, "internal", "pairing failed; reload the page")
                    .await
            }
        }
    }

    /// The lobby's notice for this place.
    async fn told(&self, socket: &mut WebSocket, told: Told) -> Step {
        match told {
            Told::Paired { session } => {
                self.app.lobby.forget(&self.p.id);
                self.paired(socket, &session, "human").await
            }
            // Another tab took the place: this one is done.
            Told::Replaced => {
                let until = Instant::now() + self.grace;
                self.app.lobby.gone(&self.p.id, self.ticket.conn, until);
                self.refuse(socket, "replaced", "you are waiting in another tab")
                    .await
            }
            // The partner's pairing failed: queue again.
            Told::Retry => Step::Requeue,
        }
    }

    /// A seat found in the participant's record (taken at an earlier place of theirs) sends
    /// them there, once their place here is given up.
    async fn check_seat(&self, socket: &mut WebSocket) -> Step {
        let app = self.app;
        let session = match app.store.participant(&self.p.id).await {
            Ok(Some(Participant {
                session_id: Some(session),
                ..
            })) => session,
            Ok(_) => return Step::Stay,
            Err(e) => {
                let p = &self.p.id;
                tracing::warn!(
                    participant = p,
                    "lobby: cannot read whether the participant was seated: {e}"
                );
                return Step::Stay;
            }
        };
        // The place goes first, so nobody else takes this participant.
        match app
            .lobby
            .leave(app.store.as_ref(), &self.p.id, self.ticket.conn)
            .await
        {
            Ok(true) => {}
            // Taken at this very moment: that answer comes as the lobby's notice.
            Ok(false) => return Step::Stay,
            Err(e) => {
                let p = &self.p.id;
                tracing::warn!(
                    participant = p,
                    "lobby: cannot give up the place of a seated participant: {e}"
                );
                return Step::Stay;
            }
        }
        tracing::warn!(
            participant = self.p.id,
            session,
            "lobby: seated in a session without being told; sent there"
        );
        self.app.lobby.forget(&self.p.id);
        self.paired(socket, &session, "human").await
    }

    /// The regular update: the place in the queue and the time waited, or the other role when
    /// this one is in lasting surplus.
    async fn update(&self, socket: &mut WebSocket, since_ms: u64) -> Step {
        let app = self.app;
        let standing = app
            .lobby
            .standing(
                app.store.as_ref(),
                &self.key,
                &self.p.id,
                now_ms(),
                self.stale_after,
            )
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(participant = self.p.id, "lobby: cannot read the queue: {e}");
                None
            });
        if standing.is_some_and(|s| s.may_switch)
            && self.switchable
            && let Some(next_role) =
                switch(app, &self.study, &self.key, &self.ticket, self.grace).await
        {
            let frame = ServerFrame::Reassigned {
                role: next_role,
                message: "Too many people arrived for your role, so you now take the other one: \
                          please read its instructions, then you will be paired at once.",
                next: &self.next,
            };
            let _ = send(socket, &frame.text()).await;
            return Step::End(End::Done);
        }
        let frame = ServerFrame::Waiting {
            position: standing.map_or(1, |s| s.position),
            waited_s: now_ms().saturating_sub(since_ms) / 1000,
            limit_s: self.study.study.pairing.wait_limit_s,
        };
        if send(socket, &frame.text()).await.is_err() {
            return self.gone().await;
        }
        Step::Stay
    }

    /// The heartbeat: a ping, unless the client has been silent past the stale cut-off. A send
    /// into a dead socket still succeeds (the kernel buffers it): only an answer tells that
    /// somebody is there.
    async fn heartbeat(&self, socket: &mut WebSocket, last_heard: Instant) -> Step {
        if last_heard.elapsed() > self.stale_after {
            tracing::debug!(participant = self.p.id, "waiting connection went silent");
            return self.gone().await;
        }
        if socket
            .send(Message::Ping(Default::default()))
            .await
            .is_err()
        {
            return self.gone().await;
        }
        Step::Stay
    }

    /// The wait limit passed: the place is given up and the participant gets a bot or a "no
    /// partner" code, unless they are being paired at this very moment.
    async fn wait_limit(&self, socket: &mut WebSocket, deadline: &mut Option<u64>) -> Step {
        let app = self.app;
        match app
            .lobby
            .leave(app.store.as_ref(), &self.p.id, self.ticket.conn)
            .await
        {
            Ok(true) => {
                app.lobby.forget(&self.p.id);
                give_up(app, socket, &self.study, &self.ticket, &self.next).await;
                return Step::End(End::Done);
            }
            // Being paired at this very moment (or replaced): the answer comes as the lobby's
            // notice.
            Ok(false) => *deadline = None,
            Err(e) => {
                tracing::error!(
                    participant = self.p.id,
                    "lobby: cannot give up a place: {e}"
                );
                *deadline = Some(now_ms() + 1000);
            }
        }
        Step::Stay
    }

    /// A sign of life, passed on to the lobby; when the lobby's table no longer holds this
    /// connection's place (and no notice came), what became of it.
    async fn heard(&self, lost_since: &mut Option<Instant>) -> Option<Told> {
        let app = self.app;
        let (store, p, conn) = (app.store.as_ref(), &self.p.id, self.ticket.conn);
        match app
            .lobby
            .heard(store, p, conn, now_ms(), self.refresh)
            .await
        {
            Ok(true) => {
                *lost_since = None;
                None
            }
            Ok(false) => {
                let since = *lost_since.get_or_insert_with(Instant::now);
                let found = app
                    .lobby
                    .resolve_lost(store, &self.key, p, conn, since, self.stale_after)
                    .await;
                found.unwrap_or_else(|e| {
                    tracing::warn!(participant = p, "lobby: cannot look for a lost place: {e}");
                    None
                })
            }
            Err(e) => {
                tracing::warn!(participant = p, "lobby: cannot note a sign of life: {e}");
                None
            }
        }
    }

    /// Answers what the client sent: a pong, or why a command cannot run yet.
    async fn answer(
        &self,
        socket: &mut WebSocket,
        msg: Option<Result<Message, axum::Error>>,
        limiter: &mut RateLimiter,
    ) -> Step {
        let Some(text) = incoming(socket, msg, limiter).await else {
            return self.gone().await;
        };
        let reply = match text.as_deref().map(frames::parse) {
            None | Some(Ok(ClientFrame::Hello { .. } | ClientFrame::Typing)) => return Step::Stay,
            Some(Ok(ClientFrame::Ping)) => ServerFrame::Pong.text(),
            Some(Ok(ClientFrame::Cmd { id, .. })) => error_frame(
                Some(&id),
                "not_in_session",
                "you are still waiting for a partner",
            ),
            Some(Err(e)) => error_frame(e.id.as_deref(), e.code, &e.message),
        };
        if send(socket, &reply).await.is_err() {
            return self.gone().await;
        }
        Step::Stay
    }
}

/// Moves this waiter to the other role if its role is in lasting surplus
/// ([`Lobby::switch_role`](crate::lobby::Lobby::switch_role)): the new role, or `None` when
/// no switch is due (or the store cannot be asked; the next update asks again).
async fn switch(
    app: &AppState,
    study: &LoadedStudy,
    key: &QueueKey,
    ticket: &Ticket,
    grace: Duration,
) -> Option<Role> {
    let to = ticket.role.other();
    let step = flow::after_switch(&study.study, to)?;
    let arrival = Duration::from_secs(u64::from(study.study.pairing.arrival_s));
    let switched = app
        .lobby
        .switch_role(
            app.store.as_ref(),
            key,
            ticket,
            flow::encode(&study.study, to, step),
            now_ms(),
            Duration::from_millis(app.tunables.stale_after_ms),
            arrival,
            // Queued first when back from the instructions, as long as a reconnect is.
            Instant::now() + grace.max(arrival),
        )
        .await;
    match switched {
        Ok(true) => {
            tracing::info!(participant = ticket.participant, role = %to.as_str(), "lobby: a waiter in surplus switched roles");
            Some(to)
        }
        Ok(false) => None,
        Err(e) => {
            tracing::warn!(
                participant = ticket.participant,
                "lobby: cannot switch a waiter's role: {e}"
            );
            None
        }
    }
}

/// The wait limit passed with nobody to pair: a bot partner or a "no partner" code.
async fn give_up(
    app: &AppState,
    socket: &mut WebSocket,
    study: &Arc<LoadedStudy>,
    me: &Ticket,
    next: &str,
) {
    let frame = match study.study.pairing.on_timeout {
        OnNoPartner::Bot => match pairing::with_bot(app, study, me).await {
            Ok(session) => ServerFrame::Paired {
                session: &session,
                role: me.role,
                partner: "bot",
                next,
            }
            .text(),
            Err(e) => {
                tracing::error!("cannot start a session with a bot: {e}");
                error_frame(
                    None,
                    "internal",
                    "could not start the session; reload the page",
                )
            }
        },
        OnNoPartner::Complete => match pairing::no_partner(app, study, me).await {
            Ok(()) => ServerFrame::Ended {
                reason: "no_partner",
                next,
            }
            .text(),
            Err(e) => {
                tracing::error!("cannot issue a no-partner code: {e}");
                error_frame(None, "internal", "could not finish; reload the page")
            }
        },
    };
    let _ = send(socket, &frame).await;
}
