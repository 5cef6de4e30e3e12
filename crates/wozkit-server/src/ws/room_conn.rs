//! A room connection: `welcome`, then frames both ways between the socket and the room task.
//! Commands carry the participant's own role and id (from the cookie); the room answers each with
//! `ack` or `error`.

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
    // Boxed: opening a room that is not in memory (a store read and a replay) is a large
    // future, which would otherwise enlarge every connection's task for its whole life.
    match Box::pin(room::send(&app, &session, connect)).await {
        Ok(true) => {}
        Ok(false) => {
            // No room here: the session has ended (its end reason), or runs elsewhere.
            let frame = super::no_room_frame(&app, Some(&session), &next).await;
            let _ = send(&mut socket, &frame).await;
            return;
        }
        Err(e) => {
            tracing::error!(session, "cannot open the room: {e}");
            let _ = send(
                &mut socket,
                &error_frame(
                    None,
                    "internal",
                    "the room could not be opened; reload the page",
                ),
            )
            .await;
            return;
        }
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
                let to_room = match frames::parse(&text) {
                    Ok(ClientFrame::Cmd { id, cmd }) => {
                        RoomMsg::Cmd { conn, role, participant: p.id.clone(), id, cmd: Box::new(cmd) }
                    }
                    Ok(ClientFrame::Typing) => RoomMsg::Typing { role },
                    Ok(ClientFrame::Ping) => {
                        if send(&mut socket, &ServerFrame::Pong.text()).await.is_err() {
                            break;
                        }
                        continue;
                    }
                    Ok(ClientFrame::Hello { .. }) => {
                        let e = error_frame(None, "unexpected_hello", "hello is sent once; reconnect to resynchronise");
                        if send(&mut socket, &e).await.is_err() {
                            break;
                        }
                        continue;
                    }
                    Err(e) => {
                        if send(&mut socket, &error_frame(e.id.as_deref(), e.code, &e.message)).await.is_err() {
                            break;
                        }
                        continue;
                    }
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
