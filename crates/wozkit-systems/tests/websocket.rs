//! The WebSocket system against a mock system speaking the protocol of `websocket.rs`: whole and
//! streamed replies, turns of several dialogues interleaved on one connection, error and
//! unreadable frames, a connection dropped mid-reply and the reconnection after it, cancelled
//! turns and unprompted messages.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use wozkit_systems::{Client, SystemError, SystemSpec, Turn, Unprompted, WebsocketSystem};

/// A guard against hanging forever; never an expectation about speed.
const PATIENCE: Duration = Duration::from_secs(20);

/// A mock system. What it does with a turn depends on the participant's last message:
///
/// - `hello`: deltas `Hi` and ` there`, then the reply `Hi there`;
/// - `pair X`: held until a second `pair` turn arrives, then both are answered interleaved, the
///   later one first (`reply to X`);
/// - `fail`: an error frame; `drop`: one delta, then the TCP connection is cut;
/// - `garbage`: a frame that is not JSON; `binary`: a binary frame; `no text`: a delta for the
///   turn without its `text`;
/// - `say`: a `say` frame into the turn's dialogue, then the reply `said`;
/// - `deltas only`: deltas and a reply without text; `future`: a frame of an unknown type first;
/// - `never`: no answer at all;
/// - anything else: the reply `echo: TEXT` (with the number of turns seen).
///
/// With `greet`, it says `welcome` into dialogue `lobby` right after `hello`.
#[derive(Clone, Default)]
struct MockWs {
    frames: Arc<Mutex<Vec<Value>>>,
    connections: Arc<AtomicUsize>,
    greet: bool,
}

impl MockWs {
    async fn start(greet: bool) -> (MockWs, String) {
        let mock = MockWs {
            greet,
            ..MockWs::default()
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/bot", listener.local_addr().unwrap());
        let m = mock.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                m.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(m.clone().serve(tcp));
            }
        });
        (mock, url)
    }

    fn frames(&self) -> Vec<Value> {
        self.frames.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    async fn serve(self, tcp: tokio::net::TcpStream) {
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let mut held: Vec<(String, String)> = Vec::new();
        while let Some(Ok(message)) = ws.next().await {
            let Message::Text(text) = message else {
                continue;
            };
            let frame: Value = serde_json::from_str(text.as_str()).unwrap();
            self.frames.lock().unwrap().push(frame.clone());
            let mut out: Vec<Message> = Vec::new();
            let send = |out: &mut Vec<Message>, v: Value| out.push(Message::text(v.to_string()));
            match frame["type"].as_str().unwrap() {
                "hello" if self.greet => send(
                    &mut out,
                    json!({"type": "say", "dialogue_id": "lobby", "text": "welcome"}),
                ),
                "turn" => {
                    let id = frame["id"].as_str().unwrap().to_string();
                    let turns = frame["turns"].as_array().unwrap();
                    let last = turns.last().unwrap()["text"].as_str().unwrap().to_string();
                    match last.as_str() {
                        "hello" => {
                            send(&mut out, json!({"type": "delta", "id": id, "text": "Hi"}));
                            send(
                                &mut out,
                                json!({"type": "delta", "id": id, "text": " there"}),
                            );
                            send(
                                &mut out,
                                json!({"type": "reply", "id": id, "text": "Hi there"}),
                            );
                        }
                        "fail" => send(
                            &mut out,
                            json!({"type": "error", "id": id, "message": "model overloaded"}),
                        ),
                        "drop" => {
                            let delta = json!({"type": "delta", "id": id, "text": "part"});
                            ws.send(Message::text(delta.to_string())).await.unwrap();
                            return; // the stream is dropped without a closing handshake
                        }
                        "garbage" => out.push(Message::text("this is {not json")),
                        "binary" => out.push(Message::binary(vec![1u8, 2, 3])),
                        "no text" => send(&mut out, json!({"type": "delta", "id": id})),
                        "say" => {
                            let dialogue = frame["dialogue_id"].clone();
                            send(
                                &mut out,
                                json!({"type": "say", "dialogue_id": dialogue, "text": "Are you still there?"}),
                            );
                            send(&mut out, json!({"type": "reply", "id": id, "text": "said"}));
                        }
                        "deltas only" => {
                            send(
                                &mut out,
                                json!({"type": "delta", "id": id, "text": "built "}),
                            );
                            send(&mut out, json!({"type": "delta", "id": id, "text": "up"}));
                            send(&mut out, json!({"type": "reply", "id": id}));
                        }
                        "future" => {
                            send(&mut out, json!({"type": "typing", "id": id}));
                            send(&mut out, json!({"type": "reply", "id": id, "text": "ok"}));
                        }
                        "never" => {}
                        text if text.starts_with("pair ") => {
                            held.push((id, text["pair ".len()..].to_string()));
                            if held.len() == 2 {
                                let (a, b) = (held[0].clone(), held[1].clone());
                                for (id, x) in [&b, &a] {
                                    let t = format!("reply to {x}");
                                    send(&mut out, json!({"type": "delta", "id": id, "text": t}));
                                }
                                for (id, x) in [&b, &a] {
                                    let t = format!("reply to {x}");
                                    send(&mut out, json!({"type": "reply", "id": id, "text": t}));
                                }
                                held.clear();
                            }
                        }
                        text => {
                            let t = format!("echo: {text} ({} turns)", turns.len());
                            send(&mut out, json!({"type": "reply", "id": id, "text": t}));
                        }
                    }
                }
                _ => {}
            }
            for message in out {
                if ws.send(message).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn spec(url: &str, limits: Value) -> SystemSpec {
    let mut all =
        json!({"timeout_s": 10, "retries": 0, "backoff_ms": 5, "concurrency": 8, "queue": 16});
    all.as_object_mut()
        .unwrap()
        .extend(limits.as_object().unwrap().clone());
    serde_json::from_value(json!({"kind": "websocket", "url": url, "limits": all}))
        .expect("valid websocket spec")
}

fn client(url: &str) -> Client {
    Client::new("ws-bot", &spec(url, json!({}))).unwrap()
}

fn said(text: &str) -> Vec<Turn> {
    vec![
        Turn::user("Hi"),
        Turn::assistant("Hello! Where to?"),
        Turn::user(text),
    ]
}

async fn collect(mut rx: mpsc::Receiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(d) = rx.recv().await {
        out.push(d);
    }
    out
}

fn bad_response(e: &SystemError) -> &str {
    match e {
        SystemError::BadResponse { system, detail } => {
            assert_eq!(system, "ws-bot");
            detail
        }
        other => panic!("expected a bad response, got {other:?}"),
    }
}

#[tokio::test]
async fn a_reply_and_the_frames_it_came_from() {
    let (mock, url) = MockWs::start(false).await;
    let client = client(&url);
    let reply = client.reply("d-42", &said("Lisbon")).await.unwrap();
    assert_eq!(reply.text, "echo: Lisbon (3 turns)");
    let frames = mock.frames();
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(
        frames[0],
        json!({"type": "hello", "system": "ws-bot", "protocol": 1})
    );
    let turn = &frames[1];
    assert_eq!(turn["type"], "turn");
    assert_eq!(turn["dialogue_id"], "d-42");
    assert_eq!(turn["stream"], false);
    assert!(turn["id"].is_string(), "{turn}");
    assert_eq!(
        turn["turns"],
        json!([
            {"role": "user", "text": "Hi"},
            {"role": "assistant", "text": "Hello! Where to?"},
            {"role": "user", "text": "Lisbon"},
        ])
    );
}

#[tokio::test]
async fn streamed_deltas_arrive_and_the_reply_frame_gives_the_text() {
    let (mock, url) = MockWs::start(false).await;
    let client = client(&url);
    let (tx, rx) = mpsc::channel(16);
    let reply = client.reply_stream("d1", &said("hello"), tx).await.unwrap();
    assert_eq!(reply.text, "Hi there");
    assert_eq!(collect(rx).await, ["Hi", " there"]);
    assert_eq!(mock.frames()[1]["stream"], true);
    // Without a text in `reply`, the deltas make the reply.
    let (tx, rx) = mpsc::channel(16);
    let reply = client
        .reply_stream("d1", &said("deltas only"), tx)
        .await
        .unwrap();
    assert_eq!(reply.text, "built up");
    assert_eq!(collect(rx).await.concat(), "built up");
    // Deltas are not needed for a whole reply.
    assert_eq!(
        client.reply("d1", &said("hello")).await.unwrap().text,
        "Hi there"
    );
}

#[tokio::test]
async fn turns_of_two_dialogues_share_one_connection_and_get_their_own_replies() {
    let (mock, url) = MockWs::start(false).await;
    let client = client(&url);
    let (tx_a, rx_a) = mpsc::channel(16);
    let (tx_b, rx_b) = mpsc::channel(16);
    let (history_a, history_b) = (said("pair A"), said("pair B"));
    let (a, b) = tokio::join!(
        client.reply_stream("dialogue-a", &history_a, tx_a),
        client.reply_stream("dialogue-b", &history_b, tx_b),
    );
    // The mock answered the later turn first, with the deltas of both interleaved.
    assert_eq!(a.unwrap().text, "reply to A");
    assert_eq!(b.unwrap().text, "reply to B");
    assert_eq!(collect(rx_a).await, ["reply to A"]);
    assert_eq!(collect(rx_b).await, ["reply to B"]);
    assert_eq!(mock.connections(), 1);
    let turns: Vec<Value> = mock
        .frames()
        .into_iter()
        .filter(|f| f["type"] == "turn")
        .collect();
    assert_eq!(turns.len(), 2);
    assert_ne!(turns[0]["id"], turns[1]["id"], "ids tell the turns apart");
    // And again, with more turns at once.
    let calls: Vec<_> = (0..10)
        .map(|i| {
            let client = &client;
            async move {
                client
                    .reply(&format!("d{i}"), &said(&format!("n{i}")))
                    .await
            }
        })
        .collect();
    let replies = futures_util::future::join_all(calls).await;
    for (i, reply) in replies.into_iter().enumerate() {
        assert_eq!(reply.unwrap().text, format!("echo: n{i} (3 turns)"));
    }
    assert_eq!(mock.connections(), 1);
}

#[tokio::test]
async fn an_error_frame_fails_the_turn_with_its_message() {
    let (_mock, url) = MockWs::start(false).await;
    let client = client(&url);
    let err = client.reply("d1", &said("fail")).await.unwrap_err();
    assert!(bad_response(&err).contains("model overloaded"), "{err}");
    assert!(!err.is_retryable());
    // The connection is still good.
    assert_eq!(
        client.reply("d1", &said("x")).await.unwrap().text,
        "echo: x (3 turns)"
    );
}

#[tokio::test]
async fn a_connection_dropped_mid_reply_fails_the_turn_and_the_next_turn_reconnects() {
    let (mock, url) = MockWs::start(false).await;
    let client = client(&url);
    let (tx, rx) = mpsc::channel(16);
    let err = client
        .reply_stream("d1", &said("drop"), tx)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SystemError::Connection { system, .. } if system == "ws-bot"),
        "{err:?}"
    );
    assert_eq!(
        collect(rx).await,
        ["part"],
        "the delta before the drop was shown"
    );
    assert_eq!(mock.connections(), 1);
    let reply = client.reply("d1", &said("again")).await.unwrap();
    assert_eq!(reply.text, "echo: again (3 turns)");
    assert_eq!(mock.connections(), 2);
    let hellos = mock
        .frames()
        .iter()
        .filter(|f| f["type"] == "hello")
        .count();
    assert_eq!(hellos, 2, "a new connection says hello again");
}

#[tokio::test]
async fn a_dropped_connection_is_retried_within_the_limits() {
    let (mock, url) = MockWs::start(false).await;
    let client = Client::new("ws-bot", &spec(&url, json!({"retries": 1}))).unwrap();
    // The whole reply was never shown, so the client may retry: it reconnects and the mock cuts
    // it again.
    let err = client.reply("d1", &said("drop")).await.unwrap_err();
    assert!(matches!(err, SystemError::Connection { .. }), "{err:?}");
    assert_eq!(mock.connections(), 2);
}

#[tokio::test]
async fn unprompted_messages_reach_subscribers() {
    let (_mock, url) = MockWs::start(false).await;
    let client = client(&url);
    let mut rx = client
        .subscribe_unprompted()
        .expect("a websocket system can speak unprompted");
    assert_eq!(
        client.reply("d-7", &said("say")).await.unwrap().text,
        "said"
    );
    let got = tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("the say frame arrived")
        .unwrap();
    assert_eq!(
        got,
        Unprompted {
            dialogue_id: "d-7".into(),
            text: "Are you still there?".into()
        }
    );
}

#[tokio::test]
async fn connecting_early_lets_the_system_speak_before_any_turn() {
    let (mock, url) = MockWs::start(true).await;
    let ws = WebsocketSystem::new(
        "ws-bot",
        &match spec(&url, json!({})) {
            SystemSpec::Websocket(s) => s,
            _ => unreachable!(),
        },
    )
    .unwrap();
    let mut rx = ws.subscribe_unprompted();
    wozkit_systems::System::connect(&ws).await.unwrap();
    let got = tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("the greeting arrived")
        .unwrap();
    assert_eq!(got.dialogue_id, "lobby");
    assert_eq!(got.text, "welcome");
    assert_eq!(mock.connections(), 1);
    // Through the client too; connecting twice keeps the one connection.
    let client = client(&url);
    client.connect().await.unwrap();
    client.connect().await.unwrap();
    assert_eq!(mock.connections(), 2);
}

#[tokio::test]
async fn unreadable_frames_fail_the_turn_without_breaking_the_connection() {
    let (mock, url) = MockWs::start(false).await;
    let client = client(&url);
    for text in ["garbage", "binary", "no text"] {
        let err = client.reply("d1", &said(text)).await.unwrap_err();
        let detail = bad_response(&err);
        assert!(!detail.is_empty(), "{text}");
        if text == "garbage" {
            assert!(detail.contains("not JSON"), "{detail}");
        }
    }
    // Frames of an unknown type are skipped.
    assert_eq!(
        client.reply("d1", &said("future")).await.unwrap().text,
        "ok"
    );
    assert_eq!(mock.connections(), 1);
}

#[tokio::test]
async fn a_turn_given_up_is_cancelled() {
    let (mock, url) = MockWs::start(false).await;
    let client = Client::new("ws-bot", &spec(&url, json!({"timeout_s": 0.3}))).unwrap();
    let err = client.reply("d1", &said("never")).await.unwrap_err();
    assert!(matches!(err, SystemError::Timeout { .. }), "{err:?}");
    let id = mock
        .frames()
        .iter()
        .find(|f| f["type"] == "turn")
        .map(|f| f["id"].clone())
        .unwrap();
    let cancelled = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(c) = mock.frames().into_iter().find(|f| f["type"] == "cancel") {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a cancel frame was sent");
    assert_eq!(cancelled, json!({"type": "cancel", "id": id}));
}

#[tokio::test]
async fn no_server_is_a_connection_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    drop(listener);
    let err = client(&url).reply("d1", &said("x")).await.unwrap_err();
    match err {
        SystemError::Connection { system, detail } => {
            assert_eq!(system, "ws-bot");
            assert!(detail.contains(&url), "{detail}");
        }
        other => panic!("expected a connection error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_refused_handshake_gives_its_status() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tcp.read(&mut buf).await.unwrap();
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        let body = "no bots today";
        let response = format!(
            "HTTP/1.1 403 Forbidden\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        tcp.write_all(response.as_bytes()).await.unwrap();
    });
    let err = client(&url).reply("d1", &said("x")).await.unwrap_err();
    match &err {
        SystemError::Status { status, .. } => assert_eq!(*status, 403),
        other => panic!("expected a status error, got {other:?}"),
    }
    assert!(!err.is_retryable());
}

#[test]
fn a_url_that_is_not_a_websocket_is_refused() {
    let spec = spec("http://localhost:1/", json!({}));
    let err = Client::new("ws-bot", &spec).unwrap_err();
    assert!(
        matches!(&err, SystemError::Config { detail, .. } if detail.contains("url")),
        "{err}"
    );
}
