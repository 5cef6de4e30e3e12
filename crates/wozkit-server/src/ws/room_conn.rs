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
    let welcome = ServerFrame::Welcome {
        role,
        session: &session,
        participant: &p.id,
        study: view::welcome_study(&study, role),
    };
    if send(&mut socket, &welcome.text()).await.is_err() {
        return;
    }
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
    match room::send(&app, &session, connect).await {
        Ok(true) => {}
        Ok(false) => {
            let _ = send(
                &mut socket,
                &ServerFrame::Ended {
                    reason: "not_in_room",
                    next: &next,
                }
                .text(),
            )
            .await;
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
                        RoomMsg::Cmd { conn, role, participant: p.id.clone(), id, cmd }
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
                match room::send(&app, &session, to_room).await {
                    Ok(true) => {}
                    _ => break,
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
