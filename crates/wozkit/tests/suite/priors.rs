//! `wozkit priors learn` end to end on a store made by a real `wozkit serve` run: scripted pairs
//! play a small study over the WebSocket protocol (the wizards' choices known in advance, one
//! pair a test pair), the priors are learned from the data directory, checked against the formula
//! computed here from the known counts, loaded back (validate, simulate --compare-priors), and
//! served: the hint a wizard gets in a new session names the state the learned priors favour,
//! where the hand priors favoured the other.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use common::{Server, free_port, wozkit};

/// From `start` the hand priors favour `left` 9 to 1; the scripted wizards go `right`.
const STUDY: &str = r#"
id: priors-e2e
title: Priors study
roles:
  user: {label: Operator}
  wizard: {label: Assistant}
session:
  time_limit_s: 600
  disconnect_grace_s: 30
pairing:
  wait_limit_s: 30
  on_timeout: complete
states:
  - {id: start, type: interaction, initial: true, transitions: [{to: left, prior: 9}, {to: right, prior: 1}]}
  - {id: left, type: interaction, templates: ["Left."], transitions: [bye]}
  - {id: right, type: interaction, templates: ["Right."], transitions: [bye, left]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
fixed_options: [{id: ok, text: Okay}]
"#;

/// One HTTP/1.1 request; `None` when the server is not reachable.
async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    cookie: &str,
    body: &str,
) -> Option<(u16, String, String)> {
    common::http_request(addr, &[], method, path, cookie, body).await
}

/// Joins with a lab link and accepts consent and instructions; returns the cookie.
async fn join(addr: SocketAddr, query: &str) -> String {
    let (status, cookie, body) = http(addr, "GET", &format!("/join?{query}"), "", "")
        .await
        .expect("the server answers /join");
    assert_eq!(status, 303, "/join?{query}: {body}");
    for _ in 0..2 {
        let (status, _, page) = http(addr, "GET", "/p", &cookie, "").await.expect("/p");
        assert_eq!(status, 200, "{page}");
        let step = page
            .split("name=\"step\" value=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_default()
            .to_string();
        let (status, _, page) = http(addr, "POST", "/p/next", &cookie, &format!("step={step}"))
            .await
            .expect("/p/next");
        assert_eq!(status, 303, "{page}");
    }
    cookie
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

async fn connect(addr: SocketAddr, cookie: &str) -> Ws {
    let mut req = format!("ws://{addr}/ws")
        .into_client_request()
        .expect("request");
    req.headers_mut()
        .insert("cookie", cookie.parse().expect("cookie header"));
    let (ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("websocket");
    ws
}

/// Plays one participant: in the room, sends `script` one command at a time (each after the
/// previous was answered), then reads until the session ends or `stop_after` events of the
/// script's last command arrived. Returns every event received.
async fn participant(addr: SocketAddr, cookie: String, script: Vec<Value>) -> Vec<Value> {
    let mut events = vec![];
    let mut script = script.into_iter();
    let total = script.len();
    let mut answered = 0;
    loop {
        let mut ws = connect(addr, &cookie).await;
        let hello = json!({"type": "hello", "last_seq": 0}).to_string();
        ws.send(Message::Text(hello.into())).await.expect("hello");
        let mut n = 0;
        let mut in_room = false;
        let mut done = false;
        loop {
            // Once the script is answered, read what follows until the room falls quiet.
            let next = if done {
                match tokio::time::timeout(Duration::from_millis(500), ws.next()).await {
                    Ok(m) => m,
                    Err(_) => return events,
                }
            } else {
                ws.next().await
            };
            let Some(Ok(msg)) = next else {
                panic!("the connection dropped; events so far: {events:?}")
            };
            let Message::Text(text) = msg else { continue };
            let v: Value = serde_json::from_str(&text).expect("JSON frame");
            match v["type"].as_str().unwrap_or_default() {
                "paired" => break,
                "welcome" => in_room = true,
                "event" => events.push(v["event"].clone()),
                "ack" => answered += 1,
                "error" if v["id"].is_string() => panic!("command refused: {v}"),
                "ended" => return events,
                _ => {}
            }
            // Once in the room and the previous command answered, the next one.
            if in_room && answered == n && !done {
                if let Some(cmd) = script.next() {
                    n += 1;
                    let frame = json!({"type": "cmd", "id": format!("c{n}"), "cmd": cmd});
                    ws.send(Message::Text(frame.to_string().into()))
                        .await
                        .expect("send");
                } else if total > 0 {
                    done = true;
                }
            }
        }
        // Paired: the room is on the next connection.
        answered = 0;
    }
}

/// One pair playing `wizard_script` (the user only listens); returns the wizard's events.
async fn pair(addr: SocketAddr, name: &str, test: bool, wizard_script: Vec<Value>) -> Vec<Value> {
    let t = if test { "&test=1" } else { "" };
    let user = join(
        addr,
        &format!("participant={name}u&role=user&pair={name}{t}"),
    )
    .await;
    let wizard = join(
        addr,
        &format!("participant={name}w&role=wizard&pair={name}{t}"),
    )
    .await;
    let u = tokio::spawn(participant(addr, user, vec![]));
    let w = tokio::spawn(participant(addr, wizard, wizard_script));
    let events = tokio::time::timeout(Duration::from_secs(60), w)
        .await
        .expect("the wizard's script finishes in time")
        .expect("wizard task");
    // A session that ended tells the user too.
    if events.iter().any(|e| e["kind"] == "session_ended") {
        tokio::time::timeout(Duration::from_secs(30), u)
            .await
            .expect("the user sees the end")
            .expect("user task");
    } else {
        u.abort();
    }
    events
}

fn say(state: &str) -> Value {
    json!({"cmd": "say", "state": state})
}

fn server(study: &Path, data: &Path, log: &Path) -> Server {
    Server::new(study, data, log)
}

/// The priors of `state` in an overlay file, as the YAML says (parsed here as plain text).
fn overlay_priors(text: &str, state: &str) -> Vec<(String, f64)> {
    let mut out = vec![];
    let mut inside = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if indent == 2 {
            inside = t == format!("\"{state}\":");
        } else if indent == 4 && inside {
            let (k, v) = t.split_once(':').expect("target: prior");
            out.push((
                k.trim_matches('"').to_string(),
                v.trim().parse().expect("a number"),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learned_priors_from_a_served_study_change_the_served_hint() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let study_file = tmp.path().join("priors.yaml");
    std::fs::write(&study_file, STUDY).expect("study file");
    let data = tmp.path().join("data");
    let study_s = study_file.display().to_string();
    let data_s = data.display().to_string();

    // Collection: three pairs go start → right → bye; a test pair goes start → left → bye.
    let mut s1 = server(&study_file, &data, &tmp.path().join("s1.log"));
    s1.start();
    let addr = s1.addr;
    for i in 0..3 {
        let events = pair(
            addr,
            &format!("p{i}"),
            false,
            vec![say("right"), say("bye")],
        )
        .await;
        assert!(
            events.iter().any(|e| e["kind"] == "session_ended"),
            "pair {i} ended: {events:?}"
        );
    }
    pair(addr, "t0", true, vec![say("left"), say("bye")]).await;
    assert!(s1.stop(), "the server stops:\n{}", s1.log_text());

    // Learn with smoothing 1: counts from start are left 0, right 3 (the test pair left out).
    let out1 = tmp.path().join("learned.yaml");
    let out1_s = out1.display().to_string();
    let (code, _, err) = wozkit(&[
        "priors", "learn", &study_s, "--data", &data_s, "--out", &out1_s,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("3 session(s) counted"), "{err}");
    assert!(err.contains("1 test session(s) left out"), "{err}");
    assert!(err.contains("no data (priors kept): left"), "{err}");
    let text = std::fs::read_to_string(&out1).expect("overlay written");
    let (alpha, hand_sum, k) = (1.0, 9.0 + 1.0, 2.0);
    let expect = |c: f64, n: f64| (c + alpha) / (n + alpha * k) * hand_sum;
    let start = overlay_priors(&text, "start");
    assert_eq!(start.len(), 2, "{text}");
    assert_eq!(start[0].0, "left");
    assert!((start[0].1 - expect(0.0, 3.0)).abs() < 1e-9, "{text}");
    assert!((start[1].1 - expect(3.0, 3.0)).abs() < 1e-9, "{text}");
    // From `right`: bye 3 times, left never; hand priors 1 + 1.
    let right = overlay_priors(&text, "right");
    assert!(
        (right[0].1 - (3.0 + 1.0) / (3.0 + 2.0) * 2.0).abs() < 1e-9,
        "{text}"
    );
    assert!(
        (right[1].1 - (0.0 + 1.0) / (3.0 + 2.0) * 2.0).abs() < 1e-9,
        "{text}"
    );
    assert!(overlay_priors(&text, "left").is_empty(), "{text}");

    // The same from a log export (native format) instead of the store.
    let log_file = tmp.path().join("sessions.jsonl");
    let log_s = log_file.display().to_string();
    let (code, _, err) = wozkit(&[
        "export",
        "--format",
        "log",
        "--data",
        &data_s,
        "--out",
        &log_s,
        "--include-test",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, from_log, err) = wozkit(&["priors", "learn", &study_s, "--log", &log_s]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("1 test session(s) left out"), "{err}");
    assert_eq!(
        from_log, text,
        "the log export gives the priors the store gives"
    );

    // With the test pair: left 1, right 3.
    let (code, yaml, err) = wozkit(&[
        "priors",
        "learn",
        &study_s,
        "--data",
        &data_s,
        "--include-test",
    ]);
    assert_eq!(code, 0, "{err}");
    let start = overlay_priors(&yaml, "start");
    assert!(
        (start[0].1 - (1.0 + 1.0) / (4.0 + 2.0) * 10.0).abs() < 1e-9,
        "{yaml}"
    );
    assert!(
        (start[1].1 - (3.0 + 1.0) / (4.0 + 2.0) * 10.0).abs() < 1e-9,
        "{yaml}"
    );

    // The overlay loads with the study; a broken one is refused with file, line and id.
    let (code, out, err) = wozkit(&["validate", &study_s, "--priors", &out1_s]);
    assert_eq!(code, 0, "{out}{err}");
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(&bad, "study: priors-e2e\npriors:\n  start:\n    bye: 1\n")
        .expect("bad overlay");
    let (code, _, err) = wozkit(&["validate", &study_s, "--priors", &bad.display().to_string()]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!(
            "{}:4:5: state `start` has no transition to `bye`",
            bad.display()
        )),
        "{err}"
    );

    // The comparison prints both sets of priors side by side.
    let (code, out, err) = wozkit(&[
        "simulate",
        &study_s,
        "--compare-priors",
        &out1_s,
        "--sessions",
        "50",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let c: Value = serde_json::from_str(&out).expect("comparison JSON");
    assert_eq!(c["runs"][0]["wizard"], "hand");
    assert_eq!(c["runs"][1]["wizard"], "learned");
    let learned_wizard = &c["runs"][1];
    assert!(
        learned_wizard["hint_learned"].as_f64() > learned_wizard["hint_hand"].as_f64(),
        "{out}"
    );

    // Raw frequencies (smoothing 0): `left` gets prior 0, so the served hint must be `right`,
    // which the hand priors give one chance in ten.
    let out0 = tmp.path().join("learned0.yaml");
    let (code, _, err) = wozkit(&[
        "priors",
        "learn",
        &study_s,
        "--data",
        &data_s,
        "--smoothing",
        "0",
        "--out",
        &out0.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let addr = free_port();
    let log = std::fs::File::create(tmp.path().join("s2.log")).expect("log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .args([
            "serve",
            &study_s,
            "--addr",
            &addr.to_string(),
            "--data",
            &data_s,
        ])
        .arg("--priors")
        .arg(&out0)
        .env_remove("WOZKIT_DATA")
        .env_remove("WOZKIT_RESEARCHER_PASSWORD")
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("serve with --priors");
    let t = std::time::Instant::now();
    while !common::healthy(addr) {
        assert!(
            child.try_wait().expect("status").is_none(),
            "serve --priors exited: {}",
            std::fs::read_to_string(tmp.path().join("s2.log")).unwrap_or_default()
        );
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the server does not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut hints = vec![];
    for i in 0..3 {
        let events = pair(addr, &format!("h{i}"), false, vec![json!({"cmd": "hint"})]).await;
        let hint: Vec<&Value> = events
            .iter()
            .filter(|e| e["kind"] == "hint_given")
            .collect();
        assert_eq!(hint.len(), 1, "{events:?}");
        hints.push(hint[0]["state"].as_str().unwrap_or_default().to_string());
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(hints, vec!["right"; 3]);
}
