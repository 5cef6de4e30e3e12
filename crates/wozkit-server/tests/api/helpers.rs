//! Test harness: the server bound to 127.0.0.1:0 with a fresh data directory, the tiny study,
//! and shortcuts to a paired room.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::BufReader;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wozkit_core::event::{Event, EventKind, Judgment};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_server::{Config, StartError, Tunables, launch_with_listener};
use wozkit_store::Store;

pub use crate::client::{Client, Response, Ws, http};

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
        // Tests make many entry links from 127.0.0.1; the limit has its own test.
        join_per_minute: 600,
        heartbeat_ms: 200,
        // Generous: a test client answers pings only while it reads, and some hold a waiting
        // socket without reading for a while.
        stale_after_ms: 10_000,
        ..Tunables::default()
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
    spawn_app_tuned(tiny, fast()).await
}

/// Like [`spawn_app`], with other timings and limits than [`fast`].
pub async fn spawn_app_tuned(tiny: Tiny, tunables: Tunables) -> TestApp {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().to_path_buf();
    let mut app = start(dir, tiny.study(), tunables).await;
    app._tmp = Some(tmp);
    app
}

/// Starts a server on an existing data directory (for restarts).
pub async fn spawn_app_in(dir: PathBuf, study: LoadedStudy) -> TestApp {
    start(dir, study, fast()).await
}

/// Like [`spawn_app_in`], with other timings and limits than [`fast`].
pub async fn spawn_app_in_tuned(dir: PathBuf, study: LoadedStudy, tunables: Tunables) -> TestApp {
    start(dir, study, tunables).await
}

async fn start(dir: PathBuf, study: LoadedStudy, tunables: Tunables) -> TestApp {
    spawn_app_on(dir.to_str().expect("utf-8 path"), study, tunables).await
}

/// The app serving `study` from the store at `location` (a folder or a PostgreSQL URL).
pub async fn spawn_app_on(location: &str, study: LoadedStudy, tunables: Tunables) -> TestApp {
    let store = wozkit_store::open(location).await.expect("store opens");
    spawn_app_with(store, study, tunables).await
}

/// The app serving `study` from `store`, opened by the test (to keep a handle of its own).
pub async fn spawn_app_with(
    store: Arc<dyn Store>,
    study: LoadedStudy,
    tunables: Tunables,
) -> TestApp {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let config = Config {
        studies: vec![study],
        tunables,
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
        join_at(self.addr, query).await
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

/// Opens an entry link on the server at `addr`; returns the participant with its cookie.
pub async fn join_at(addr: SocketAddr, query: &str) -> Client {
    let res = http(addr, "GET", &format!("/join?{query}"), &[], "").await;
    assert_eq!(res.status, 303, "join failed: {}", res.body);
    let set = res.header("set-cookie").expect("join sets a cookie");
    let cookie = set.split(';').next().unwrap_or_default().to_string();
    let location = res.header("location").unwrap_or_default();
    let seat = location.split("seat=").nth(1).map(str::to_string);
    Client { addr, cookie, seat }
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

/// Opens the entry link `query` and goes on from the first page (the one before the work);
/// returns the participant.
pub async fn join_past_first_page(app: &TestApp, query: &str) -> Client {
    let c = app.join(query).await;
    let step = c.step().await;
    assert_eq!(c.post("/p/next", &format!("step={step}")).await.status, 303);
    c
}

/// Prolific worker `worker` in study `study`, past the first page.
pub async fn join_worker(app: &TestApp, study: &str, worker: &str) -> Client {
    join_past_first_page(
        app,
        &format!("study={study}&PROLIFIC_PID={worker}&STUDY_ID=s&SESSION_ID={worker}"),
    )
    .await
}

/// The judgments in a log, in order.
pub fn judgments(events: &[Event]) -> Vec<Judgment> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Judged(j) => Some(j.as_ref().clone()),
            _ => None,
        })
        .collect()
}

/// The wizard greets and says goodbye (the tiny study's terminal state), so the session ends;
/// returns the user's `ended` frame.
pub async fn greet_and_end(ww: &mut Ws, wu: &mut Ws) -> serde_json::Value {
    ww.cmd("c1", serde_json::json!({"cmd": "say", "state": "greet"}))
        .await;
    ww.answer("c1").await;
    ww.cmd("c2", serde_json::json!({"cmd": "say", "state": "bye"}))
        .await;
    ww.answer("c2").await;
    wu.until_type("ended").await
}

/// Opens the room socket: hello, welcome, and the first view.
pub async fn enter(c: &Client, last_seq: u64) -> Ws {
    let mut ws = c.ws().await;
    ws.hello(last_seq).await;
    ws.until_type("welcome").await;
    ws.until_type("view").await;
    ws
}

/// Logs in as the owner account `admin` (setting its password to `letmein` first); returns
/// the cookie (`wozkit_researcher=TOKEN`).
pub async fn login(app: &TestApp) -> String {
    wozkit_server::auth::ensure_password(app.store.as_ref(), Some("letmein"))
        .await
        .expect("password");
    login_with(app, "admin", "letmein").await
}

/// Creates an account with the given access (named after it plus a random suffix) and logs in
/// as it; returns the cookie.
pub async fn login_as(app: &TestApp, access: wozkit_server::auth::Access) -> String {
    login_as_named(app, access).await.1
}

/// Like [`login_as`], also returning the new account's name.
pub async fn login_as_named(
    app: &TestApp,
    access: wozkit_server::auth::Access,
) -> (String, String) {
    let name = format!("{}-{}", access.as_str(), &wozkit_store::new_id()[..8]);
    wozkit_server::auth::add_account(app.store.as_ref(), &name, access, Some("password-1"))
        .await
        .expect("create the account");
    let cookie = login_with(app, &name, "password-1").await;
    (name, cookie)
}

/// Logs in with an account name and password, expecting success; returns the cookie.
pub async fn login_with(app: &TestApp, name: &str, password: &str) -> String {
    let origin = format!("http://{}", app.addr);
    let headers = [
        ("Origin", origin.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    let res = app
        .http(
            "POST",
            "/researcher/login",
            &headers,
            &format!(
                "name={}&password={}&next=/researcher",
                urlencoding(name),
                urlencoding(password)
            ),
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    res.header("set-cookie")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Percent-encodes a form value.
pub fn urlencoding(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Like [`paired`], for tests that need several pairs: the participants are named after `tag`
/// and paired only with each other (a private pair key), so any number of pairs can coexist.
pub async fn paired_as(app: &TestApp, tag: &str) -> (Client, Client, String) {
    pair_links(
        app,
        &format!("participant={tag}-u&role=user&pair={tag}"),
        &format!("participant={tag}-w&role=wizard&pair={tag}"),
    )
    .await
}

/// Joins through two entry-link queries (user first), accepts the pages before the room, opens
/// both waiting rooms and waits until they are paired; returns both and the session id.
pub async fn pair_links(app: &TestApp, user: &str, wizard: &str) -> (Client, Client, String) {
    let (user, wizard, session, _waiting) = pair_links_at(app.addr, user, wizard).await;
    (user, wizard, session)
}

/// Like [`pair_links`], on the server at `addr`; also returns both waiting-room sockets (user,
/// wizard), still open.
pub async fn pair_links_at(
    addr: SocketAddr,
    user: &str,
    wizard: &str,
) -> (Client, Client, String, (Ws, Ws)) {
    let user = join_at(addr, user).await;
    let wizard = join_at(addr, wizard).await;
    user.accept_pages().await;
    wizard.accept_pages().await;
    let mut wu = user.ws().await;
    wu.hello(0).await;
    let mut ww = wizard.ws().await;
    ww.hello(0).await;
    let session = wu.until_type("paired").await["session"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(ww.until_type("paired").await["session"], session.as_str());
    (user, wizard, session, (wu, ww))
}

/// The text of an attribute value that follows `marker` in a page (up to the closing quote),
/// e.g. `attr_after(body, "data-page=\"")`; empty when the page has no such marker.
pub fn attr_after(body: &str, marker: &str) -> String {
    body.split(marker)
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_default()
        .to_string()
}

/// The `data-page` of a page: which page of the flow it is.
pub fn page_kind(body: &str) -> String {
    attr_after(body, "data-page=\"")
}

/// The value of the form field `name` (a hidden input) in a page.
pub fn hidden(body: &str, name: &str) -> String {
    attr_after(body, &format!("name=\"{name}\" value=\""))
}

/// Opens `/researcher/live` with `cookie`; returns the reader after the response head, and the
/// status line and head.
pub async fn open_live(
    addr: SocketAddr,
    cookie: &str,
) -> (BufReader<tokio::net::TcpStream>, String) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "GET /researcher/live HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).await.expect("read head");
        if n == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    (reader, head)
}

/// The next `figures` event's JSON on a live stream (chunked transfer: chunk sizes are lines
/// that are neither `event:` nor `data:`, so they are skipped).
pub async fn next_figures(reader: &mut BufReader<tokio::net::TcpStream>) -> serde_json::Value {
    use tokio::io::AsyncBufReadExt;
    let read = async {
        let mut event = String::new();
        loop {
            let mut line = String::new();
            let n = reader.read_line(&mut line).await.expect("read event");
            assert!(n > 0, "the live stream closed");
            let line = line.trim_end();
            if let Some(name) = line.strip_prefix("event:") {
                event = name.trim().to_string();
            } else if let Some(data) = line.strip_prefix("data:")
                && event == "figures"
            {
                return serde_json::from_str::<serde_json::Value>(data.trim())
                    .expect("figures are JSON");
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("a figures event within 20 s")
}

/// A GET of `path` with `cookie`: the status, the response head and the raw body bytes (a
/// download may be binary).
pub async fn get_raw(addr: SocketAddr, path: &str, cookie: &str) -> (u16, String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut raw = vec![];
    stream.read_to_end(&mut raw).await.expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head, raw[split + 4..].to_vec())
}
