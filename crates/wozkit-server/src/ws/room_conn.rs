//! A room connection: `welcome`, then frames both ways between the socket and the room task.
//! Commands carry the participant's own role and id (from the cookie); the room answers each with
//! `ack` or `error`.

use std::ops::ControlFlow;
use std::sync::Arc;

use axum::extract::ws::WebSocket;
use tokio::sync::mpsc;
use wozkit_core::event::Role;
use wozkit_core::load::LoadedStudy;
use wozkit_store::Participant;

use super::frames::{self, ClientFrame, ServerFrame, error_frame};
use super::{incoming, send, send_queued};
use crate::app::AppState;
use crate::room::{self, OUTBOX, RoomMsg, view};
use crate::security::RateLimiter;

#[allow(clippy::too_many_arguments)]
pub async fn run(
    app: AppState,
    mut socket: WebSocket,
    mut limiter: RateLimiter,
    p: Participant,
    study: Arc<LoadedStudy>,
    role: Role,
    session: String,
    last_seq: u64,
    next: String,
) {
    // Only the text is kept for the send: the study's JSON tree (a few KiB) would otherwise
    // stay in this task for the whole connection.
    let welcome = ServerFrame::Welcome {
        role,
        session: &session,
        participant: &p.id,
        study: view::welcome_study(&study, role),
    }
    .text();
    if send(&mut socket, &welcome).await.is_err() {
        return;
    }
    drop(welcome);
    let conn = app.conn_id();
    let (out, mut out_rx) = mpsc::channel::<Arc<str>>(OUTBOX);
    let connect = RoomMsg::Connect {
        conn,
        role,
        participant: p.id.clone(),
        last_seq,
        next: next.clone(),
        out,
    };
    if !join_room(&app, &mut socket, &session, connect, &next).await {
        return;
    }
    loop {
        tokio::select! {
            frame = out_rx.recv() => match frame {
                Some(text) => {
                    if send_queued(&mut socket, &text, &mut out_rx).await.is_err() {
                        break;
                    }
                }
                // The room dropped this connection (too slow) or stopped.
                None => break,
            },
            msg = socket.recv() => {
                let Some(text) = incoming(&mut socket, msg, &mut limiter).await else { break };
                let Some(text) = text else { continue };
                let to_room = match to_room_msg(&mut socket, &text, conn, role, &p.id).await {
                    ControlFlow::Continue(Some(m)) => m,
                    ControlFlow::Continue(None) => continue,
                    ControlFlow::Break(()) => break,
                };
                if !to_room_inbox(&app, &session, to_room).await {
                    break;
                }
            }
            () = app.stopping() => return,
        }
    }
    let leave = RoomMsg::Leave {
        conn,
        role,
        participant: p.id.clone(),
    };
    room::notify(&app, &session, leave).await;
}

/// Connects to the session's room with `connect`; `false` (the socket told why) when there is
/// no room here or it could not be opened.
async fn join_room(
    app: &AppState,
    socket: &mut WebSocket,
    session: &str,
    connect: RoomMsg,
    next: &str,
) -> bool {
    // Boxed: opening a room that is not in memory (a store read and a replay) is a large
    // future, which would otherwise enlarge every connection's task for its whole life.
    match Box::pin(room::send(app, session, connect)).await {
        Ok(true) => true,
        Ok(false) => {
            // No room here: the session has ended (its end reason), or runs elsewhere.
            let frame = super::no_room_frame(app, Some(session), next).await;
            let _ = send(socket, &frame).await;
            false
        }
        Err(e) => {
            tracing::error!(session, "cannot open the room: {e}");
            let _ = send(
                socket,
                &error_frame(
                    None,
                    "internal",
                    "the room could not be opened; reload the page",
                ),
            )
            .await;
            false
        }
    }
}

/// What the client's frame `text` asks of the room, if anything (pings and mistakes are
/// answered here); `Break` when the socket cannot be written to.
async fn to_room_msg(
    socket: &mut WebSocket,
    text: &str,
    conn: u64,
    role: Role,
    participant: &str,
) -> ControlFlow<(), Option<RoomMsg>> {
    let answer = match frames::parse(text) {
        Ok(ClientFrame::Cmd { id, cmd }) => {
            return ControlFlow::Continue(Some(RoomMsg::Cmd {
                conn,
                role,
                participant: participant.to_string(),
                id,
                cmd: Box::new(cmd),
            }));
        }
        Ok(ClientFrame::Typing) => return ControlFlow::Continue(Some(RoomMsg::Typing { role })),
        Ok(ClientFrame::Ping) => ServerFrame::Pong.text(),
        Ok(ClientFrame::Hello { .. }) => error_frame(
            None,
            "unexpected_hello",
            "hello is sent once; reconnect to resynchronise",
        ),
        Err(e) => error_frame(e.id.as_deref(), e.code, &e.message),
    };
    if send(socket, &answer).await.is_err() {
        return ControlFlow::Break(());
    }
    ControlFlow::Continue(None)
}

/// Sends `msg` to the session's room: straight to its inbox while the room is in memory (every
/// command of a live session), else through [`room::send`], boxed so that its large future
/// (opening the room) is allocated only when needed, not kept in every connection's task.
/// `false` when the room is gone for good.
async fn to_room_inbox(app: &AppState, session: &str, msg: RoomMsg) -> bool {
    let msg = match room::inbox(app, session) {
        Some(tx) => match tx.send(msg).await {
            Ok(()) => return true,
            Err(mpsc::error::SendError(msg)) => msg,
        },
        None => msg,
    };
    matches!(Box::pin(room::send(app, session, msg)).await, Ok(true))
}
