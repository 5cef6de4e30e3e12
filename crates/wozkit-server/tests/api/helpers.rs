//! Test harness: the server bound to 127.0.0.1:0 with a fresh data directory, a tiny HTTP/1.1
//! client (cookies, forms, Origin), and scripted WebSocket participants.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use wozkit_core::event::Event;
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_server::{Config, StartError, Tunables, launch_with_listener};
use wozkit_store::Store;

/// Knobs of the tiny study used by most tests.
#[derive(Clone)]
pub struct Tiny {
    pub time_limit_s: u32,
    pub wait_limit_s: u32,
    pub on_timeout: &'static str,
    pub grace_s: u32,
    pub action_s: f64,
}

impl Default for Tiny {
    fn default() -> Self {
        Tiny {
            time_limit_s: 120,
            wait_limit_s: 60,
            on_timeout: "complete",
            grace_s: 30,
            action_s: 1.0,
        }
    }
}

impl Tiny {
    pub fn yaml(&self) -> String {
        format!(
            r#"
id: tiny
title: Tiny study
roles:
  user: {{label: Operator}}
  wizard: {{label: Assistant, name: Fred}}
session:
  time_limit_s: {time}
  clock_starts: start
  disconnect_grace_s: {grace}
  finish: {{min_messages: 2}}
pairing:
  wait_limit_s: {wait}
  on_timeout: {on_timeout}
world:
  variables: {{fire_out: false}}
  locations: [{{id: base, name: Base}}, {{id: tower, name: Tower}}]
  robot_kinds: {{ground: {{label: Ground robot}}}}
  robots: [{{id: r1, name: Robot 1, kind: ground, start: base, capabilities: [move]}}]
subtasks: [{{id: go, label: Go, progress: 100}}]
states:
  - {{id: start, type: interaction, initial: true, transitions: [greet]}}
  - id: greet
    type: interaction
    templates: ["Hello, I am {{wizard.name}}."]
    transitions: [ask, bye]
  - id: ask
    type: request
    templates: ["May I send the robot?"]
    lock: {{kind: approval, prompt: "Send the robot?", on_approve: {{set: {{fire_out: true}}}}}}
    transitions: [bye]
  - {{id: bye, type: interaction, templates: ["Goodbye."], terminal: true}}
fixed_options: [{{id: ok, text: Okay}}]
actions:
  - id: move
    label: Move
    target: true
    moves: true
    requires: move
    duration: {{default: {action}}}
    on_complete: {{milestone: go}}
goal: "fire_out"
survey:
  questions:
    - {{id: q1, text: How was it?, kind: likert, points: 5}}
payment: {{base: 1.0, per_minute: 0.1, max_minutes: 10, no_partner: 0.5}}
"#,
            time = self.time_limit_s,
            grace = self.grace_s,
            wait = self.wait_limit_s,
            on_timeout = self.on_timeout,
            action = self.action_s,
        )
    }

    pub fn study(&self) -> LoadedStudy {
        match load_text("tiny.yaml", &self.yaml(), StudySource::Dir(".".into())) {
            Ok(s) => s,
            Err(e) => panic!("tiny study does not load:\n{e}"),
        }
    }
}

pub fn fast() -> Tunables {
    Tunables {
        bot_pace_ms: (30, 60),
        waiting_update_ms: 200,
        hello_timeout_ms: 5000,
        room_linger_ms: 1000,
    }
}

pub struct TestApp {
    pub addr: SocketAddr,
    pub store: Arc<dyn Store>,
    /// Keeps the temporary directory alive for the whole test.
    _tmp: Option<tempfile::TempDir>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), StartError>>>,
}

pub async fn spawn_app(tiny: Tiny) -> TestApp {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().to_path_buf();
    let mut app = spawn_app_in(dir, tiny.study()).await;
    app._tmp = Some(tmp);
    app
}

/// Starts a server on an existing data directory (for restarts).
pub async fn spawn_app_in(dir: PathBuf, study: LoadedStudy) -> TestApp {
    let store = wozkit_store::open(dir.to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let config = Config {
        studies: vec![study],
        tunables: fast(),
    };
    let handle = tokio::spawn(launch_with_listener(
        config,
        store.clone(),
        listener,
        async {
            let _ = stopped.await;
        },
    ));
    TestApp {
        addr,
        store,
        _tmp: None,
        stop: Some(stop),
        handle: Some(handle),
    }
}

impl TestApp {
    /// Stops the server and waits until it has released the data directory.
    pub async fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.handle.take() {
            let r = tokio::time::timeout(Duration::from_secs(10), h).await;
            assert!(
                matches!(r, Ok(Ok(Ok(())))),
                "server did not stop cleanly: {r:?}"
            );
        }
    }

    /// Takes the temporary directory away (to restart on it).
    pub fn take_dir(&mut self) -> Option<tempfile::TempDir> {
        self._tmp.take()
    }

    pub async fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Response {
        http(self.addr, method, path, headers, body).await
    }

    /// Opens an entry link; returns the participant with its cookie.
    pub async fn join(&self, query: &str) -> Client {
        let res = self.http("GET", &format!("/join?{query}"), &[], "").await;
        assert_eq!(res.status, 303, "join failed: {}", res.body);
        let set = res.header("set-cookie").expect("join sets a cookie");
        let cookie = set.split(';').next().unwrap_or_default().to_string();
        let location = res.header("location").unwrap_or_default();
        let seat = location.split("seat=").nth(1).map(str::to_string);
        Client {
            addr: self.addr,
            cookie,
            seat,
        }
    }

    pub async fn events(&self, session: &str) -> Vec<Event> {
        self.store.events(session, 0).await.expect("events")
    }

    /// Waits until the session's log holds an event matching `pred`.
    pub async fn wait_event(&self, session: &str, pred: impl Fn(&Event) -> bool) -> Event {
        for _ in 0..200 {
            if let Some(e) = self.events(session).await.into_iter().find(|e| pred(e)) {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "no such event in session {session}: {:#?}",
            self.events(session).await
        );
    }
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("connection"))
    {
        req.push_str("Connection: close\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut raw = vec![];
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A participant's browser: its cookie (and seat).
#[derive(Clone)]
pub struct Client {
    pub addr: SocketAddr,
    pub cookie: String,
    pub seat: Option<String>,
}

impl Client {
    fn q(&self) -> String {
        self.seat
            .as_ref()
            .map(|s| format!("?seat={s}"))
            .unwrap_or_default()
    }

    pub async fn page(&self) -> Response {
        http(
            self.addr,
            "GET",
            &format!("/p{}", self.q()),
            &[("Cookie", &self.cookie)],
            "",
        )
        .await
    }

    pub async fn post(&self, path: &str, form: &str) -> Response {
        let origin = format!("http://{}", self.addr);
        let headers = [
            ("Cookie", self.cookie.as_str()),
            ("Origin", origin.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ];
        http(
            self.addr,
            "POST",
            &format!("{path}{}", self.q()),
            &headers,
            form,
        )
        .await
    }

    /// The hidden `step` of the current page's form.
    pub async fn step(&self) -> String {
        let body = self.page().await.body;
        body.split("name=\"step\" value=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_default()
            .to_string()
    }

    /// Accepts consent and instructions: the participant is then in the waiting room.
    pub async fn accept_pages(&self) {
        for _ in 0..2 {
            let step = self.step().await;
            let res = self.post("/p/next", &format!("step={step}")).await;
            assert_eq!(res.status, 303, "{}", res.body);
        }
        let page = self.page().await.body;
        assert!(
            page.contains("data-page=\"waiting\""),
            "not in the waiting room: {page}"
        );
    }

    pub async fn ws(&self) -> Ws {
        self.ws_with(&[]).await.expect("WebSocket handshake")
    }

    pub async fn ws_with(
        &self,
        extra: &[(&'static str, &str)],
    ) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
        let mut req = format!("ws://{}/ws{}", self.addr, self.q()).into_client_request()?;
        req.headers_mut()
            .insert("cookie", self.cookie.parse().expect("cookie header"));
        for (k, v) in extra {
            req.headers_mut().insert(*k, v.parse().expect("header"));
        }
        let (stream, _) = tokio_tungstenite::connect_async(req).await?;
        Ok(Ws {
            stream,
            seen: vec![],
            pending: VecDeque::new(),
        })
    }
}

pub struct Ws {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Every frame received so far.
    pub seen: Vec<Value>,
    /// Frames received but not yet taken by [`Ws::until`].
    pending: VecDeque<Value>,
}

impl Ws {
    pub async fn send(&mut self, v: Value) {
        self.send_text(&v.to_string()).await;
    }

    pub async fn send_text(&mut self, t: &str) {
        self.stream
            .send(Message::Text(t.into()))
            .await
            .expect("send");
    }

    pub async fn hello(&mut self, last_seq: u64) {
        self.send(json!({"type": "hello", "last_seq": last_seq}))
            .await;
    }

    pub async fn cmd(&mut self, id: &str, cmd: Value) {
        self.send(json!({"type": "cmd", "id": id, "cmd": cmd}))
            .await;
    }

    /// The next frame (None when the connection closed).
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(10), self.stream.next())
                .await
                .expect("a frame within 10 s");
            match msg {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).expect("server sends JSON");
                    self.seen.push(v.clone());
                    return Some(v);
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => continue,
            }
        }
    }

    /// The first frame not taken yet that matches (reading more as needed). Frames that do not
    /// match stay for later calls, so tests need not care how frames interleave.
    pub async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.pending.iter().position(&pred) {
            return self.pending.remove(i).unwrap_or_default();
        }
        loop {
            match self.next().await {
                Some(v) if pred(&v) => return v,
                Some(v) => self.pending.push_back(v),
                None => panic!("connection closed; frames seen: {:#?}", self.seen),
            }
        }
    }

    /// The most recent view received.
    pub fn last_view(&self) -> Value {
        self.seen
            .iter()
            .rev()
            .find(|v| v["type"] == "view")
            .map(|v| v["view"].clone())
            .unwrap_or_default()
    }

    pub async fn until_type(&mut self, ty: &str) -> Value {
        self.until(|v| v["type"] == ty).await
    }

    /// Waits for the answer (ack or error) to command `id`.
    pub async fn answer(&mut self, id: &str) -> Value {
        self.until(|v| (v["type"] == "ack" || v["type"] == "error") && v["id"] == id)
            .await
    }

    /// Waits for an event of `kind`.
    pub async fn event(&mut self, kind: &str) -> Value {
        self.until(|v| v["type"] == "event" && v["event"]["kind"] == kind)
            .await["event"]
            .clone()
    }

    pub async fn close(mut self) {
        let _ = self.stream.close(None).await;
    }
}

/// Two participants paired in the tiny study: (user, wizard, session id). Their room sockets
/// have said hello and both have joined.
pub async fn paired(app: &TestApp) -> (Client, Client, String) {
    let user = app.join("participant=alice&role=user").await;
    let wizard = app.join("participant=bob&role=wizard").await;
    user.accept_pages().await;
    wizard.accept_pages().await;
    let mut wu = user.ws().await;
    wu.hello(0).await;
    let mut ww = wizard.ws().await;
    ww.hello(0).await;
    let pu = wu.until_type("paired").await;
    let pw = ww.until_type("paired").await;
    assert_eq!(pu["session"], pw["session"]);
    let session = pu["session"].as_str().unwrap_or_default().to_string();
    (user, wizard, session)
}

/// Opens the room socket: hello, welcome, and the first view.
pub async fn enter(c: &Client, last_seq: u64) -> Ws {
    let mut ws = c.ws().await;
    ws.hello(last_seq).await;
    ws.until_type("welcome").await;
    ws.until_type("view").await;
    ws
}
