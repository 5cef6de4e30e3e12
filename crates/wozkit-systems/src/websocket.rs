//! The `websocket` kind: a dialogue system that keeps a WebSocket connection open, answers turns
//! over it (streamed or whole) and may speak unprompted.
//!
//! # Protocol (version 1)
//!
//! wozkit is the client. It opens one connection per system, at the first turn (or when the
//! server asks for it with [`System::connect`]), and keeps it open; every message is a JSON
//! object in a text frame with a `type` field. Requests of all dialogues share the connection
//! and are told apart by their `id`, so a system may work on several at once and answer them in
//! any order.
//!
//! Right after connecting, wozkit introduces itself (no answer is expected):
//!
//! ```json
//! {"type": "hello", "system": "my-bot", "protocol": 1}
//! ```
//!
//! For every turn it needs answered, wozkit sends the dialogue so far, oldest turn first, roles
//! from the system's point of view (`assistant` turns are the system's own earlier replies).
//! `id` is an opaque string, unique for the life of the process; `stream` says whether the reply
//! is shown as it is typed (deltas are welcome then, and harmless otherwise):
//!
//! ```json
//! {"type": "turn", "id": "17", "dialogue_id": "d-42", "stream": true,
//!  "turns": [{"role": "user", "text": "Hi"},
//!            {"role": "assistant", "text": "Hello! Where to?"},
//!            {"role": "user", "text": "Lisbon"}]}
//! ```
//!
//! The system answers with any number of deltas, then the reply, or an error:
//!
//! ```json
//! {"type": "delta", "id": "17", "text": "Lisbon is"}
//! {"type": "delta", "id": "17", "text": " lovely in May."}
//! {"type": "reply", "id": "17", "text": "Lisbon is lovely in May."}
//! {"type": "error", "id": "17", "message": "model overloaded"}
//! ```
//!
//! The `reply` text is what is stored and shown in the end; when it is left out, the deltas
//! joined together are the reply. An `error` fails the turn (it is not retried). An `error`
//! without `id` fails every turn in flight on the connection.
//!
//! When wozkit gives up on a turn (its timeout ran out), it says so; the system may stop working
//! on it and need not answer. Anything that still comes for that `id` is ignored:
//!
//! ```json
//! {"type": "cancel", "id": "17"}
//! ```
//!
//! The system may speak unprompted, at any time, into any dialogue it has seen:
//!
//! ```json
//! {"type": "say", "dialogue_id": "d-42", "text": "Are you still there?"}
//! ```
//!
//! wozkit hands these to [`WebsocketSystem::subscribe_unprompted`] (or
//! [`crate::Client::subscribe_unprompted`]), and the server shows them in the dialogue as the
//! system's messages. They only arrive while the connection is open.
//!
//! Frames of another `type` are ignored, so later versions can add some. A frame wozkit cannot
//! read (not JSON, binary, a known `type` with missing fields) fails the turn whose `id` it
//! carries, or every turn in flight when it carries none, with a bad-response error; the
//! connection stays open.
//!
//! # Failures and reconnection
//!
//! When the connection breaks (or closes) every turn in flight fails with a connection error,
//! which the client's limits may retry; the next turn opens a new connection. wozkit pings every
//! 15 s and drops a connection that stayed silent (not even a pong) for 45 s. A refused handshake
//! fails with its HTTP status. Messages larger than 4 MiB break the connection.
//!
//! `ws://` and `wss://` URLs both work; TLS uses rustls with the platform's root certificates.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::spec::WebsocketSpec;
use crate::{Reply, System, SystemError, Turn, Unprompted};

/// The protocol version sent in `hello`.
pub const PROTOCOL: u32 = 1;
/// How often an idle connection is pinged.
const PING_EVERY: Duration = Duration::from_secs(15);
/// A connection silent for this long is dropped.
const SILENT_LIMIT: Duration = Duration::from_secs(45);
/// The largest message accepted.
const MAX_MESSAGE: usize = 4 << 20;
/// Unprompted messages kept for a slow subscriber before it misses some.
const UNPROMPTED_BUFFER: usize = 256;
/// Longest piece of a bad frame quoted in an error message.
const FRAME_SNIPPET: usize = 200;

/// A system reached over one long-lived WebSocket connection (protocol in the [module
/// docs](self)).
pub struct WebsocketSystem {
    name: String,
    url: String,
    slot: tokio::sync::Mutex<Option<Arc<Conn>>>,
    next_id: AtomicU64,
    unprompted: broadcast::Sender<Unprompted>,
}

impl std::fmt::Debug for WebsocketSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebsocketSystem")
            .field("name", &self.name)
            .field("url", &self.url)
            .finish()
    }
}

/// What happens to one turn in flight.
enum Event {
    Delta(String),
    Done(Option<String>),
    Failed(SystemError),
}

/// The turns in flight on a connection, and why it closed once it has.
#[derive(Default)]
struct Pending {
    closed: Option<String>,
    turns: HashMap<String, mpsc::UnboundedSender<Event>>,
}

/// One open connection: frames to send go to its task, which also reads.
struct Conn {
    out: mpsc::UnboundedSender<Message>,
    pending: Arc<Mutex<Pending>>,
}

impl Conn {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        lock(&self.pending)
    }

    fn is_open(&self) -> bool {
        self.lock().closed.is_none()
    }
}

fn lock(pending: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    pending.lock().unwrap_or_else(|p| p.into_inner())
}

/// Forgets a turn when its call ends or is given up; a turn still outstanding is cancelled.
struct InFlight {
    conn: Arc<Conn>,
    id: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let outstanding = self.conn.lock().turns.remove(&self.id).is_some();
        if outstanding {
            let cancel = json!({"type": "cancel", "id": self.id});
            let _ = self.conn.out.send(Message::text(cancel.to_string()));
        }
    }
}

#[derive(Serialize)]
struct TurnFrame<'a> {
    r#type: &'static str,
    id: &'a str,
    dialogue_id: &'a str,
    stream: bool,
    turns: &'a [Turn],
}

/// The frames a system sends.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Incoming {
    Delta {
        id: String,
        text: String,
    },
    Reply {
        id: String,
        #[serde(default)]
        text: Option<String>,
    },
    Error {
        #[serde(default)]
        id: Option<String>,
        message: String,
    },
    Say {
        dialogue_id: String,
        text: String,
    },
    #[serde(other)]
    Other,
}

impl WebsocketSystem {
    /// The system `name` at `spec.url`. Connects at the first call, not now.
    pub fn new(name: &str, spec: &WebsocketSpec) -> Result<Self, SystemError> {
        if !(spec.url.starts_with("ws://") || spec.url.starts_with("wss://")) {
            return Err(SystemError::Config {
                system: name.to_string(),
                detail: format!("`url` `{}` must start with ws:// or wss://", spec.url),
            });
        }
        // Process-wide default for `wss://`; a provider installed earlier is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(WebsocketSystem {
            name: name.to_string(),
            url: spec.url.clone(),
            slot: tokio::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
            unprompted: broadcast::channel(UNPROMPTED_BUFFER).0,
        })
    }

    /// A receiver of the messages the system sends without being asked (`say` frames), from
    /// now on. A receiver that falls more than 256 messages behind misses the oldest ones.
    pub fn subscribe_unprompted(&self) -> broadcast::Receiver<Unprompted> {
        self.unprompted.subscribe()
    }

    fn connection_error(&self, detail: impl Into<String>) -> SystemError {
        SystemError::Connection {
            system: self.name.clone(),
            detail: detail.into(),
        }
    }

    /// The open connection, opening one when there is none (or the last one broke).
    async fn connection(&self) -> Result<Arc<Conn>, SystemError> {
        let mut slot = self.slot.lock().await;
        if let Some(conn) = slot.as_ref()
            && conn.is_open()
        {
            return Ok(conn.clone());
        }
        *slot = None;
        let conn = Arc::new(self.open().await?);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    async fn open(&self) -> Result<Conn, SystemError> {
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let (mut ws, _) =
            tokio_tungstenite::connect_async_with_config(self.url.as_str(), Some(config), true)
                .await
                .map_err(|e| self.handshake_error(e))?;
        let hello = json!({"type": "hello", "system": self.name, "protocol": PROTOCOL});
        ws.send(Message::text(hello.to_string()))
            .await
            .map_err(|e| self.connection_error(format!("sending hello to {}: {e}", self.url)))?;
        let (out, out_rx) = mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(Pending::default()));
        let reader = Reader {
            system: self.name.clone(),
            pending: pending.clone(),
            unprompted: self.unprompted.clone(),
        };
        tokio::spawn(reader.run(ws, out_rx));
        Ok(Conn { out, pending })
    }

    fn handshake_error(&self, e: tungstenite::Error) -> SystemError {
        match e {
            tungstenite::Error::Http(response) => {
                let body = response
                    .body()
                    .as_deref()
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default();
                SystemError::Status {
                    system: self.name.clone(),
                    status: response.status().as_u16(),
                    detail: format!(
                        "WebSocket handshake with {} refused: {}",
                        self.url,
                        snippet(body.trim())
                    ),
                }
            }
            e => self.connection_error(format!("connecting to {}: {e}", self.url)),
        }
    }

    /// Sends one turn and waits for its outcome, forwarding deltas when asked to.
    async fn ask(
        &self,
        dialogue_id: &str,
        history: &[Turn],
        deltas: Option<&mpsc::Sender<String>>,
    ) -> Result<Reply, SystemError> {
        let conn = self.connection().await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).to_string();
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut pending = conn.lock();
            if let Some(why) = &pending.closed {
                return Err(self.connection_error(why.clone()));
            }
            pending.turns.insert(id.clone(), tx);
        }
        let _in_flight = InFlight {
            conn: conn.clone(),
            id: id.clone(),
        };
        let frame = TurnFrame {
            r#type: "turn",
            id: &id,
            dialogue_id,
            stream: deltas.is_some(),
            turns: history,
        };
        let frame = serde_json::to_string(&frame).expect("a turn frame is always JSON");
        conn.out
            .send(Message::text(frame))
            .map_err(|_| self.connection_error("the connection closed before the turn was sent"))?;
        let mut text = String::new();
        loop {
            match rx.recv().await {
                Some(Event::Delta(delta)) => {
                    text.push_str(&delta);
                    if let Some(deltas) = deltas {
                        let _ = deltas.send(delta).await;
                    }
                }
                Some(Event::Done(full)) => {
                    return Ok(Reply {
                        text: full.unwrap_or(text),
                    });
                }
                Some(Event::Failed(e)) => return Err(e),
                None => return Err(self.connection_error("the connection closed mid-reply")),
            }
        }
    }
}

/// The connection's task: writes what the calls send, reads and routes what the system sends.
struct Reader {
    system: String,
    pending: Arc<Mutex<Pending>>,
    unprompted: broadcast::Sender<Unprompted>,
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl Reader {
    async fn run(self, mut ws: Socket, mut out: mpsc::UnboundedReceiver<Message>) {
        let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        let mut last_heard = Instant::now();
        let why = loop {
            tokio::select! {
                message = out.recv() => match message {
                    Some(message) => {
                        if let Err(e) = ws.send(message).await {
                            break format!("sending failed: {e}");
                        }
                    }
                    None => {
                        // The system was dropped and no call is left.
                        let _ = ws.close(None).await;
                        break "the connection was closed by wozkit".to_string();
                    }
                },
                frame = ws.next() => {
                    last_heard = Instant::now();
                    match frame {
                        Some(Ok(Message::Text(text))) => self.frame(text.as_str()),
                        Some(Ok(Message::Binary(_))) => {
                            self.fail_all(|| "a binary frame; frames are JSON text".to_string());
                        }
                        Some(Ok(Message::Close(close))) => {
                            break match close {
                                Some(c) if !c.reason.is_empty() => {
                                    format!("the system closed the connection: {}", c.reason)
                                }
                                _ => "the system closed the connection".to_string(),
                            };
                        }
                        Some(Ok(_)) => {} // ping, pong
                        Some(Err(e)) => break format!("the connection broke: {e}"),
                        None => break "the connection ended".to_string(),
                    }
                },
                _ = ping.tick() => {
                    if last_heard.elapsed() >= SILENT_LIMIT {
                        break format!("no sign of life for {}s", SILENT_LIMIT.as_secs());
                    }
                    if let Err(e) = ws.send(Message::Ping(Default::default())).await {
                        break format!("sending a ping failed: {e}");
                    }
                }
            }
        };
        let turns: Vec<_> = {
            let mut pending = lock(&self.pending);
            pending.closed = Some(why.clone());
            pending.turns.drain().map(|(_, tx)| tx).collect()
        };
        for tx in turns {
            let _ = tx.send(Event::Failed(SystemError::Connection {
                system: self.system.clone(),
                detail: why.clone(),
            }));
        }
    }

    fn bad(&self, detail: String) -> SystemError {
        SystemError::BadResponse {
            system: self.system.clone(),
            detail,
        }
    }

    /// Sends an event to the turn `id`, if it is still in flight; `last` ends the turn.
    fn route(&self, id: &str, event: Event, last: bool) {
        let mut pending = lock(&self.pending);
        let tx = if last {
            pending.turns.remove(id)
        } else {
            pending.turns.get(id).cloned()
        };
        if let Some(tx) = tx {
            let _ = tx.send(event);
        }
    }

    /// Fails every turn in flight (the connection stays open).
    fn fail_all(&self, detail: impl Fn() -> String) {
        let turns: Vec<_> = lock(&self.pending).turns.drain().collect();
        for (_, tx) in turns {
            let _ = tx.send(Event::Failed(self.bad(detail())));
        }
    }

    fn frame(&self, text: &str) {
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                self.fail_all(|| format!("a frame is not JSON ({e}): {}", snippet(text)));
                return;
            }
        };
        let incoming = match Incoming::deserialize(&value) {
            Ok(incoming) => incoming,
            Err(e) => {
                let detail = format!("unreadable frame ({e}): {}", snippet(text));
                match value.get("id").and_then(Value::as_str) {
                    Some(id) => self.route(id, Event::Failed(self.bad(detail)), true),
                    None => self.fail_all(|| detail.clone()),
                }
                return;
            }
        };
        match incoming {
            Incoming::Delta { id, text } => self.route(&id, Event::Delta(text), false),
            Incoming::Reply { id, text } => self.route(&id, Event::Done(text), true),
            Incoming::Error {
                id: Some(id),
                message,
            } => {
                let e = self.bad(format!("the system reported an error: {message}"));
                self.route(&id, Event::Failed(e), true);
            }
            Incoming::Error { id: None, message } => {
                self.fail_all(|| format!("the system reported an error: {message}"));
            }
            Incoming::Say { dialogue_id, text } => {
                // No subscriber is not an error: nobody is showing this system's dialogues.
                let _ = self.unprompted.send(Unprompted { dialogue_id, text });
            }
            Incoming::Other => {}
        }
    }
}

/// The start of `text`, at most [`FRAME_SNIPPET`] characters.
fn snippet(text: &str) -> String {
    let mut out: String = text.chars().take(FRAME_SNIPPET).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

#[async_trait]
impl System for WebsocketSystem {
    async fn reply(&self, dialogue_id: &str, history: &[Turn]) -> Result<Reply, SystemError> {
        self.ask(dialogue_id, history, None).await
    }

    async fn reply_stream(
        &self,
        dialogue_id: &str,
        history: &[Turn],
        deltas: mpsc::Sender<String>,
    ) -> Result<Reply, SystemError> {
        self.ask(dialogue_id, history, Some(&deltas)).await
    }

    fn subscribe_unprompted(&self) -> Option<broadcast::Receiver<Unprompted>> {
        Some(WebsocketSystem::subscribe_unprompted(self))
    }

    async fn connect(&self) -> Result<(), SystemError> {
        self.connection().await.map(|_| ())
    }
}
