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

#[allow(clippy::too_many_arguments)]
async fn serve(
    app: &AppState,
    socket: &mut WebSocket,
    mut limiter: RateLimiter,
    p: Participant,
    study: Arc<LoadedStudy>,
    role: Role,
    next: String,
) -> End {
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
    let limit_s = study.study.pairing.wait_limit_s;
    let stale_after = Duration::from_millis(app.tunables.stale_after_ms);
    // How often the lobby's table is told that this connection is alive: well within the
    // stale cut-off, without a write per frame.
    let refresh = stale_after / 3;
    // How long the lobby keeps this participant's waiting time after the connection is gone.
    let grace = Duration::from_secs(u64::from(study.study.session.disconnect_grace_s));
    // The connection is gone: the place goes, the waiting time stays for a while.
    let gone = async |app: &AppState| {
        if let Err(e) = app
            .lobby
            .leave(app.store.as_ref(), &p.id, ticket.conn)
            .await
        {
            tracing::error!(participant = p.id, "lobby: cannot give up a place: {e}");
        }
        app.lobby.gone(&p.id, ticket.conn, Instant::now() + grace);
    };
    // Only the public queue's crowd participants change roles: a lab link may have named
    // the role, and a private pair has its two people.
    let switchable = key.pair.is_none() && p.platform != Platform::Lab;
    // A researcher piloting alone (`serve --simulated-user`): a test participant arriving as the
    // wizard gets the simulated user at once, without queueing.
    if role == Role::Wizard
        && p.is_test()
        && let Some(user) = app.tunables.simulated_user.clone()
    {
        let frame = match pairing::with_simulated_user(app, &study, &ticket, user).await {
            Ok(session) => ServerFrame::Paired {
                session: &session,
                role,
                partner: "bot",
                next: &next,
            }
            .text(),
            Err(e) => {
                tracing::error!("cannot start a session with the simulated user: {e}");
                error_frame(
                    None,
                    "internal",
                    "could not start the session; reload the page",
                )
            }
        };
        let _ = send(socket, &frame).await;
        return End::Done;
    }
    lobby::listen(app).await;
    let mut last_heard = Instant::now();
    'enqueue: loop {
        let enqueued = app
            .lobby
            .enqueue(
                app.store.as_ref(),
                key.clone(),
                ticket.clone(),
                now_ms(),
                stale_after,
            )
            .await;
        let (since_ms, mut rx) = match enqueued {
            Ok(Enqueued::Matched { partner, place }) => {
                match pairing::pair(app, &study, &partner, &ticket).await {
                    Ok(session) => {
                        let told = Told::Paired {
                            session: session.clone(),
                        };
                        if let Err(e) = app
                            .lobby
                            .tell(app.store.as_ref(), &place, &partner.participant, told)
                            .await
                        {
                            tracing::error!(
                                session,
                                partner = partner.participant,
                                "lobby: cannot tell the partner of their pairing: {e}"
                            );
                        }
                        let frame = ServerFrame::Paired {
                            session: &session,
                            role,
                            partner: "human",
                            next: &next,
                        };
                        let _ = send(socket, &frame.text()).await;
                    }
                    Err(e) => {
                        // The partner queues again.
                        tracing::error!("cannot create the session of a pair: {e}");
                        let _ = app
                            .lobby
                            .tell(
                                app.store.as_ref(),
                                &place,
                                &partner.participant,
                                Told::Retry,
                            )
                            .await;
                        let _ = send(
                            socket,
                            &error_frame(None, "internal", "pairing failed; reload the page"),
                        )
                        .await;
                    }
                }
                return End::Done;
            }
            Ok(Enqueued::Queued { since_ms, rx }) => (since_ms, rx),
            Err(e) => {
                tracing::error!(participant = p.id, "lobby: cannot queue: {e}");
                let _ = send(
                    socket,
                    &error_frame(
                        None,
                        "internal",
                        "could not join the queue; reload the page",
                    ),
                )
                .await;
                return End::Done;
            }
        };
        let mut deadline = Some(since_ms + u64::from(limit_s) * 1000);
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
        let mut seat_check = tokio::time::interval(refresh);
        // When the table was first found without this connection's place, no notice having come.
        let mut lost_since: Option<Instant> = None;
        loop {
            tokio::select! {
                told = &mut rx => match told {
                    Ok(Told::Paired { session }) => {
                        app.lobby.forget(&p.id);
                        let frame = ServerFrame::Paired { session: &session, role, partner: "human", next: &next };
                        let _ = send(socket, &frame.text()).await;
                        return End::Done;
                    }
                    // Another tab took the place: this one is done.
                    Ok(Told::Replaced) => {
                        app.lobby.gone(&p.id, ticket.conn, Instant::now() + grace);
                        let _ = send(socket, &error_frame(None, "replaced", "you are waiting in another tab")).await;
                        return End::Done;
                    }
                    // The partner's pairing failed: queue again.
                    Ok(Told::Retry) | Err(_) => continue 'enqueue,
                },
                _ = seat_check.tick() => {
                    match app.store.participant(&p.id).await {
                        Ok(Some(Participant { session_id: Some(session), .. })) => {
                            // The place goes first, so nobody else takes this participant.
                            match app.lobby.leave(app.store.as_ref(), &p.id, ticket.conn).await {
                                // Taken at this very moment: that answer comes on `rx`.
                                Ok(false) => continue,
                                Ok(true) => {}
                                Err(e) => {
                                    tracing::warn!(participant = p.id, "lobby: cannot give up the place of a seated participant: {e}");
                                    continue;
                                }
                            }
                            tracing::warn!(participant = p.id, session, "lobby: seated in a session without being told; sent there");
                            app.lobby.forget(&p.id);
                            let frame = ServerFrame::Paired { session: &session, role, partner: "human", next: &next };
                            let _ = send(socket, &frame.text()).await;
                            return End::Done;
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(participant = p.id, "lobby: cannot read whether the participant was seated: {e}"),
                    }
                }
                _ = ticker.tick() => {
                    let standing = match app.lobby.standing(app.store.as_ref(), &key, &p.id, now_ms(), stale_after).await {
                        Ok(standing) => standing,
                        Err(e) => {
                            tracing::warn!(participant = p.id, "lobby: cannot read the queue: {e}");
                            None
                        }
                    };
                    if standing.is_some_and(|s| s.may_switch) && switchable
                        && let Some(next_role) = switch(app, &study, &key, &ticket, grace).await
                    {
                        let frame = ServerFrame::Reassigned {
                            role: next_role,
                            message: "Too many people arrived for your role, so you now take the other one: \
                                      please read its instructions, then you will be paired at once.",
                            next: &next,
                        };
                        let _ = send(socket, &frame.text()).await;
                        return End::Done;
                    }
                    let position = standing.map_or(1, |s| s.position);
                    let waited_s = now_ms().saturating_sub(since_ms) / 1000;
                    let frame = ServerFrame::Waiting { position, waited_s, limit_s };
                    if send(socket, &frame.text()).await.is_err() {
                        gone(app).await;
                        return End::Gone;
                    }
                }
                _ = heartbeat.tick() => {
                    // A send into a dead socket still succeeds (the kernel buffers it): only an
                    // answer tells that somebody is there.
                    if last_heard.elapsed() > stale_after {
                        tracing::debug!(participant = p.id, "waiting connection went silent");
                        gone(app).await;
                        return End::Gone;
                    }
                    if socket.send(Message::Ping(Default::default())).await.is_err() {
                        gone(app).await;
                        return End::Gone;
                    }
                }
                () = sleep_until_ms(deadline.unwrap_or(u64::MAX)), if deadline.is_some() => {
                    match app.lobby.leave(app.store.as_ref(), &p.id, ticket.conn).await {
                        Ok(true) => {
                            app.lobby.forget(&p.id);
                            give_up(app, socket, &study, &ticket, &next).await;
                            return End::Done;
                        }
                        // Being paired at this very moment (or replaced): the answer comes on
                        // `rx`.
                        Ok(false) => deadline = None,
                        Err(e) => {
                            tracing::error!(participant = p.id, "lobby: cannot give up a place: {e}");
                            deadline = Some(now_ms() + 1000);
                        }
                    }
                }
                msg = socket.recv() => {
                    if let Some(Ok(_)) = &msg {
                        last_heard = Instant::now();
                        match app.lobby.heard(app.store.as_ref(), &p.id, ticket.conn, now_ms(), refresh).await {
                            Ok(true) => lost_since = None,
                            Ok(false) => {
                                let since = *lost_since.get_or_insert_with(Instant::now);
                                let told = app.lobby.resolve_lost(app.store.as_ref(), &key, &p.id, ticket.conn, since, stale_after).await;
                                match told {
                                    Ok(None) => {}
                                    Ok(Some(Told::Paired { session })) => {
                                        app.lobby.forget(&p.id);
                                        let frame = ServerFrame::Paired { session: &session, role, partner: "human", next: &next };
                                        let _ = send(socket, &frame.text()).await;
                                        return End::Done;
                                    }
                                    Ok(Some(Told::Replaced)) => {
                                        let _ = send(socket, &error_frame(None, "replaced", "you are waiting in another tab")).await;
                                        return End::Done;
                                    }
                                    Ok(Some(Told::Retry)) => continue 'enqueue,
                                    Err(e) => tracing::warn!(participant = p.id, "lobby: cannot look for a lost place: {e}"),
                                }
                            }
                            Err(e) => tracing::warn!(participant = p.id, "lobby: cannot note a sign of life: {e}"),
                        }
                    }
                    let Some(text) = incoming(socket, msg, &mut limiter).await else {
                        gone(app).await;
                        return End::Gone;
                    };
                    let reply = match text.as_deref().map(frames::parse) {
                        None | Some(Ok(ClientFrame::Hello { .. })) => continue,
                        Some(Ok(ClientFrame::Ping)) => ServerFrame::Pong.text(),
                        Some(Ok(ClientFrame::Typing)) => continue,
                        Some(Ok(ClientFrame::Cmd { id, .. })) => {
                            error_frame(Some(&id), "not_in_session", "you are still waiting for a partner")
                        }
                        Some(Err(e)) => error_frame(e.id.as_deref(), e.code, &e.message),
                    };
                    if send(socket, &reply).await.is_err() {
                        gone(app).await;
                        return End::Gone;
                    }
                }
                () = app.stopping() => {
                    let _ = app.lobby.leave(app.store.as_ref(), &p.id, ticket.conn).await;
                    return End::Gone;
                }
            }
        }
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
