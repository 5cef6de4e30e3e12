//! The participant WebSocket (`GET /ws`): the handshake checks Origin and the participant cookie,
//! then the connection waits for `hello` and serves the lobby or the room, whichever the
//! participant's place in the flow says. The participant, role and session always come from the
//! cookie and the store, never from a frame.

pub mod frames;
mod observer;
pub(crate) mod relay;
mod room_conn;
pub mod waiting;

use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use wozkit_core::model::PageKind;

use self::frames::{ClientFrame, ServerFrame, error_frame};
use wozkit_store::SessionKind;

use crate::app::AppState;
use crate::flow;
use crate::http::extract::WsAsking;
use crate::security::{RateLimiter, seat_query};

/// Frames larger than this close the connection (protocol error 1009); frames between
/// [`frames::MAX_FRAME_BYTES`] and this get a `too_large` error frame and are dropped.
const HARD_FRAME_LIMIT: usize = 64 * 1024;
/// Bytes read from a participant's socket at a time. Client frames are small (a command is a
/// few hundred bytes); the library's default (128 KiB) is zero-filled on every read and stays
/// resident per connection, which cost ~128 KiB of memory per participant and a 128 KiB
/// memset per frame received (docs/performance.md). Larger frames still arrive: the buffer
/// grows to hold them.
const READ_BUFFER: usize = 1024;
/// Bytes of frames gathered before they are written to the socket without waiting for the
/// flush. A connection's write buffer keeps the largest size it ever reached: gathering a
/// whole batch (events, a wizard's ~10 KB view, the ack) made it grow twice (the ack no longer
/// fit, so it doubled to ~21 KB). Past this size the frames so far are written at once, so
/// the buffer stays at about the largest frame; small batches still leave in one write.
const WRITE_BUFFER: usize = 8 * 1024;
/// Commands per second on average, and the burst allowed.
const RATE: (f64, f64) = (10.0, 20.0);

/// `GET /ws`: who is asking is the extractor's business ([`WsAsking`]); the upgrade is checked
/// first, so a request that is no WebSocket handshake is refused as such.
pub async fn upgrade(State(app): State<AppState>, ws: WebSocketUpgrade, who: WsAsking) -> Response {
    let (participant, seat) = match who {
        WsAsking::Observer { session } => return observe(app, session, ws).await,
        WsAsking::Participant { p, seat } => (p, seat),
    };
    ws.max_message_size(HARD_FRAME_LIMIT)
        .max_frame_size(HARD_FRAME_LIMIT)
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .on_upgrade(move |socket| async move {
            // Every part is boxed: the connection's task then holds only the part it runs
            // (the relay's state alone is ~12 KB), not room for the largest of them for the
            // connection's whole life (docs/performance.md).
            // A room another instance runs is reached through it (relay.rs).
            if let Some(session) = &participant.session_id
                && let Some(owner) = Box::pin(relay::owner_elsewhere(&app, session)).await
            {
                let who = relay::Relayed::Participant {
                    id: participant.id,
                    seat,
                };
                return Box::pin(relay::run(app, socket, owner, who)).await;
            }
            Box::pin(run(app, participant.id, seat, socket)).await
        })
}

/// `GET /ws?observe=SESSION`: a researcher who may observe ([`WsAsking::Observer`]) watching a
/// live dialogue session served here.
async fn observe(app: AppState, session: String, ws: WebSocketUpgrade) -> Response {
    let record = match app.store.session(&session).await {
        Ok(Some(r)) => r,
        Ok(None) => return (StatusCode::NOT_FOUND, "no such session").into_response(),
        Err(e) => {
            tracing::error!("store error on an observer's handshake: {e}");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let served = app
        .study(Some(&record.study_id))
        .is_some_and(|s| s.study.has_room());
    if !served || record.kind != SessionKind::Dialogue {
        return (
            StatusCode::NOT_FOUND,
            "no live room of this session is served here",
        )
            .into_response();
    }
    if !record.is_live() {
        return (
            StatusCode::CONFLICT,
            "the session is not live: open its log instead",
        )
            .into_response();
    }
    ws.max_message_size(HARD_FRAME_LIMIT)
        .max_frame_size(HARD_FRAME_LIMIT)
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .on_upgrade(move |socket| async move {
            // Boxed parts, as for participants.
            if let Some(owner) = Box::pin(relay::owner_elsewhere(&app, &session)).await {
                let who = relay::Relayed::Observer { session };
                return Box::pin(relay::run(app, socket, owner, who)).await;
            }
            let _counted = app.metrics.connection(crate::metrics::ConnKind::Observer);
            Box::pin(observer::run(app, session, socket)).await
        })
}

/// One connection: hello, then the lobby or the room.
async fn run(app: AppState, participant: String, seat: Option<String>, mut socket: WebSocket) {
    let mut limiter = RateLimiter::new(RATE.0, RATE.1);
    let Some(last_seq) = wait_hello(&app, &mut socket, &mut limiter).await else {
        return;
    };
    let next = format!("/p{}", seat_query(seat.as_deref()));
    // Read again: the place in the flow may have changed since the handshake.
    let p = match app.store.participant(&participant).await {
        Ok(Some(p)) => p,
        _ => {
            let _ = send(
                &mut socket,
                &error_frame(None, "internal", "cannot read your participation"),
            )
            .await;
            return;
        }
    };
    let (Some(study), Some(role)) = (app.study(Some(&p.study_id)), p.role) else {
        let _ = send(
            &mut socket,
            &error_frame(None, "not_in_session", "this study is not served here"),
        )
        .await;
        return;
    };
    let i = flow::index(&p.flow_step);
    if flow::in_lobby(&study.study, role, i, p.session_id.is_some()) {
        let _counted = app.metrics.connection(crate::metrics::ConnKind::Waiting);
        // Each part boxed: this task then holds only the part it runs (the lobby's or the
        // room's state), not room for the larger of the two for the connection's whole life.
        Box::pin(waiting::run(app, socket, limiter, p, study, role, next)).await;
    } else if let (PageKind::Room, Some(session)) =
        (flow::kind_at(&study.study, role, i), p.session_id.clone())
    {
        let _counted = app.metrics.connection(crate::metrics::ConnKind::Room);
        Box::pin(room_conn::run(
            app, socket, limiter, p, study, role, session, last_seq, next,
        ))
        .await;
    } else {
        // Not in the waiting room or the room (e.g. a stale tab, or a participant who already
        // moved on from a session that ended): send the page on.
        let _ = send(
            &mut socket,
            &no_room_frame(&app, p.session_id.as_deref(), &next).await,
        )
        .await;
    }
}

/// The `ended` frame for a participant this instance serves no room to: the stored end reason
/// of their session if it has ended (what the room sent at its end, so a page that missed it
/// moves on the same way), `not_in_room` otherwise (no session, a session that is still live
/// but runs elsewhere, or the store cannot be read).
pub(super) async fn no_room_frame(app: &AppState, session: Option<&str>, next: &str) -> String {
    let ended = match session {
        Some(id) => match app.store.session(id).await {
            Ok(record) => record.and_then(|r| r.ended),
            Err(e) => {
                tracing::warn!(session = id, "cannot read the session's end: {e}");
                None
            }
        },
        None => None,
    };
    ServerFrame::Ended {
        reason: ended
            .as_ref()
            .map_or("not_in_room", |end| end.reason.as_str()),
        next,
    }
    .text()
}

/// Waits for `hello`; answers pings and explains other frames meanwhile.
async fn wait_hello(
    app: &AppState,
    socket: &mut WebSocket,
    limiter: &mut RateLimiter,
) -> Option<u64> {
    let deadline = tokio::time::sleep(Duration::from_millis(app.tunables.hello_timeout_ms));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            msg = socket.recv() => {
                let text = match incoming(socket, msg, limiter).await? {
                    Some(t) => t,
                    None => continue,
                };
                let reply = match frames::parse(&text) {
                    Ok(ClientFrame::Hello { last_seq }) => return Some(last_seq),
                    Ok(ClientFrame::Ping) => ServerFrame::Pong.text(),
                    Ok(_) => error_frame(None, "hello_required", "send {\"type\":\"hello\",\"last_seq\":N} first"),
                    Err(e) => error_frame(e.id.as_deref(), e.code, &e.message),
                };
                send(socket, &reply).await.ok()?;
            }
            () = &mut deadline => {
                let _ = send(socket, &error_frame(None, "hello_timeout", "no hello received")).await;
                return None;
            }
            () = app.stopping() => return None,
        }
    }
}

/// Sorts an incoming message: `None` when the connection is over, `Some(None)` when there is
/// nothing to parse (control frames, refused frames already answered), `Some(Some(text))`.
async fn incoming(
    socket: &mut WebSocket,
    msg: Option<Result<Message, axum::Error>>,
    limiter: &mut RateLimiter,
) -> Option<Option<String>> {
    match msg {
        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => None,
        Some(Ok(Message::Text(t))) => {
            if !limiter.allow() {
                let e = error_frame(
                    None,
                    "rate_limited",
                    "too many frames: at most 10 per second (bursts of 20)",
                );
                send(socket, &e).await.ok()?;
                return Some(None);
            }
            Some(Some(t.as_str().to_string()))
        }
        Some(Ok(Message::Binary(_))) => {
            send(
                socket,
                &error_frame(None, "bad_json", "send JSON text frames, not binary"),
            )
            .await
            .ok()?;
            Some(None)
        }
        Some(Ok(_)) => Some(None),
    }
}

async fn send(socket: &mut WebSocket, text: &str) -> Result<(), axum::Error> {
    socket.send(Message::Text(text.into())).await
}

/// Most frames written before one flush by [`send_queued`].
const FLUSH_EVERY: usize = 64;

/// Sends `first` and the frames already queued behind it in `queue` (up to [`FLUSH_EVERY`]),
/// flushing once: a batch's frames (events, view, ack) leave in one write, not one each.
async fn send_queued(
    socket: &mut WebSocket,
    first: &str,
    queue: &mut tokio::sync::mpsc::Receiver<std::sync::Arc<str>>,
) -> Result<(), axum::Error> {
    use futures_util::SinkExt;
    socket.feed(Message::Text(first.into())).await?;
    for _ in 1..FLUSH_EVERY {
        let Ok(text) = queue.try_recv() else { break };
        socket.feed(Message::Text((*text).into())).await?;
    }
    socket.flush().await
}
