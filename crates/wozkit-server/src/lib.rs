//! wozkit-server: the HTTP and WebSocket side of wozkit. It serves the participant flow (entry
//! link → consent → instructions → waiting room → room → survey → completion code), pairs
//! participants, runs one task per live room around the pure engine, and gives the researcher a
//! login, a session list and a live view. It also holds the projections the CLI prints from the
//! store: the per-session log with metrics, and the payment table.
//!
//! It must not decide dialogue semantics (that is `wozkit_core::engine`) nor how events are stored
//! (that is `wozkit_store`): a room calls `step`, appends what the engine emitted, and only then
//! tells anyone.
//!
//! Map of the crate:
//! - [`app`]: the shared state handle ([`AppState`]), configuration and the clock.
//! - `http`: routes: entry links, flow pages, survey, assets and media, researcher pages, `/try`.
//! - `ws`: the WebSocket protocol (frames, limits) and the per-connection loop; its frame
//!   decoder is public as [`frames`].
//! - `lobby`: the waiting queues and pairing (pure, behind a std mutex);
//!   `pairing`: what happens once a pair (or a timeout) is decided.
//! - `room`: the room registry and the room actor, its per-role views and the built-in bots.
//! - `flow`: where a participant is in the study's page flow.
//! - [`i18n`]: the interface strings of the participant pages, one Fluent catalogue per language.
//! - [`auth`]: the researcher password and login sessions; `security`: cookies, Origin, rate limits.
//! - `chat`: conversations with dialogue systems under test (chat and arena pages): the
//!   system clients, one session per system, replies in tasks of their own.
//! - Completion codes, the dialogue log export with automatic metrics, the payment table and
//!   the review log's reading are projections of the store and live in `wozkit-data`
//!   (`completion`, `records`), so the command line computes payments without the server.
//! - [`metrics`]: `GET /metrics` (Prometheus text), with `metered_store`, the store wrapper that
//!   times every event write.
//! - [`review`]: researchers' review decisions (each an event of the study's review log), the
//!   participants' flags, blocks, and sending decisions to the crowd platforms.

#![forbid(unsafe_code)]

pub mod app;
pub mod auth;
mod chat;
mod error;
mod evaluation;
mod flow;
mod http;
mod human;
pub mod i18n;
mod lobby;
mod metered_store;
pub mod metrics;
mod pairing;
pub mod review;
mod room;
mod security;
pub mod simulate;
mod ws;

/// The WebSocket frame decoder and error codes, public so the fuzz target and protocol tests can
/// drive it directly.
pub use ws::frames;

use std::future::Future;
use std::sync::Arc;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use wozkit_store::Store;

pub use app::{AppState, Config, Payers, Tunables, now_ms};
pub use metrics::MetricsToken;
pub use room::{ModelUser, SystemWizard};
pub use ws::relay::ClusterSecret;

/// How long stopping waits for rooms and connections to finish.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
pub use error::StartError;
pub use evaluation::load_stored_dialogues;

/// Serves `config` on `listener` until `shutdown` resolves, then stops every room and connection
/// and closes the store. Events are written as they happen, so stopping (or being killed) at any
/// moment loses nothing that was acknowledged; rooms are rebuilt from the log when participants
/// come back.
pub async fn launch_with_listener(
    config: Config,
    store: Arc<dyn Store>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    launch(config, store, listener, None, shutdown).await
}

/// Like [`launch_with_listener`], and serves `GET /metrics` without a token on
/// `metrics_listener` too (an address only the monitoring can reach; see [`metrics`]).
pub async fn launch_with_metrics_listener(
    config: Config,
    store: Arc<dyn Store>,
    listener: TcpListener,
    metrics_listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    launch(config, store, listener, Some(metrics_listener), shutdown).await
}

async fn launch(
    mut config: Config,
    store: Arc<dyn Store>,
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every task that holds the state holds this sender through it; `recv` returning `None`
    // tells that the last of them has finished.
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    // Other instances reach this one (to find a room's owner) at its advertised URL.
    if config.tunables.advertise_url.is_empty() {
        config.tunables.advertise_url = match listener.local_addr() {
            Ok(addr) => format!("http://{addr}"),
            Err(e) => {
                tracing::warn!("cannot read the listening address to advertise it: {e}");
                String::new()
            }
        };
    }
    let state = AppState::new(config, store.clone(), stop_rx, alive_tx).await?;
    room::resume_live_rooms(state.clone());
    // The internal route of relayed connections stays outside the public router's layers.
    let router = http::router(state.clone()).merge(ws::relay::routes(state.clone()));
    if let Some(l) = metrics_listener {
        metrics::serve_exporter(state.clone(), l);
    }
    drop(state);
    // Frames are small and go out in quick succession (events, then a view, then an ack):
    // without TCP_NODELAY a frame can wait for the client's delayed ACK of the previous one,
    // which showed as stalls of tens of milliseconds in the delivery latency
    // (docs/performance.md).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on a connection: {e}");
        }
    });
    // The peer address keys the per-address limit on entry links.
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    })
    .await
    .map_err(StartError::Io)?;
    // Rooms and connections stop at the signal; a socket stuck on a dead peer is not waited for
    // long (whatever it still holds was already stored).
    if tokio::time::timeout(STOP_WAIT, alive_rx.recv())
        .await
        .is_err()
    {
        tracing::warn!("some connections did not close in time; stopping anyway");
    }
    store.close().await;
    Ok(())
}
