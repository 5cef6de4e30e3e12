//! Hostile traffic: malformed frames, floods, forged and expired tokens, other sessions' ids,
//! the other role's commands, path traversal, and markup in chat and in study text. Each gets a
//! clear answer, a healthy pair keeps playing next to it the whole time, and the logs hold
//! exactly what legitimate commands produced.
//!
//! Each test also runs against two instances sharing one PostgreSQL database (when
//! `WOZKIT_TEST_PG_URL` is set): the healthy pair plays on one instance while the hostile
//! traffic hits the other, and every check reads the shared store.

use std::path::PathBuf;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wozkit_core::event::{Event, EventKind};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_server::Tunables;
use wozkit_store::testing::TestDatabase;

use crate::helpers::{
    Client, TestApp, Tiny, Ws, enter, fast, login, paired_as, spawn_app_in, spawn_app_in_tuned,
};

/// The servers of a hostile test: the healthy pair plays on `healthy`, the hostile traffic goes
/// to [`Apps::hostile`] — the same server on SQLite, or another instance on the same PostgreSQL
/// database.
pub struct Apps {
    pub healthy: TestApp,
    other: Option<TestApp>,
    db: Option<TestDatabase>,
}

impl Apps {
    /// One server on a SQLite data directory `dir`.
    pub async fn one(dir: PathBuf, study: LoadedStudy) -> Apps {
        Apps {
            healthy: spawn_app_in(dir, study).await,
            other: None,
            db: None,
        }
    }

    /// Two instances (short room leases) on a fresh PostgreSQL database; `None` (skipped with
    /// a note) without a test server, failing when one is required.
    pub async fn two(case: &str, study: LoadedStudy) -> Option<Apps> {
        let db = TestDatabase::create(case).await?;
        let instance = |id: &str| Tunables {
            instance_id: id.to_string(),
            room_lease_ms: 1000,
            sole_instance: false,
            ..fast()
        };
        let url = PathBuf::from(&db.url);
        let healthy = spawn_app_in_tuned(url.clone(), study.clone(), instance("healthy")).await;
        let other = spawn_app_in_tuned(url, study, instance("hostile")).await;
        Some(Apps {
            healthy,
            other: Some(other),
            db: Some(db),
        })
    }

    /// Where the hostile traffic goes.
    pub fn hostile(&self) -> &TestApp {
        self.other.as_ref().unwrap_or(&self.healthy)
    }

    /// Stops the servers (each must stop cleanly) and drops the database.
    pub async fn stop(mut self) {
        self.healthy.stop().await;
        if let Some(mut other) = self.other.take() {
            other.stop().await;
        }
        if let Some(db) = self.db.take() {
            db.drop_database().await;
        }
    }
}

/// Runs a hostile test body on one SQLite server (in `tmp`) and then on two instances sharing
/// a PostgreSQL database.
macro_rules! both {
    ($case:literal, $study:expr, $body:ident, $tmp:expr) => {{
        let tmp = $tmp;
        $body(Apps::one(tmp.path().join("data"), $study(tmp.path())).await).await;
        if let Some(apps) = Apps::two($case, $study(tmp.path())).await {
            $body(apps).await;
        }
    }};
}

fn tiny_study(_: &std::path::Path) -> LoadedStudy {
    Tiny::default().study()
}

/// A pair that keeps talking while hostile traffic hits the server.
pub struct Healthy {
    pub session: String,
    wu: Ws,
    ww: Ws,
    rounds: u32,
    /// The messages so far, as the user saw them.
    said: Vec<String>,
}

impl Healthy {
    pub async fn start(app: &TestApp) -> Healthy {
        let (user, wizard, session) = paired_as(app, "healthy").await;
        let mut ww = enter(&wizard, 0).await;
        let mut wu = enter(&user, 0).await;
        ww.cmd("greet", json!({"cmd": "say", "state": "greet"}))
            .await;
        assert_eq!(ww.answer("greet").await["type"], "ack");
        let greeting = wu.event("message").await["text"].clone();
        Healthy {
            session,
            wu,
            ww,
            rounds: 0,
            said: vec![greeting.as_str().unwrap_or_default().to_string()],
        }
    }

    /// One exchange: the user writes, the wizard sees it and answers with a fixed option, and
    /// the user sees the answer.
    pub async fn round(&mut self) {
        self.rounds += 1;
        let n = self.rounds;
        let text = format!("healthy {n}");
        self.wu
            .cmd(&format!("u{n}"), json!({"cmd": "text", "text": text}))
            .await;
        assert_eq!(self.wu.answer(&format!("u{n}")).await["type"], "ack");
        self.ww
            .until(|v| v["type"] == "event" && v["event"]["text"] == text.as_str())
            .await;
        self.said.push(text);
        self.ww
            .cmd(&format!("w{n}"), json!({"cmd": "fixed", "id": "ok"}))
            .await;
        assert_eq!(self.ww.answer(&format!("w{n}")).await["type"], "ack");
        let answer = self
            .wu
            .until(|v| {
                v["type"] == "event"
                    && v["event"]["kind"] == "message"
                    && v["event"]["role"] == "wizard"
            })
            .await;
        self.said.push(
            answer["event"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }

    /// The healthy log holds exactly the messages its participants exchanged.
    pub async fn check(self, app: &TestApp) {
        assert_eq!(messages(&app.events(&self.session).await), self.said);
    }
}

/// The chat messages of a log, in order.
pub fn messages(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Message { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Sends a frame and returns the next error frame (other frames stay queued). Paced below the
/// rate limit so that the limit does not answer instead.
async fn error_for(ws: &mut Ws, frame: &str) -> Value {
    tokio::time::sleep(Duration::from_millis(110)).await;
    ws.send_text(frame).await;
    ws.until_type("error").await
}

#[tokio::test]
async fn malformed_frames_get_clear_errors_and_change_nothing() {
    let tmp = tempfile::tempdir().expect("temp dir");
    both!(
        "hostile: malformed frames",
        tiny_study,
        malformed_frames,
        tmp
    );
}

async fn malformed_frames(apps: Apps) {
    let app = apps.hostile();
    let mut healthy = Healthy::start(&apps.healthy).await;
    let (user, wizard, session) = paired_as(app, "hostile").await;

    // A connection that never says hello is closed after the hello timeout.
    let quiet = user.clone();
    let silent = tokio::spawn(async move {
        let mut ws = quiet.ws().await;
        let e = ws.until_type("error").await;
        assert_eq!(e["code"], "hello_timeout");
        assert!(
            ws.next().await.is_none(),
            "still open after the hello timeout"
        );
    });

    // Before hello: only ping is answered.
    let mut early = user.ws().await;
    let e = error_for(
        &mut early,
        r#"{"type":"cmd","id":"a","cmd":{"cmd":"text","text":"x"}}"#,
    )
    .await;
    assert_eq!(e["code"], "hello_required");
    early.send(json!({"type": "ping"})).await;
    early.until_type("pong").await;
    early.close().await;

    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    let long_id = "i".repeat(500);
    let deep = format!("{}{}", "[".repeat(8000), "]".repeat(8000));
    let cases: Vec<(String, &str)> = vec![
        ("{oops".into(), "bad_json"),
        ("".into(), "bad_json"),
        ("[1,2]".into(), "bad_json"),
        ("42".into(), "bad_json"),
        ("null".into(), "bad_json"),
        ("{}".into(), "bad_json"),
        (deep, "bad_json"),
        (r#"{"type":5}"#.into(), "bad_json"),
        (r#"{"type":"hello","last_seq":-1}"#.into(), "bad_json"),
        (
            r#"{"type":"hello","last_seq":0}"#.into(),
            "unexpected_hello",
        ),
        (r#"{"type":"dance"}"#.into(), "unknown_type"),
        (
            r#"{"type":"<script>alert(1)</script>"}"#.into(),
            "unknown_type",
        ),
        (
            r#"{"type":"cmd","cmd":{"cmd":"text","text":"no id"}}"#.into(),
            "bad_json",
        ),
        (
            r#"{"type":"cmd","id":7,"cmd":{"cmd":"text","text":"x"}}"#.into(),
            "bad_json",
        ),
        (r#"{"type":"cmd","id":"a"}"#.into(), "bad_command"),
        (
            r#"{"type":"cmd","id":"a","cmd":"text"}"#.into(),
            "bad_command",
        ),
        (
            r#"{"type":"cmd","id":"a","cmd":{"cmd":"say"}}"#.into(),
            "bad_command",
        ),
        (
            r#"{"type":"cmd","id":"a","cmd":{"cmd":"text","text":"x","session":"s"}}"#.into(),
            "bad_command",
        ),
        (
            r#"{"type":"cmd","id":"a","cmd":{"cmd":"text","text":"x","role":"wizard"}}"#.into(),
            "bad_command",
        ),
        (
            format!(r#"{{"type":"cmd","id":"{long_id}","cmd":{{"cmd":"dance"}}}}"#),
            "bad_command",
        ),
        (
            format!(
                r#"{{"type":"cmd","id":"big","cmd":{{"cmd":"text","text":"{}"}}}}"#,
                "x".repeat(20_000)
            ),
            "too_large",
        ),
    ];
    for (i, (frame, code)) in cases.iter().enumerate() {
        let e = error_for(&mut wu, frame).await;
        assert_eq!(e["code"], *code, "frame {i}: {e}");
        assert!(!e["message"].as_str().unwrap_or_default().is_empty());
        if i % 5 == 4 {
            healthy.round().await;
        }
    }
    // Ids are echoed, cut to 64 characters.
    let e = error_for(
        &mut wu,
        &format!(r#"{{"type":"cmd","id":"{long_id}","cmd":{{"cmd":"dance"}}}}"#),
    )
    .await;
    assert_eq!(e["id"].as_str().map(str::len), Some(64));

    // System commands are not participant commands, whoever sends them.
    for cmd in [
        json!({"cmd": "tick"}),
        json!({"cmd": "start", "seed": 1}),
        json!({"cmd": "join", "role": "wizard", "bot": true}),
        json!({"cmd": "abort", "reason": "terminal"}),
        json!({"cmd": "disconnect", "role": "user"}),
        json!({"cmd": "reconnect", "role": "user"}),
    ] {
        for ws in [&mut wu, &mut ww] {
            tokio::time::sleep(Duration::from_millis(110)).await;
            ws.cmd("sys", cmd.clone()).await;
            assert_eq!(ws.answer("sys").await["code"], "bad_command", "{cmd}");
        }
    }
    healthy.round().await;

    // The other role's commands, and commands the engine refuses.
    let refused = [
        (true, json!({"cmd": "say", "state": "greet"}), "wrong_role"),
        (true, json!({"cmd": "fixed", "id": "ok"}), "wrong_role"),
        (
            true,
            json!({"cmd": "act", "action": "move", "robot": "r1", "target": "tower"}),
            "wrong_role",
        ),
        (true, json!({"cmd": "hint"}), "wrong_role"),
        (false, json!({"cmd": "approve"}), "wrong_role"),
        (false, json!({"cmd": "deny"}), "wrong_role"),
        (false, json!({"cmd": "say", "state": "bye"}), "not_offered"),
        (
            false,
            json!({"cmd": "say", "state": "../../etc"}),
            "not_offered",
        ),
        (false, json!({"cmd": "fixed", "id": "nope"}), "refused"),
        (
            false,
            json!({"cmd": "act", "action": "move", "robot": "r9", "target": "tower"}),
            "refused",
        ),
        (false, json!({"cmd": "text", "text": ""}), "refused"),
        (
            false,
            json!({"cmd": "text", "text": "y".repeat(2001)}),
            "refused",
        ),
        (true, json!({"cmd": "finish"}), "refused"),
    ];
    for (as_user, cmd, code) in refused {
        let ws = if as_user { &mut wu } else { &mut ww };
        tokio::time::sleep(Duration::from_millis(110)).await;
        ws.cmd("r", cmd.clone()).await;
        let e = ws.answer("r").await;
        assert_eq!(
            (e["type"].as_str(), e["code"].as_str()),
            (Some("error"), Some(code)),
            "{cmd}: {e}"
        );
    }
    healthy.round().await;

    // A binary frame, then one too large to read at all: the connection is closed (1009).
    let mut raw = raw_ws(&user, "").await;
    raw.send(Message::Text(r#"{"type":"hello","last_seq":0}"#.into()))
        .await
        .expect("hello");
    raw.send(Message::Binary(vec![0u8, 159, 146, 150].into()))
        .await
        .expect("binary");
    let mut codes = vec![];
    while let Ok(Some(Ok(Message::Text(t)))) =
        tokio::time::timeout(Duration::from_secs(5), raw.next()).await
    {
        let v: Value = serde_json::from_str(&t).expect("JSON");
        if v["type"] == "error" {
            codes.push(v["code"].as_str().unwrap_or_default().to_string());
            break;
        }
    }
    assert_eq!(codes, ["bad_json"]);
    let _ = raw.send(Message::Text("x".repeat(70_000).into())).await;
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(5), raw.next()).await {
            Ok(Some(Ok(Message::Close(frame)))) => break frame.map(|f| u16::from(f.code)),
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(_)) | None) => break None,
            Err(_) => panic!("a 70 kB frame did not close the connection"),
        }
    };
    assert!(matches!(closed, Some(1009) | None), "{closed:?}");
    healthy.round().await;

    // Nothing of the above was stored: the hostile session said nothing.
    assert!(messages(&app.events(&session).await).is_empty());
    // The socket that got the errors still works.
    wu.cmd("fine", json!({"cmd": "text", "text": "still here"}))
        .await;
    assert_eq!(wu.answer("fine").await["type"], "ack");
    assert_eq!(messages(&app.events(&session).await), ["still here"]);
    silent.await.expect("the silent connection was closed");
    healthy.check(app).await;
    apps.stop().await;
}

type RawWs =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket of `c` with any query string, for frames the scripted client does not send.
async fn raw_ws(c: &Client, query: &str) -> RawWs {
    let mut req = format!("ws://{}/ws{query}", c.addr)
        .into_client_request()
        .expect("request");
    req.headers_mut()
        .insert("cookie", c.cookie.parse().expect("cookie"));
    tokio_tungstenite::connect_async(req)
        .await
        .expect("handshake")
        .0
}

async fn send_json(ws: &mut RawWs, v: Value) {
    ws.send(Message::Text(v.to_string().into()))
        .await
        .expect("send");
}

/// The next JSON frame, `None` once the connection is closed.
async fn raw_next(ws: &mut RawWs) -> Option<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a frame or the end within 10 s")
        {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).ok(),
            Some(Ok(Message::Close(_)) | Err(_)) | None => return None,
            Some(Ok(_)) => {}
        }
    }
}

async fn raw_until(ws: &mut RawWs, pred: impl Fn(&Value) -> bool) -> Value {
    loop {
        match raw_next(ws).await {
            Some(v) if pred(&v) => return v,
            Some(_) => {}
            None => panic!("connection closed before the expected frame"),
        }
    }
}

#[tokio::test]
async fn floods_are_limited_and_only_what_passed_is_stored() {
    let tmp = tempfile::tempdir().expect("temp dir");
    both!("hostile: floods", tiny_study, floods, tmp);
}

async fn floods(apps: Apps) {
    let app = apps.hostile();
    let mut healthy = Healthy::start(&apps.healthy).await;
    let (user, _, session) = paired_as(app, "flood").await;
    let mut wu = enter(&user, 0).await;
    for i in 0..100 {
        wu.cmd(
            &format!("f{i}"),
            json!({"cmd": "text", "text": format!("flood {i}")}),
        )
        .await;
    }
    let (mut acked, mut limited) = (vec![], 0);
    while acked.len() + limited < 100 {
        match wu.next().await {
            Some(v) if v["type"] == "ack" => acked.push(v["id"].as_str().unwrap_or("").to_string()),
            Some(v) if v["code"] == "rate_limited" => limited += 1,
            Some(_) => {}
            None => panic!("the flood closed the connection"),
        }
    }
    assert!(limited >= 50, "{limited} limited, {} passed", acked.len());
    healthy.round().await;
    // Exactly the acknowledged texts are stored, once each, in order.
    let stored = messages(&app.events(&session).await);
    let want: Vec<String> = acked
        .iter()
        .map(|id| format!("flood {}", &id[1..]))
        .collect();
    assert_eq!(stored, want);
    // Many connections at once do not starve the healthy pair either.
    let mut socks = vec![];
    for _ in 0..30 {
        let mut ws = user.ws().await;
        ws.hello(0).await;
        socks.push(ws);
    }
    healthy.round().await;
    for ws in socks {
        ws.close().await;
    }
    healthy.round().await;
    healthy.check(app).await;
    apps.stop().await;
}

#[tokio::test]
async fn forged_expired_and_foreign_credentials_act_nowhere() {
    let tmp = tempfile::tempdir().expect("temp dir");
    both!("hostile: credentials", tiny_study, credentials, tmp);
}

async fn credentials(apps: Apps) {
    let app = apps.hostile();
    let mut healthy = Healthy::start(&apps.healthy).await;
    let (user, wizard, session) = paired_as(app, "mine").await;
    let (other_user, _, other) = paired_as(app, "theirs").await;

    // Forged cookies: a random token, a huge one, another seat's name for a real token.
    let token = user.cookie.split_once('=').map_or("", |c| c.1).to_string();
    let forged = [
        format!("wozkit_token={}", "ab".repeat(32)),
        format!("wozkit_token={}", "a".repeat(4000)),
        format!("wozkit_token_x={token}"),
        "wozkit_token=".to_string(),
        format!("wozkit_token=\"{token}\""),
    ];
    for cookie in &forged {
        let fake = Client {
            addr: app.addr,
            cookie: cookie.clone(),
            seat: None,
        };
        assert_eq!(fake.page().await.status, 401, "{cookie}");
        assert_eq!(fake.post("/p/next", "step=0:consent").await.status, 401);
        assert!(
            fake.ws_with(&[]).await.is_err(),
            "{cookie}: WebSocket accepted"
        );
    }
    // A real cookie under a seat it was not issued for.
    let seated = Client {
        seat: Some("x".into()),
        ..user.clone()
    };
    assert_eq!(seated.page().await.status, 401);
    assert!(seated.ws_with(&[]).await.is_err());
    healthy.round().await;

    // Another session's ids in the query string and in frames change nothing: the cookie says
    // which session and role.
    let other_p = app
        .store
        .participants_in_session(&other)
        .await
        .expect("participants");
    let theirs = other_p.first().map(|p| p.id.clone()).unwrap_or_default();
    let q = format!("?session={other}&participant={theirs}&role=user");
    let res = app
        .http("GET", &format!("/p{q}"), &[("Cookie", &wizard.cookie)], "")
        .await;
    assert_eq!(res.status, 200);
    assert!(res.body.contains("data-role=\"wizard\""), "{}", res.body);
    let mut ws = raw_ws(&wizard, &q).await;
    send_json(
        &mut ws,
        json!({"type": "hello", "last_seq": 0, "session": other}),
    )
    .await;
    let welcome = raw_until(&mut ws, |v| v["type"] == "welcome").await;
    assert_eq!(welcome["session"], session.as_str());
    assert_eq!(welcome["role"], "wizard");
    let before = app.events(&other).await.len();
    send_json(
        &mut ws,
        json!({"type": "cmd", "id": "s1", "session": other, "participant": theirs,
            "role": "user", "cmd": {"cmd": "say", "state": "greet"}}),
    )
    .await;
    assert_eq!(raw_until(&mut ws, |v| v["id"] == "s1").await["type"], "ack");
    assert_eq!(
        app.events(&other).await.len(),
        before,
        "the other session changed"
    );
    assert_eq!(messages(&app.events(&session).await).len(), 1);
    // The other session's researcher page is not for participants.
    let res = app
        .http(
            "GET",
            &format!("/researcher/session/{other}"),
            &[("Cookie", &other_user.cookie)],
            "",
        )
        .await;
    assert_eq!(res.status, 303);
    healthy.round().await;

    // A participant whose session has ended: its cookie opens no room and commands nothing.
    send_json(
        &mut ws,
        json!({"type": "cmd", "id": "bye", "cmd": {"cmd": "say", "state": "bye"}}),
    )
    .await;
    assert_eq!(
        raw_until(&mut ws, |v| v["id"] == "bye").await["type"],
        "ack"
    );
    let at_end = raw_until(&mut ws, |v| v["type"] == "ended").await;
    let log_len = app.events(&session).await.len();
    for c in [&user, &wizard] {
        let mut late = raw_ws(c, "").await;
        send_json(&mut late, json!({"type": "hello", "last_seq": 0})).await;
        let ended = raw_until(&mut late, |v| v["type"] == "ended").await;
        // Told what the room told everyone at the end, so the page moves on the same way.
        assert_ne!(ended["reason"], "not_in_room");
        assert_eq!(ended["reason"], at_end["reason"]);
        assert_eq!(ended["next"], at_end["next"]);
        // The server closes the connection after `ended`: a command gets no answer.
        let _ = late
            .send(Message::Text(
                r#"{"type":"cmd","id":"z","cmd":{"cmd":"text","text":"after"}}"#.into(),
            ))
            .await;
        let answered = raw_next(&mut late).await;
        assert!(
            answered.is_none(),
            "a late command was answered: {answered:?}"
        );
    }
    // A participant who has no session (still on the first page) is told there is no room.
    let newcomer = app.join("").await;
    let mut early = raw_ws(&newcomer, "").await;
    send_json(&mut early, json!({"type": "hello", "last_seq": 0})).await;
    let ended = raw_until(&mut early, |v| v["type"] == "ended").await;
    assert_eq!(ended["reason"], "not_in_room");
    healthy.round().await;
    let events = app.events(&session).await;
    assert!(
        events.len() == log_len
            || events[log_len..].iter().all(|e| matches!(
                e.kind,
                EventKind::CompletionIssued { .. } | EventKind::SurveyAnswered { .. }
            )),
        "{:#?}",
        &events[log_len..]
    );
    assert!(!messages(&events).iter().any(|m| m == "after"));
    healthy.check(app).await;
    apps.stop().await;
}

/// A study with markup in every text a participant or researcher sees.
fn marked_up_study(dir: &std::path::Path) -> wozkit_core::load::LoadedStudy {
    let x = "<script>alert(1)</script>";
    let yaml = Tiny::default()
        .yaml()
        .replace("title: Tiny study", &format!("title: \"Tiny {x}\""))
        .replace(
            "user: {label: Operator}",
            &format!("user: {{label: \"Op <b>x</b>\", instructions: \"Read {x} this\"}}"),
        )
        .replace(
            "name: Fred}",
            "name: \"Fred <img src=x onerror=alert(2)>\"}",
        )
        .replace(
            "\"Hello, I am {wizard.name}.\"",
            &format!("\"Hello {x}, I am {{wizard.name}}.\""),
        )
        .replace("text: Okay", &format!("text: \"Okay {x}\""))
        .replace("text: How was it?", &format!("text: \"How was {x}?\""))
        .replace("label: Go,", &format!("label: \"Go {x}\","))
        .replace("name: Tower}", &format!("name: \"Tower {x}\"}}"))
        .replace(
            "actions:",
            "media:\n  pic: {file: media/pic.gif, alt: \"<script>alert(3)</script>\"}\nactions:",
        );
    std::fs::create_dir_all(dir.join("media")).expect("media dir");
    std::fs::write(dir.join("media/pic.gif"), b"GIF89a").expect("media file");
    std::fs::write(dir.join("secret.txt"), b"TOP SECRET").expect("secret");
    match load_text("tiny.yaml", &yaml, StudySource::Dir(dir.to_path_buf())) {
        Ok(s) => s,
        Err(e) => panic!("the marked-up study does not load:\n{e}\n{yaml}"),
    }
}

/// No markup from study or participant text reaches a page as markup.
fn assert_inert(what: &str, body: &str) {
    for raw in [
        "<script>alert",
        "<img src=x",
        "<b>x</b>",
        "onerror=alert(2)>",
    ] {
        assert!(
            !body.contains(raw),
            "{what} contains {raw:?} unescaped:\n{body}"
        );
    }
}

#[tokio::test]
async fn markup_and_paths_stay_text() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let study = |dir: &std::path::Path| marked_up_study(&dir.join("study"));
    both!("hostile: markup and paths", study, markup_and_paths, tmp);
}

async fn markup_and_paths(apps: Apps) {
    let app = apps.hostile();
    let mut healthy = Healthy::start(&apps.healthy).await;
    let researcher = login(app).await;

    // Every page of the flow, for both roles.
    let user = app.join("participant=m-u&role=user&pair=m").await;
    let wizard = app.join("participant=m-w&role=wizard&pair=m").await;
    assert_inert("landing", &app.http("GET", "/", &[], "").await.body);
    for c in [&user, &wizard] {
        for _ in 0..2 {
            let page = c.page().await;
            assert_inert("consent/instructions", &page.body);
            let step = c.step().await;
            c.post("/p/next", &format!("step={step}")).await;
        }
    }
    let page = user.page().await.body;
    assert_inert("waiting", &page);
    let mut pu = user.ws().await;
    pu.hello(0).await;
    let mut pw = wizard.ws().await;
    pw.hello(0).await;
    pu.until_type("paired").await;
    let session = pw.until_type("paired").await["session"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for c in [&user, &wizard] {
        let page = c.page().await.body;
        assert!(page.contains("data-page=\"room\""), "{page}");
        assert!(
            page.contains("Tiny &lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
        assert_inert("room", &page);
    }
    // Chat markup is stored as it was typed and shown escaped to the researcher.
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("g", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("g").await;
    let payload = "<script>alert('chat')</script><img src=x onerror=alert(2)>";
    wu.cmd("p", json!({"cmd": "text", "text": payload})).await;
    assert_eq!(wu.answer("p").await["type"], "ack");
    let got = ww
        .until(|v| v["type"] == "event" && v["event"]["text"] == payload)
        .await;
    assert_eq!(got["event"]["role"], "user");
    assert!(messages(&app.events(&session).await).contains(&payload.to_string()));
    healthy.round().await;
    let cookie = [("Cookie", researcher.as_str())];
    let view = app
        .http(
            "GET",
            &format!("/researcher/session/{session}"),
            &cookie,
            "",
        )
        .await;
    assert_eq!(view.status, 200);
    assert!(
        view.body
            .contains("&lt;script&gt;alert(&#39;chat&#39;)&lt;/script&gt;")
    );
    assert_inert("researcher live view", &view.body);
    for path in [
        "/researcher",
        "/try",
        "/researcher/login?next=/%3Cscript%3Ealert(1)%3C/script%3E",
        "/researcher/login?next=javascript:alert(1)",
    ] {
        let res = app.http("GET", path, &cookie, "").await;
        assert_eq!(res.status, 200, "{path}");
        assert_inert(path, &res.body);
        assert!(!res.body.contains("javascript:"), "{path}");
    }
    // The scripts insert text with textContent only.
    for asset in ["room.js", "waiting.js", "refresh.js"] {
        let js = app.http("GET", &format!("/assets/{asset}"), &[], "").await;
        assert_eq!(js.status, 200);
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!js.body.contains(sink), "{asset} uses {sink}");
        }
    }
    // Finish and answer the survey: its page and the completion page are escaped too.
    ww.cmd("b", json!({"cmd": "say", "state": "bye"})).await;
    ww.answer("b").await;
    wu.until_type("ended").await;
    let survey = user.page().await.body;
    assert!(survey.contains("data-page=\"survey\""), "{survey}");
    assert_inert("survey", &survey);
    let step = user.step().await;
    let res = user
        .post("/p/survey", &format!("step={step}&q1=<script>"))
        .await;
    assert_eq!(res.status, 422);
    assert_inert("survey problems", &res.body);
    healthy.round().await;

    // Media: the declared file, and nothing else under any spelling.
    let pic = app.http("GET", "/study/tiny/media/pic.gif", &[], "").await;
    assert_eq!(pic.status, 200);
    for path in [
        "/study/tiny/../../etc/passwd",
        "/study/tiny/media/../secret.txt",
        "/study/tiny/secret.txt",
        "/study/tiny/%2e%2e/%2e%2e/etc/passwd",
        "/study/tiny/..%2f..%2fetc%2fpasswd",
        "/study/tiny/media%2f..%2fsecret.txt",
        "/study/tiny/%2fetc%2fpasswd",
        "/study/tiny//etc/passwd",
        "/study/tiny/media/..%5csecret.txt",
        "/study/tiny/media/pic.gif%00.txt",
        "/study/..%2ftiny/media/pic.gif",
        "/study/%2e%2e/etc/passwd",
        "/assets/..%2fCargo.toml",
        "/assets/..%2f..%2fCargo.toml",
        "/assets/%2e%2e%2fsrc%2flib.rs",
        "/assets/..%5c..%5cCargo.toml",
        "/assets/%2fetc%2fpasswd",
    ] {
        let res = app.http("GET", path, &[], "").await;
        assert!(
            matches!(res.status, 400 | 404),
            "{path}: {} {}",
            res.status,
            res.body
        );
        for leak in ["TOP SECRET", "root:", "[package]", "forbid(unsafe_code)"] {
            assert!(!res.body.contains(leak), "{path} leaked {leak}");
        }
    }
    healthy.round().await;
    healthy.check(app).await;
    apps.stop().await;
}
