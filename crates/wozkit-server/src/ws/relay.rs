//! Reaching a room that another instance runs (`docs/scale-out.md`, "Reaching the room's
//! instance").
//!
//! When a participant's room socket, or a researcher's observer socket, arrives at an instance
//! that does not run the session's room while another instance holds a live lease of it, this
//! instance opens an internal WebSocket to the owner's advertised URL (`GET /internal/relay`,
//! authenticated with the instances' shared secret) carrying the identity it has already
//! verified (the participant, or the observed session), and pipes frames both ways unchanged,
//! from the very first one (`hello`): the owner serves the connection exactly as if the
//! participant had reached it directly. One frame at a time is in flight in each direction, so
//! a slow side holds the other back through TCP instead of piling frames up here. When either
//! side closes, or the owner stops answering for a lease length, both sockets close; the
//! participant's page reconnects, and by then another instance runs the room (or will once the
//! dead owner's lease runs out).
//!
//! A room that nobody holds, or whose lease has expired, is not relayed: this instance takes
//! the lease and runs the room itself (`room::open`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{FutureExt, SinkExt, StreamExt};
use serde::Deserialize;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wozkit_store::store::RoomLease;

use super::frames::error_frame;
use super::{HARD_FRAME_LIMIT, READ_BUFFER, WRITE_BUFFER};
use crate::app::{AppState, now_ms};
use crate::room::lease;

/// The internal route the owner of a room accepts relayed connections on.
pub const ROUTE: &str = "/internal/relay";
/// Header naming the relayed participant (verified by the relaying instance).
const PARTICIPANT: &str = "x-wozkit-participant";
/// Header carrying the participant's seat (several participants in one browser), if any.
const SEAT: &str = "x-wozkit-seat";
/// Header naming the session a relayed observer watches (the researcher's login was verified
/// by the relaying instance).
const OBSERVE: &str = "x-wozkit-observe";
/// How long opening the internal connection to the owner may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long closing frames may take to leave once the relay ends.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// The secret the instances sharing a store authenticate relayed connections with
/// (`--cluster-secret`, `WOZKIT_CLUSTER_SECRET`). Without one an instance neither relays nor
/// accepts relayed connections.
#[derive(Clone)]
pub struct ClusterSecret(Arc<str>);

impl ClusterSecret {
    /// A secret; `None` when it is empty (an empty secret would let anyone in).
    pub fn new(secret: &str) -> Option<ClusterSecret> {
        let s = secret.trim();
        (!s.is_empty()).then(|| ClusterSecret(s.into()))
    }

    /// Whether the `Authorization` header carries this secret (`Bearer SECRET`), compared in
    /// time independent of where the first difference is.
    fn admits(&self, headers: &HeaderMap) -> bool {
        crate::security::bearer_is(headers, &self.0)
    }
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(…)")
    }
}

/// Who a relayed connection is, as verified by the instance the browser reached.
pub(crate) enum Relayed {
    /// A participant (from their cookie), with the seat of the page.
    Participant { id: String, seat: Option<String> },
    /// A researcher observing a session (from their login).
    Observer { session: String },
}

/// The owner's lease when `session`'s room must be reached through a relay: another instance
/// holds a live lease of it and this instance can authenticate to it. `None` means serve the
/// connection here (the room is this instance's, nobody's, or its owner's lease ran out: then
/// this instance takes the lease when it opens the room).
pub(crate) async fn owner_elsewhere(app: &AppState, session: &str) -> Option<RoomLease> {
    if app.tunables.sole_instance {
        return None;
    }
    let lease = match lease::owner_of(app, session).await {
        Ok(Some(l)) => l,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(session, "cannot read the room's owner to relay to it: {e}");
            return None;
        }
    };
    if lease::is_mine(app, &lease) || lease.expires_at_ms <= now_ms() || lease.address.is_empty() {
        return None;
    }
    if app.tunables.cluster_secret.is_none() {
        tracing::warn!(
            session,
            owner = lease.instance_id,
            "another instance runs this room but no cluster secret is set: cannot relay to it"
        );
        return None;
    }
    Some(lease)
}

/// The internal route, merged into the server's router.
pub(crate) fn routes(app: AppState) -> axum::Router {
    axum::Router::new()
        .route(ROUTE, get(accept))
        .with_state(app)
}

/// No query parameters: the identity travels in headers.
#[derive(Deserialize)]
struct NoQuery {}

/// `GET /internal/relay`: a connection relayed by another instance. Refused (404) when this
/// instance has no cluster secret, and (403) without the right one.
async fn accept(
    State(app): State<AppState>,
    Query(_): Query<NoQuery>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let Some(secret) = &app.tunables.cluster_secret else {
        return (
            StatusCode::NOT_FOUND,
            "relayed connections are off: this instance has no cluster secret",
        )
            .into_response();
    };
    if !secret.admits(&headers) {
        return (
            StatusCode::FORBIDDEN,
            "relayed connection refused: wrong or missing cluster secret",
        )
            .into_response();
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let ws = ws
        .max_message_size(HARD_FRAME_LIMIT)
        .max_frame_size(HARD_FRAME_LIMIT)
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER);
    if let Some(session) = header(OBSERVE) {
        match app.store.session(&session).await {
            Ok(Some(r)) if r.is_live() => {}
            Ok(_) => {
                return (StatusCode::NOT_FOUND, "no live session to observe").into_response();
            }
            Err(e) => {
                tracing::error!(
                    session,
                    "store error on a relayed observer's handshake: {e}"
                );
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
        }
        return ws.on_upgrade(move |socket| async move {
            let _counted = app.metrics.connection(crate::metrics::ConnKind::Observer);
            super::observer::run(app, session, socket).await
        });
    }
    let Some(participant) = header(PARTICIPANT) else {
        return (
            StatusCode::BAD_REQUEST,
            "a relayed connection names a participant or a session to observe",
        )
            .into_response();
    };
    match app.store.participant(&participant).await {
        Ok(Some(_)) => {}
        Ok(None) => return (StatusCode::NOT_FOUND, "no such participant").into_response(),
        Err(e) => {
            tracing::error!(participant, "store error on a relayed handshake: {e}");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    }
    let seat = header(SEAT);
    ws.on_upgrade(move |socket| super::run(app, participant, seat, socket))
}

/// The WebSocket URL of the internal route at an instance's advertised base URL.
fn relay_url(address: &str) -> String {
    let base = address.trim_end_matches('/');
    let base = if let Some(rest) = base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = base.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        base.to_string()
    };
    format!("{base}{ROUTE}")
}

type OwnerSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the internal connection to the owner at `lease.address`.
async fn connect(app: &AppState, lease: &RoomLease, who: &Relayed) -> Result<OwnerSocket, String> {
    let secret = app
        .tunables
        .cluster_secret
        .as_ref()
        .ok_or("no cluster secret")?;
    let url = relay_url(&lease.address);
    let mut req = url
        .as_str()
        .into_client_request()
        .map_err(|e| format!("bad relay URL {url}: {e}"))?;
    let h = req.headers_mut();
    let value = |v: &str| HeaderValue::from_str(v).map_err(|e| format!("bad header value: {e}"));
    h.insert(AUTHORIZATION, value(&format!("Bearer {}", secret.0))?);
    match who {
        Relayed::Participant { id, seat } => {
            h.insert(PARTICIPANT, value(id)?);
            if let Some(seat) = seat {
                h.insert(SEAT, value(seat)?);
            }
        }
        Relayed::Observer { session } => {
            h.insert(OBSERVE, value(session)?);
        }
    }
    let config = tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER);
    let connecting = tokio_tungstenite::connect_async_with_config(req, Some(config), true);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(e)) => Err(format!("cannot open {url}: {e}")),
        Err(_) => Err(format!("no answer from {url} within {CONNECT_TIMEOUT:?}")),
    }
}

/// Relays `socket` to the room's owner until either side closes, the owner falls silent for a
/// lease length, or this server stops; then closes both.
pub(crate) async fn run(app: AppState, mut socket: WebSocket, lease: RoomLease, who: Relayed) {
    // Counted here from the upgrade to the close, including the attempt to reach the owner.
    let _counted = app.metrics.connection(crate::metrics::ConnKind::Relayed);
    let owner = match connect(&app, &lease, &who).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(
                session = lease.session_id,
                owner = lease.instance_id,
                "cannot relay to the room's instance: {e}"
            );
            let e = error_frame(
                None,
                "unavailable",
                "the room's server cannot be reached right now; reconnecting",
            );
            let _ = socket.send(Message::Text(e.into())).await;
            return;
        }
    };
    let (mut to_owner, mut from_owner) = owner.split();
    let (mut to_client, mut from_client) = socket.split();
    // When anything last came from the owner (milliseconds since the epoch).
    let heard = AtomicU64::new(now_ms());
    let silence = app.tunables.room_lease_ms;
    let up = up(&mut from_client, &mut to_owner, &heard, silence, &lease);
    let down = down(&mut from_owner, &mut to_client, &heard);
    tokio::select! {
        () = up => {}
        () = down => {}
        () = app.stopping() => {}
    }
    // Both sides close together: the participant's page reconnects, the owner's room sees the
    // connection leave.
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
        let _ = to_client.send(Message::Close(None)).await;
        let _ = to_owner.send(tungstenite::Message::Close(None)).await;
    })
    .await;
}

/// Passes what the client sends on to the owner, and pings the owner, until either closes or
/// the owner has been silent (`heard`) for `silence` milliseconds.
async fn up(
    from_client: &mut SplitStream<WebSocket>,
    to_owner: &mut SplitSink<OwnerSocket, tungstenite::Message>,
    heard: &AtomicU64,
    silence: u64,
    lease: &RoomLease,
) {
    let mut ping = tokio::time::interval(Duration::from_millis((silence / 3).max(1)));
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let msg = tokio::select! {
            m = from_client.next() => match m {
                Some(Ok(m)) => m,
                _ => return,
            },
            _ = ping.tick() => {
                if now_ms() > heard.load(Ordering::Relaxed) + silence {
                    tracing::warn!(session = lease.session_id, "the room's instance fell silent; closing the relayed socket");
                    return;
                }
                if to_owner.send(tungstenite::Message::Ping(Default::default())).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let to = match msg {
            Message::Text(t) => {
                match tungstenite::Utf8Bytes::try_from(axum::body::Bytes::from(t)) {
                    Ok(t) => tungstenite::Message::Text(t),
                    Err(_) => return,
                }
            }
            Message::Binary(b) => tungstenite::Message::Binary(b),
            Message::Close(_) => return,
            // Control frames are answered on each hop by the WebSocket libraries.
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        if to_owner.send(to).await.is_err() {
            return;
        }
    }
}

/// Passes what the owner sends on to the client, noting in `heard` when it came, until either
/// closes.
async fn down(
    from_owner: &mut SplitStream<OwnerSocket>,
    to_client: &mut SplitSink<WebSocket, Message>,
    heard: &AtomicU64,
) {
    loop {
        let Some(Ok(mut m)) = from_owner.next().await else {
            return;
        };
        // The frames the owner wrote together (a batch: events, view, ack) are written on
        // together too, with one flush.
        let mut fed = 0;
        loop {
            heard.store(now_ms(), Ordering::Relaxed);
            let to = match m {
                tungstenite::Message::Text(t) => {
                    match Utf8Bytes::try_from(axum::body::Bytes::from(t)) {
                        Ok(t) => Some(Message::Text(t)),
                        Err(_) => return,
                    }
                }
                tungstenite::Message::Binary(b) => Some(Message::Binary(b)),
                tungstenite::Message::Close(_) => {
                    let _ = to_client.flush().await;
                    return;
                }
                _ => None,
            };
            if let Some(to) = to {
                if to_client.feed(to).await.is_err() {
                    return;
                }
                fed += 1;
            }
            if fed >= super::FLUSH_EVERY {
                break;
            }
            match from_owner.next().now_or_never() {
                Some(Some(Ok(n))) => m = n,
                Some(_) => {
                    let _ = to_client.flush().await;
                    return;
                }
                None => break,
            }
        }
        if to_client.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_admitted_only_exactly() {
        assert!(ClusterSecret::new("  ").is_none());
        let secret = ClusterSecret::new(" s3cret ").expect("a secret");
        let with = |v: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = v {
                h.insert(AUTHORIZATION, HeaderValue::from_str(v).expect("header"));
            }
            secret.admits(&h)
        };
        assert!(with(Some("Bearer s3cret")));
        assert!(!with(None));
        assert!(!with(Some("s3cret")));
        assert!(!with(Some("Bearer s3cre")));
        assert!(!with(Some("Bearer s3cret2")));
        assert!(!with(Some("Bearer S3cret")));
        assert!(!format!("{secret:?}").contains("s3cret"));
    }

    #[test]
    fn advertised_urls_become_the_internal_websocket_route() {
        assert_eq!(
            relay_url("http://10.0.0.2:8080"),
            "ws://10.0.0.2:8080/internal/relay"
        );
        assert_eq!(
            relay_url("https://b.example.org/"),
            "wss://b.example.org/internal/relay"
        );
    }
}
