//! An observer connection (`GET /ws?observe=SESSION`, a researcher's login): after `hello`, the
//! room sends both roles' frames wrapped as `observed`, and `seats`. Read-only: the only frame
//! accepted afterwards is `ping`. The room neither logs nor tells the participants anything.

use std::sync::Arc;

use axum::extract::ws::WebSocket;
use tokio::sync::mpsc;

use super::frames::{self, ClientFrame, ServerFrame, error_frame};
use super::{incoming, send, send_queued, wait_hello};
use crate::app::AppState;
use crate::room::{self, OUTBOX, RoomMsg};
use crate::security::RateLimiter;

/// Rate limit of an observer's frames (pings only): per second on average, and the burst.
const RATE: (f64, f64) = (2.0, 10.0);

pub async fn run(app: AppState, session: String, mut socket: WebSocket) {
    let mut limiter = RateLimiter::new(RATE.0, RATE.1);
    let Some(last_seq) = wait_hello(&app, &mut socket, &mut limiter).await else {
        return;
    };
    let conn = app.conn_id();
    let (out, mut out_rx) = mpsc::channel::<Arc<str>>(OUTBOX);
    let observe = RoomMsg::Observe {
        conn,
        last_seq,
        out,
    };
    match room::send(&app, &session, observe).await {
        Ok(true) => {}
        Ok(false) => {
            let e = error_frame(None, "not_live", "this session is not live here");
            let _ = send(&mut socket, &e).await;
            return;
        }
        Err(e) => {
            tracing::error!(session, "cannot open the room to observe it: {e}");
            let e = error_frame(
                None,
                "internal",
                "the room could not be opened; reload the page",
            );
            let _ = send(&mut socket, &e).await;
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
                // The room dropped this observer (too slow) or stopped.
                None => break,
            },
            msg = socket.recv() => {
                let Some(text) = incoming(&mut socket, msg, &mut limiter).await else { break };
                let Some(text) = text else { continue };
                let reply = match frames::parse(&text) {
                    Ok(ClientFrame::Ping) => ServerFrame::Pong.text(),
                    Ok(_) => error_frame(None, "read_only", "an observer sends nothing but ping"),
                    Err(e) => error_frame(e.id.as_deref(), e.code, &e.message),
                };
                if send(&mut socket, &reply).await.is_err() {
                    break;
                }
            }
            () = app.stopping() => return,
        }
    }
    room::notify(&app, &session, RoomMsg::Unobserve { conn }).await;
}
