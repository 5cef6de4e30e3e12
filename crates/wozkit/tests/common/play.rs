//! Scripted participants of a small study over the WebSocket protocol, and the check of what
//! they saw against the store: shared by the crash test (one server, or two instances on
//! PostgreSQL, killed with SIGKILL) and the failover test (three instances behind a reverse
//! proxy, one killed).
//!
//! Each participant enters through its lab link, accepts the consent and instructions pages
//! and keeps sending commands in its room; when a connection drops (an instance killed), or the
//! instance it reached neither runs its room nor can relay it there (`not_in_room`,
//! `unavailable`), it connects again (to the next address it knows) with the last `seq` it saw,
//! until its session ends.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rand::RngExt;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wozkit_core::engine::replay;
use wozkit_core::event::{EndReason, Event, EventKind};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_store::SessionFilter;

/// Wizard commands answered before the wizard says goodbye (ending the session).
pub const WIZARD_TURNS: u32 = 40;

/// Where a participant reaches the server: one or several addresses (instances, or a proxy),
/// tried in turn from `first`, and a routing key sent as the `X-Route` header (a proxy may hash
/// it to keep both participants of a pair on one instance).
#[derive(Clone, Debug)]
pub struct Via {
    pub addrs: Vec<SocketAddr>,
    pub route: String,
    next: Arc<AtomicUsize>,
    /// Milliseconds between two commands, drawn uniformly from this range.
    pace_ms: (u64, u64),
    /// While set, the wizard keeps talking past its turns instead of saying goodbye.
    hold: Option<Arc<AtomicBool>>,
}

impl Via {
    pub fn new(addrs: Vec<SocketAddr>, first: usize, route: &str) -> Via {
        assert!(!addrs.is_empty(), "a participant needs an address");
        Via {
            addrs,
            route: route.to_string(),
            next: Arc::new(AtomicUsize::new(first)),
            pace_ms: (150, 300),
            hold: None,
        }
    }

    /// The same, its wizard saying goodbye only once `hold` is cleared (and its turns are
    /// done): a test that needs every session live at one moment, whatever the machine's speed
    /// (sessions that start late on a busy machine would otherwise meet ended ones).
    pub fn held(mut self, hold: Arc<AtomicBool>) -> Via {
        self.hold = Some(hold);
        self
    }

    /// The same, sending one command every `min`–`max` ms (150–300 by default).
    pub fn paced(mut self, min: u64, max: u64) -> Via {
        self.pace_ms = (min, max.max(min + 1));
        self
    }

    /// The address to try now.
    pub fn addr(&self) -> SocketAddr {
        self.addrs[self.next.load(Ordering::Relaxed) % self.addrs.len()]
    }

    /// The current address failed (unreachable, or not running the room): the next one.
    fn rotate(&self) {
        self.next.fetch_add(1, Ordering::Relaxed);
    }
}

/// A small study: greet, then anything, then goodbye (terminal). The grace period outlasts any
/// downtime of the test, so sessions end by the wizard's goodbye, except after a kill between
/// seating the two participants of a pair: the other one's wait then ends without a partner, and
/// the seated one's session ends when the join deadline (the grace period) runs out, unless the
/// seated one is the wizard and says goodbye before.
pub const STUDY: &str = r#"
id: crash
title: Crash study
roles:
  user: {label: Operator}
  wizard: {label: Assistant}
session:
  time_limit_s: 600
  clock_starts: start
  disconnect_grace_s: 60
pairing:
  wait_limit_s: 30
  on_timeout: complete
world:
  locations: [{id: base, name: Base}, {id: tower, name: Tower}]
  robot_kinds: {ground: {label: Ground robot}}
  robots: [{id: r1, name: Robot 1, kind: ground, start: base, capabilities: [move]}]
subtasks: [{id: go, label: Go, progress: 100}]
states:
  - {id: start, type: interaction, initial: true, transitions: [greet]}
  - {id: greet, type: interaction, templates: ["Hello."], transitions: [bye]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
fixed_options: [{id: ok, text: Okay}]
actions:
  - id: move
    label: Move
    target: true
    moves: true
    requires: move
    duration: {default: 0.4}
    on_complete: {milestone: go}
survey:
  questions:
    - {id: q1, text: How was it?, kind: likert, points: 5}
"#;

/// One HTTP/1.1 request; `None` when the server is not reachable (killed), and then the next
/// request goes to the next address.
async fn http(
    via: &Via,
    method: &str,
    path: &str,
    cookie: &str,
    body: &str,
) -> Option<(u16, String, String)> {
    let addr = via.addr();
    let route = &via.route;
    let reply = request(addr, route, method, path, cookie, body).await;
    if reply.as_ref().is_none_or(|r| r.0 >= 500) {
        via.rotate();
    }
    reply
}

async fn request(
    addr: SocketAddr,
    route: &str,
    method: &str,
    path: &str,
    cookie: &str,
    body: &str,
) -> Option<(u16, String, String)> {
    crate::common::http_request(addr, &[("X-Route", route)], method, path, cookie, body).await
}

/// Joins with a lab link and accepts consent and instructions; returns the cookie. Retries
/// while the server is unreachable.
pub async fn join(via: &Via, query: &str) -> String {
    let cookie = loop {
        if let Some((303, c, _)) = http(via, "GET", &format!("/join?{query}"), "", "").await {
            break c;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut accepted = 0;
    while accepted < 2 {
        let Some((200, _, page)) = http(via, "GET", "/p", &cookie, "").await else {
            continue;
        };
        let step = page
            .split("name=\"step\" value=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_default()
            .to_string();
        if let Some((303, _, _)) =
            http(via, "POST", "/p/next", &cookie, &format!("step={step}")).await
        {
            accepted += 1;
        }
    }
    cookie
}

/// What one scripted participant saw and did.
#[derive(Debug, Default)]
pub struct Transcript {
    pub name: String,
    pub wizard: bool,
    pub session: Option<String>,
    /// Every event received, in order of arrival.
    pub events: Vec<Value>,
    /// Commands answered with `ack`: (id, seq).
    pub acks: Vec<(String, u64)>,
    /// Texts sent, by command id.
    pub texts: HashMap<String, String>,
    /// Error codes received for commands.
    pub errors: Vec<(String, String)>,
    pub ended: Option<String>,
    pub connections: u32,
    /// Connections told `not_in_room` (the instance reached does not run the room).
    pub not_in_room: u32,
    /// Connections told `unavailable` (the instance reached could not relay them to the room's
    /// instance: it is dead, and its lease has not run out yet).
    pub unavailable: u32,
    /// When each connection was served by the room (its first `view`).
    pub entered: Vec<Instant>,
    /// Every connection that was opened, in order.
    pub conns: Vec<Conn>,
    /// Its deadline passed before its session ended.
    pub timed_out: bool,
}

/// One WebSocket connection of a participant, in wall-clock milliseconds (the clock of the
/// servers' `created_at_ms` and of [`Kill`]).
#[derive(Clone, Debug)]
pub struct Conn {
    pub addr: SocketAddr,
    /// Before connecting.
    pub opened_ms: u64,
    /// When the participant saw it end.
    pub closed_ms: u64,
    /// A waiting-room connection that ended with `paired`: the session it was told.
    pub paired: Option<String>,
    /// How it ended: `ended`, `paired`, `dropped`, `not_in_room`, `unavailable` or
    /// `timed_out`.
    pub end: &'static str,
}

/// One SIGKILL of the instance at `addr`: sent after `from_ms`, the process reaped by `to_ms`.
#[derive(Clone, Debug)]
pub struct Kill {
    pub addr: SocketAddr,
    pub from_ms: u64,
    pub to_ms: u64,
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

enum Outcome {
    Ended,
    Dropped,
    /// The waiting room told the session (and closes): the next connection is the room's.
    Paired(String),
    /// The participant's deadline passed.
    TimedOut,
    /// The instance reached does not run the room: try the next address after a pause.
    Elsewhere,
    /// The instance reached cannot relay to the room's instance: again after a pause.
    Unavailable,
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

async fn connect(via: &Via, cookie: &str) -> Option<Ws> {
    let addr = via.addr();
    let mut req = format!("ws://{addr}/ws").into_client_request().ok()?;
    req.headers_mut().insert("cookie", cookie.parse().ok()?);
    req.headers_mut().insert("x-route", via.route.parse().ok()?);
    // As long as a browser would wait: a server busy restarting its rooms on a loaded machine
    // may take seconds to answer, and a client that gives up sooner comes back later and later.
    let (ws, _) = tokio::time::timeout(
        Duration::from_secs(30),
        tokio_tungstenite::connect_async(req),
    )
    .await
    .ok()?
    .ok()?;
    Some(ws)
}

/// Plays one participant until its session has ended.
pub async fn participant(via: Via, cookie: String, name: String, wizard: bool) -> Transcript {
    participant_until(via, cookie, name, wizard, None).await
}

/// [`participant`], giving up at `deadline` (then its transcript says `timed_out`).
pub async fn participant_until(
    via: Via,
    cookie: String,
    name: String,
    wizard: bool,
    deadline: Option<Instant>,
) -> Transcript {
    let mut t = Transcript {
        name,
        wizard,
        ..Transcript::default()
    };
    let mut last_seq = 0u64;
    let mut view = Value::Null;
    let mut turns = 0u32;
    let mut sent = 0u32;
    while t.ended.is_none() {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            t.timed_out = true;
            break;
        }
        let addr = via.addr();
        let opened_ms = now_ms();
        let Some(mut ws) = connect(&via, &cookie).await else {
            via.rotate();
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        t.connections += 1;
        let hello = json!({"type": "hello", "last_seq": last_seq}).to_string();
        if ws.send(Message::Text(hello.into())).await.is_err() {
            continue;
        }
        let outcome = room(
            &mut ws,
            &mut t,
            &mut last_seq,
            &mut view,
            &mut turns,
            &mut sent,
            Limits {
                deadline,
                pace_ms: via.pace_ms,
                hold: via.hold.clone(),
            },
        )
        .await;
        let _ = ws.close(None).await;
        t.conns.push(Conn {
            addr,
            opened_ms,
            closed_ms: now_ms(),
            paired: match &outcome {
                Outcome::Paired(session) => Some(session.clone()),
                _ => None,
            },
            end: match outcome {
                Outcome::Ended => "ended",
                Outcome::Dropped => "dropped",
                Outcome::Paired(_) => "paired",
                Outcome::Elsewhere => "not_in_room",
                Outcome::Unavailable => "unavailable",
                Outcome::TimedOut => "timed_out",
            },
        });
        match outcome {
            Outcome::Ended => break,
            Outcome::TimedOut => {
                t.timed_out = true;
                break;
            }
            Outcome::Dropped | Outcome::Paired(_) => {}
            Outcome::Elsewhere => {
                t.not_in_room += 1;
                // Also what a participant whose session ended is told once its page has moved
                // on (the connection that carried `ended` was cut by a kill): as in a browser,
                // the page then shows the survey, and the room is behind them.
                if let Some((200, _, page)) = http(&via, "GET", "/p", &cookie, "").await
                    && ["survey", "completion"]
                        .iter()
                        .any(|k| page.contains(&format!("data-page=\"{k}\"")))
                {
                    t.ended = Some("not_in_room".into());
                    break;
                }
                via.rotate();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Outcome::Unavailable => {
                t.unavailable += 1;
                via.rotate();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    t
}

/// When a participant gives up (`deadline`), how long it pauses between commands, and whether
/// its wizard is held from saying goodbye (`hold`).
#[derive(Clone)]
struct Limits {
    deadline: Option<Instant>,
    pace_ms: (u64, u64),
    hold: Option<Arc<AtomicBool>>,
}

/// One connection: reads frames, sends a command whenever the previous one was answered and a
/// short pause has passed. Returns when the session ends or the connection drops.
async fn room(
    ws: &mut Ws,
    t: &mut Transcript,
    last_seq: &mut u64,
    view: &mut Value,
    turns: &mut u32,
    sent: &mut u32,
    Limits {
        deadline,
        pace_ms,
        hold,
    }: Limits,
) -> Outcome {
    let mut in_room = false;
    let mut entered = false;
    let mut pending: Option<String> = None;
    let pause = || Duration::from_millis(rand::rng().random_range(pace_ms.0..pace_ms.1));
    let mut next_at = Instant::now() + pause();
    loop {
        let wait = next_at.saturating_duration_since(Instant::now());
        let frame = tokio::select! {
            msg = ws.next() => msg,
            () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now).into()),
                if deadline.is_some() => return Outcome::TimedOut,
            () = tokio::time::sleep(wait), if in_room && pending.is_none() => {
                let held = hold.as_ref().is_some_and(|h| h.load(Ordering::Relaxed));
                let (id, cmd) = next_command(t, view, *turns, *sent, !held);
                *sent += 1;
                if let Some(text) = cmd.get("text").and_then(Value::as_str) {
                    t.texts.insert(id.clone(), text.to_string());
                }
                let frame = json!({"type": "cmd", "id": id, "cmd": cmd}).to_string();
                if ws.send(Message::Text(frame.into())).await.is_err() {
                    return Outcome::Dropped;
                }
                pending = Some(id);
                continue;
            }
        };
        let v: Value = match frame {
            Some(Ok(Message::Text(text))) => match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => panic!(
                    "{}: the server sent something that is not JSON: {e}",
                    t.name
                ),
            },
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return Outcome::Dropped,
            Some(Ok(_)) => continue,
        };
        match v["type"].as_str().unwrap_or_default() {
            "welcome" => {
                in_room = true;
                t.session = v["session"].as_str().map(str::to_string);
            }
            // The waiting room closes after this; the next connection is the room's.
            "paired" => {
                return Outcome::Paired(v["session"].as_str().unwrap_or_default().to_string());
            }
            "event" => {
                let seq = v["event"]["seq"].as_u64().unwrap_or_default();
                assert!(
                    seq > *last_seq,
                    "{}: event {seq} after {last_seq}: delivered twice or out of order",
                    t.name
                );
                *last_seq = seq;
                t.events.push(v["event"].clone());
            }
            "view" => {
                if !entered {
                    // The room serves this connection.
                    entered = true;
                    t.entered.push(Instant::now());
                }
                *view = v["view"].clone();
            }
            "ack" | "error" if v["id"].is_string() => {
                let id = v["id"].as_str().unwrap_or_default().to_string();
                if pending.as_deref() == Some(id.as_str()) {
                    pending = None;
                    *turns += 1;
                    next_at = Instant::now() + pause();
                }
                if v["type"] == "ack" {
                    t.acks.push((id, v["seq"].as_u64().unwrap_or_default()));
                } else {
                    t.errors
                        .push((id, v["code"].as_str().unwrap_or_default().to_string()));
                }
            }
            "error" if v["code"] == "unavailable" => return Outcome::Unavailable,
            "error" => panic!("{}: unexpected error frame {v}", t.name),
            "ended" if v["reason"] == "not_in_room" => return Outcome::Elsewhere,
            "ended" => {
                t.ended = v["reason"].as_str().map(str::to_string);
                return Outcome::Ended;
            }
            _ => {}
        }
    }
}

/// The next intent: the user chats; the wizard greets, chats, answers with a fixed option and
/// moves the robot, and says goodbye after its turns (when it `may_end`).
fn next_command(
    t: &Transcript,
    view: &Value,
    turns: u32,
    sent: u32,
    may_end: bool,
) -> (String, Value) {
    let id = format!("{}-{sent}", t.name);
    let text = json!({"cmd": "text", "text": format!("{} says {sent}", t.name)});
    if !t.wizard {
        return (id, text);
    }
    let state = view["state"].as_str().unwrap_or("start");
    let cmd = if state == "start" {
        json!({"cmd": "say", "state": "greet"})
    } else if turns >= WIZARD_TURNS && may_end {
        json!({"cmd": "say", "state": "bye"})
    } else {
        match turns % 3 {
            0 => json!({"cmd": "fixed", "id": "ok"}),
            1 => {
                let here = view["robots"][0]["location"].as_str().unwrap_or("base");
                let target = if here == "base" { "tower" } else { "base" };
                json!({"cmd": "act", "action": "move", "robot": "r1", "target": target})
            }
            _ => text,
        }
    };
    (id, cmd)
}

/// The parts of an event every role receives unchanged.
fn essence(e: &Value) -> Value {
    json!({
        "seq": e["seq"], "at_ms": e["at_ms"], "actor": e["actor"], "kind": e["kind"],
        "text": e["text"], "role": e["role"],
    })
}

pub fn study() -> LoadedStudy {
    load_text("crash.yaml", STUDY, StudySource::Dir(".".into())).expect("the crash study loads")
}

/// The other participant of a scripted pair: `user7` and `wizard7`.
fn partner_of(name: &str) -> String {
    match name.strip_prefix("user") {
        Some(i) => format!("wizard{i}"),
        None => format!("user{}", name.trim_start_matches("wizard")),
    }
}

/// A session's log, one event a line, and what its participants did: shown when a check of it
/// fails.
fn session_report(
    session: &str,
    events: &[Event],
    created_ms: u64,
    transcripts: &[Transcript],
    names: &[&str],
    kills: &[Kill],
) -> String {
    let mut out = format!("session {session}, created at {created_ms} ms; its log:\n");
    for e in events {
        let line = serde_json::to_string(e).unwrap_or_default();
        out.push_str(&format!("  {line}\n"));
    }
    for t in transcripts
        .iter()
        .filter(|t| names.contains(&t.name.as_str()))
    {
        out.push_str(&format!(
            "{}: entered {:?}, ended {:?}, connections:\n",
            t.name, t.session, t.ended
        ));
        for c in &t.conns {
            out.push_str(&format!("  {c:?}\n"));
        }
    }
    out.push_str(&format!("kills: {kills:?}\n"));
    out
}

/// The kill that explains a session `created_ms` in which only the partner of `absent` was
/// seated: the pairing runs in the waiting-room connection of the participant who takes the
/// partner, and seats the partner first, then itself. So `absent` took its partner on an
/// instance that was killed after creating the session: `absent` had a waiting-room connection
/// open on that instance from before the session was created until the kill, which ended without
/// `paired`.
fn kill_between_seatings<'k>(
    absent: &Transcript,
    created_ms: u64,
    kills: &'k [Kill],
) -> Option<&'k Kill> {
    kills.iter().find(|k| {
        created_ms <= k.to_ms
            && absent.conns.iter().any(|c| {
                c.addr == k.addr
                    && c.end == "dropped"
                    && c.opened_ms <= created_ms
                    && c.opened_ms <= k.from_ms
                    && c.closed_ms >= k.from_ms
            })
    })
}

/// Everything the clients saw against the store at `location` (a data directory or a
/// PostgreSQL URL), with no kill while participants were being paired; `log` is the servers'
/// output, shown when an event is missing.
pub async fn check(location: &str, transcripts: &[Transcript], log: &str) {
    check_killed(location, transcripts, &[], log).await
}

/// [`check`] after the instances were killed at `kills`: a session in which only one of a pair
/// was seated is accepted only where a kill explains it ([`kill_between_seatings`]).
pub async fn check_killed(location: &str, transcripts: &[Transcript], kills: &[Kill], log: &str) {
    let store = wozkit_store::open(location)
        .await
        .expect("the store opens after the run");
    let study = study();
    let sessions = store
        .list_sessions(&SessionFilter::default())
        .await
        .expect("sessions");
    let mut logs: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for s in &sessions {
        let events = store.events(&s.id, 0).await.expect("events");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=events.len() as u64).collect::<Vec<_>>(),
            "session {}: gaps or disorder in the log",
            s.id
        );
        logs.insert(s.id.clone(), events);
    }
    for t in transcripts {
        let name = &t.name;
        if t.ended.as_deref() == Some("no_partner") {
            // Its partner was seated alone in a session by a kill (checked with that session).
            assert!(
                t.session.is_none(),
                "{name}: no partner after entering a room"
            );
            let partner = partner_of(name);
            let entered = transcripts
                .iter()
                .find(|p| p.name == partner)
                .and_then(|p| p.session.clone());
            let lone = entered
                .as_ref()
                .is_some_and(|s| replay(&study, s, &logs[s]).joined.len() == 1);
            assert!(
                lone,
                "{name}: no partner, but {partner} did not play alone (entered {entered:?}); \
                 {name}'s connections: {:#?}\nkills: {kills:?}",
                t.conns
            );
            continue;
        }
        let session = t
            .session
            .as_deref()
            .unwrap_or_else(|| panic!("{name} never entered a room"));
        let events = &logs[session];
        let record = sessions.iter().find(|s| s.id == session).expect("record");
        let end = record
            .ended
            .as_ref()
            .unwrap_or_else(|| panic!("{session} did not end"));
        assert!(t.ended.is_some(), "{name}: no `ended`");
        let live = replay(&study, session, events);
        let partner = partner_of(name);
        let report = || {
            session_report(
                session,
                events,
                record.created_at_ms,
                transcripts,
                &[name.as_str(), partner.as_str()],
                kills,
            )
        };
        let allowed: &[EndReason] = if live.joined.len() == 2 {
            // Both came: the wizard says goodbye.
            &[EndReason::Terminal]
        } else {
            // Only this participant was seated: only a kill between the two seatings does
            // that, and its partner's wait then ended without a partner.
            let absent = transcripts
                .iter()
                .find(|p| p.name == partner)
                .unwrap_or_else(|| panic!("{name}: no transcript of its partner {partner}"));
            assert_eq!(
                absent.ended.as_deref(),
                Some("no_partner"),
                "{session}: {name} played alone, but {partner} ended otherwise\n{}",
                report()
            );
            assert!(
                absent
                    .conns
                    .iter()
                    .all(|c| c.paired.as_deref() != Some(session)),
                "{session}: {partner} was told `paired` to it but never came: a lost \
                 connection to the room\n{}",
                report()
            );
            let Some(kill) = kill_between_seatings(absent, record.created_at_ms, kills) else {
                panic!(
                    "{session}: only {name} was seated, and no kill fell between the two \
                     seatings ({partner} was paired without being told)\n{}",
                    report()
                );
            };
            println!(
                "{session}: only {name} seated (created at {} ms); {partner}'s waiting \
                 connection to {} was cut by the kill at {}..{} ms",
                record.created_at_ms, kill.addr, kill.from_ms, kill.to_ms
            );
            if t.wizard {
                // A lone wizard can play to its goodbye before its partner's join deadline
                // (the grace period) ends the session.
                &[EndReason::Terminal, EndReason::Disconnect]
            } else {
                // A lone user cannot end it: the join deadline does.
                &[EndReason::Disconnect]
            }
        };
        assert!(
            allowed.contains(&end.reason),
            "{session}: ended by {:?}, expected one of {allowed:?}\n{}",
            end.reason,
            report()
        );
        assert_eq!(
            live.ended.map(|e| e.0),
            Some(end.reason),
            "{session}: the log's end differs from the record's\n{}",
            report()
        );

        // Same seq, same event.
        let stored: HashMap<u64, Value> = events
            .iter()
            .map(|e| (e.seq, serde_json::to_value(e).expect("event json")))
            .collect();
        for got in &t.events {
            let seq = got["seq"].as_u64().unwrap_or_default();
            let want = stored
                .get(&seq)
                .unwrap_or_else(|| panic!("{name} saw event {seq}, which is not stored\n{log}"));
            assert_eq!(essence(got), essence(want), "{name}: event {seq} differs");
        }
        // Every acknowledged command is stored; its text exactly once, by its sender.
        let texts: Vec<(u64, &str, &Value)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Message { text, .. } => Some((e.seq, text.as_str(), &stored[&e.seq])),
                _ => None,
            })
            .collect();
        for (id, seq) in &t.acks {
            assert!(
                *seq <= events.len() as u64,
                "{name}: command {id} acknowledged at {seq}, the log ends at {}",
                events.len()
            );
            if let Some(text) = t.texts.get(id) {
                let found: Vec<u64> = texts
                    .iter()
                    .filter(|(_, t, _)| t == text)
                    .map(|(s, _, _)| *s)
                    .collect();
                assert!(
                    found.len() == 1 && found[0] <= *seq,
                    "{name}: acknowledged text {text:?} (ack {seq}) stored at {found:?}"
                );
            }
        }
        // Texts sent but never answered (cut off by a kill) are stored at most once.
        for text in t.texts.values() {
            let n = texts.iter().filter(|(_, t, _)| t == text).count();
            assert!(n <= 1, "{name}: {text:?} stored {n} times");
        }
        for (id, code) in &t.errors {
            assert!(
                ["not_offered", "refused", "ended"].contains(&code.as_str()),
                "{name}: command {id} got `{code}`"
            );
        }
        // A client that saw the end in its room saw every event of the session up to the end
        // (the wizard sees all of them).
        if t.wizard && t.ended.as_deref() == Some("terminal") {
            let end_seq = events
                .iter()
                .find(|e| matches!(e.kind, EventKind::SessionEnded { .. }))
                .map_or(0, |e| e.seq);
            let seen: Vec<u64> = t.events.iter().filter_map(|e| e["seq"].as_u64()).collect();
            assert_eq!(
                seen,
                (1..=end_seq).collect::<Vec<_>>(),
                "{name}: missed events"
            );
        }
    }
    // A session nobody entered was created by a pairing cut short by a kill: it was aborted;
    // or it is the session that recorded a wait without a partner, of a participant told so.
    for s in &sessions {
        if !transcripts
            .iter()
            .any(|t| t.session.as_deref() == Some(s.id.as_str()))
        {
            let reason = s.ended.as_ref().map(|e| e.reason);
            if reason == Some(EndReason::NoPartner) {
                let seated = store
                    .participants_in_session(&s.id)
                    .await
                    .expect("participants of a session");
                let told = seated.iter().any(|p| {
                    transcripts.iter().any(|t| {
                        t.ended.as_deref() == Some("no_partner")
                            && p.external_ids.values().any(|v| *v == t.name)
                    })
                });
                assert!(
                    told,
                    "no-partner session {} of participants never told so: {:?}",
                    s.id,
                    seated.iter().map(|p| &p.external_ids).collect::<Vec<_>>()
                );
                continue;
            }
            if reason != Some(EndReason::Aborted) {
                let seated = store
                    .participants_in_session(&s.id)
                    .await
                    .expect("participants of a session");
                let names: Vec<_> = seated.iter().map(|p| &p.external_ids).collect();
                let theirs: Vec<_> = transcripts
                    .iter()
                    .filter(|t| {
                        seated
                            .iter()
                            .any(|p| p.external_ids.values().any(|v| *v == t.name))
                    })
                    .map(|t| (&t.name, &t.session, &t.ended, t.conns.len()))
                    .collect();
                panic!(
                    "orphan session {} ended {reason:?}, not aborted; seated {names:?}; their \
                     transcripts {theirs:?}; its log {:?}",
                    s.id,
                    logs.get(&s.id)
                );
            }
        }
    }
    // Nothing was invented: every stored text was sent by a participant of that session.
    for (session, events) in &logs {
        for e in events {
            if let EventKind::Message { text, .. } = &e.kind {
                let known = text == "Hello." || text == "Goodbye." || text == "Okay";
                let sent = transcripts
                    .iter()
                    .filter(|t| t.session.as_deref() == Some(session.as_str()))
                    .any(|t| t.texts.values().any(|s| s == text));
                assert!(known || sent, "{session}: stored text {text:?} nobody sent");
            }
        }
    }
    // How long `paired` took to reach each waiting participant after its session was created
    // (a figure, not a check: a notice lost without a kill shows as a wait as long as the
    // lobby's fallback, the stale cut-off; one cut by a kill is told on reconnecting).
    let created: HashMap<&str, u64> = sessions
        .iter()
        .map(|s| (s.id.as_str(), s.created_at_ms))
        .collect();
    let mut told: Vec<(u64, &str, &str)> = transcripts
        .iter()
        .flat_map(|t| t.conns.iter().map(move |c| (t, c)))
        .filter_map(|(t, c)| {
            let s = c.paired.as_deref()?;
            Some((c.closed_ms.saturating_sub(created[s]), t.name.as_str(), s))
        })
        .collect();
    told.sort();
    let split = transcripts
        .iter()
        .filter(|t| t.ended.as_deref() == Some("no_partner"))
        .count();
    println!(
        "pairing: {} `paired` frames, the slowest {:?} ms after the session's creation; {split} \
         pairs split by a kill between their seatings",
        told.len(),
        told.iter().rev().take(3).collect::<Vec<_>>()
    );
    store.close().await;
}
