//! A participant may reach any instance: a room socket arriving at an instance that does not
//! run the room is relayed to the instance that does (`ws/relay.rs`, docs/scale-out.md
//! "Reaching the room's instance").
//!
//! Two instances share one store (one PostgreSQL database with a connection pool each when
//! `WOZKIT_TEST_PG_URL` is set; one SQLite store shared by both in this process otherwise). A
//! room paired on A: the wizard connecting to B receives the same frames as on A, its commands
//! are applied once, an observer on B sees the room, the internal route refuses a wrong or
//! missing secret; when A is killed (its task aborted: nothing ended, no lease given back) the
//! relayed socket closes, and after the lease runs out the participants reconnecting to B
//! finish the session with no acknowledged event lost.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use wozkit_core::engine::replay;
use wozkit_core::event::{Event, EventKind};
use wozkit_store::Store;
use wozkit_store::testing::TestDatabase;

use crate::client::{Client, Ws};
use crate::cluster::{
    METRICS_TOKEN, Pair, assert_log_goes_on, at, instance, on_one_postgres_database,
    on_one_sqlite_store, owner, pair_on, reconnect_at, stop, wait_owner,
};
use crate::helpers::{Tiny, enter, join_at};
use crate::reconnect::last_seq;

const SECRET: &str = "relay-test-secret";

/// The frames a fresh room connection receives up to its first view (welcome and the events
/// after `hello 0`), with `hello 0`.
async fn opening_frames(c: &Client) -> Vec<Value> {
    let mut ws = c.ws().await;
    ws.hello(0).await;
    let mut frames = vec![];
    loop {
        let f = ws.next().await.expect("a frame before the first view");
        if f["type"] == "view" {
            break;
        }
        frames.push(f);
    }
    ws.close().await;
    frames
}

/// Status of a handshake on `/internal/relay` at `addr` with these headers (101 when it opens).
async fn internal_status(addr: std::net::SocketAddr, headers: &[(&'static str, &str)]) -> u16 {
    let mut req = format!("ws://{addr}/internal/relay")
        .into_client_request()
        .expect("request");
    for (k, v) in headers {
        req.headers_mut()
            .insert(*k, v.parse().expect("header value"));
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok(_) => 101,
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => res.status().as_u16(),
        Err(e) => panic!("handshake on /internal/relay failed without an HTTP answer: {e}"),
    }
}

/// Reads until the connection closes (frames in between are kept in `seen`).
async fn until_closed(ws: &mut Ws) {
    for _ in 0..10_000 {
        if ws.next().await.is_none() {
            return;
        }
    }
    panic!("the relayed socket never closed");
}

/// How many times the dialogue entered `state` (each `say` of the wizard enters one).
fn said(events: &[Event], state: &str) -> usize {
    events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::StateEntered { to, .. } if to == state))
        .count()
}

/// The instance's open connections of `kind` (`wozkit_connections_open{kind="KIND"}` on its
/// `/metrics`), or `None` when the series is missing.
async fn connections(addr: std::net::SocketAddr, kind: &str) -> (Option<f64>, String) {
    let auth = format!("Bearer {METRICS_TOKEN}");
    let res = crate::helpers::http(addr, "GET", "/metrics", &[("Authorization", &auth)], "").await;
    assert_eq!(res.status, 200, "{}", res.body);
    let series = format!("wozkit_connections_open{{kind=\"{kind}\"}} ");
    let value = res
        .body
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|v| v.trim().parse().ok());
    (value, res.body)
}

/// Waits until each `(instance, kind, count)` holds (a closed socket's count drops when its
/// task has finished, just after the close).
async fn until_connections(expected: &[(std::net::SocketAddr, &str, f64)]) {
    let mut last = String::new();
    for _ in 0..200 {
        let mut all = true;
        for &(addr, kind, n) in expected {
            let (value, body) = connections(addr, kind).await;
            if value != Some(n) {
                all = false;
                last = format!("{kind} on {addr}: {value:?}, not {n}\n{body}");
                break;
            }
        }
        if all {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the connection counts never reached {expected:?}: {last}");
}

async fn relay_case(a_store: Arc<dyn Store>, b_store: Arc<dyn Store>) {
    let tiny = Tiny::default();
    let a = instance("A", a_store.clone(), &tiny, Some(SECRET)).await;
    let b = instance("B", b_store.clone(), &tiny, Some(SECRET)).await;
    // An instance without a secret (on a store of its own: it only answers the handshake).
    let c_dir = tempfile::tempdir().expect("temp dir");
    let c_store = wozkit_store::open(c_dir.path().to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    let no_secret = instance("C", c_store, &tiny, None).await;

    // The internal route: refused without the secret, with a wrong one, and by an instance
    // that has none; opened with the right one.
    let bearer = format!("Bearer {SECRET}");
    assert_eq!(
        internal_status(b.addr, &[("x-wozkit-participant", "p")]).await,
        403
    );
    let wrong = [
        ("authorization", "Bearer relay-test-secreT"),
        ("x-wozkit-participant", "p"),
    ];
    assert_eq!(internal_status(b.addr, &wrong).await, 403);
    let right_unknown = [
        ("authorization", bearer.as_str()),
        ("x-wozkit-participant", "nobody"),
    ];
    assert_eq!(internal_status(b.addr, &right_unknown).await, 404);
    assert_eq!(internal_status(no_secret.addr, &right_unknown).await, 404);
    stop(no_secret).await;

    // Paired on A: A runs the room.
    let Pair {
        user,
        wizard,
        session,
        waiting: _waiting,
    } = pair_on(a.addr, "alice", "bob").await;
    let mut wu = enter(&user, 0).await;
    let mut wa = enter(&wizard, 0).await;
    wait_owner(b_store.as_ref(), &session, Some("A")).await;
    wa.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(wa.answer("c1").await["type"], "ack");
    wu.event("message").await;
    wa.close().await;

    // The wizard reaches B: the same opening frames as on A (welcome, then every event).
    let on_a = opening_frames(&wizard).await;
    let on_b = opening_frames(&at(&wizard, b.addr)).await;
    assert!(on_a.len() >= 2, "{on_a:#?}");
    assert_eq!(on_a[0]["type"], "welcome");
    // The same frames, then the events logged since: the wizard's own leaving and coming back.
    assert_eq!(
        &on_b[..on_a.len().min(on_b.len())],
        on_a.as_slice(),
        "the relayed socket received other frames"
    );
    let since: Vec<&Value> = on_b[on_a.len()..]
        .iter()
        .map(|f| &f["event"]["kind"])
        .collect();
    assert!(
        since
            .iter()
            .all(|k| *k == "disconnected" || *k == "reconnected"),
        "{since:?}"
    );

    // Commands through B are applied once, by A.
    let mut wb = enter(&at(&wizard, b.addr), last_seq(&wu)).await;
    wb.cmd("c2", json!({"cmd": "say", "state": "ask"})).await;
    assert_eq!(wb.answer("c2").await["type"], "ack");
    wu.event("message").await;
    // B counts the socket it relays (and no room connection); A counts it as a room one.
    until_connections(&[
        (b.addr, "relayed", 1.0),
        (b.addr, "room", 0.0),
        (a.addr, "relayed", 0.0),
        (a.addr, "room", 2.0),
    ])
    .await;
    let events = a_store.events(&session, 0).await.expect("events");
    assert_eq!(said(&events, "greet"), 1, "{events:#?}");
    assert_eq!(said(&events, "ask"), 1, "{events:#?}");
    assert_eq!(
        owner(b_store.as_ref(), &session).await.as_deref(),
        Some("A")
    );
    assert!(
        b_store
            .events(&session, 0)
            .await
            .expect("events")
            .iter()
            .all(|e| e.seq <= events.len() as u64)
    );

    // A researcher observing through B sees the room: both roles' welcome and the events.
    wozkit_server::auth::ensure_password(b_store.as_ref(), Some("letmein"))
        .await
        .expect("password");
    let origin = format!("http://{}", b.addr);
    let res = crate::helpers::http(
        b.addr,
        "POST",
        "/researcher/login",
        &[
            ("Origin", origin.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "name=admin&password=letmein&next=/researcher",
    )
    .await;
    assert_eq!(res.status, 303, "{}", res.body);
    let cookie = res.header("set-cookie").unwrap_or_default();
    let observer = Client {
        addr: b.addr,
        cookie: cookie.split(';').next().unwrap_or_default().to_string(),
        seat: Some(format!("o&observe={session}")),
    };
    let mut ob = observer
        .ws_with(&[("origin", origin.as_str())])
        .await
        .expect("observer handshake");
    ob.hello(0).await;
    for role in ["user", "wizard"] {
        ob.until(|v| {
            v["type"] == "observed" && v["role"] == role && v["frame"]["type"] == "welcome"
        })
        .await;
    }
    let said_ask = ob
        .until(|v| {
            v["type"] == "observed"
                && v["frame"]["type"] == "event"
                && v["frame"]["event"]["kind"] == "message"
        })
        .await;
    assert_eq!(
        said_ask["frame"]["event"]["seq"].as_u64().map(|s| s > 0),
        Some(true)
    );
    until_connections(&[
        (b.addr, "relayed", 2.0),
        (b.addr, "observer", 0.0),
        (a.addr, "observer", 1.0),
    ])
    .await;

    // A dies: the relayed socket closes (no clean end from A).
    let (seen_w, seen_u) = (last_seq(&wb), last_seq(&wu));
    let acked = a_store.events(&session, 0).await.expect("events");
    a.handle.abort();
    let _ = a.handle.await;
    drop(a.stop);
    until_closed(&mut wb).await;
    until_closed(&mut ob).await;
    drop(wu);
    until_connections(&[(b.addr, "relayed", 0.0)]).await;

    // After the lease runs out B runs the room; both reconnect to B and finish.
    wait_owner(b_store.as_ref(), &session, Some("B")).await;
    let (mut wb, mut ub) = reconnect_at(b.addr, (&wizard, seen_w), (&user, seen_u)).await;
    ub.cmd("u1", json!({"cmd": "approve"})).await;
    assert_eq!(ub.answer("u1").await["type"], "ack");
    wb.cmd("c3", json!({"cmd": "say", "state": "bye"})).await;
    assert_eq!(wb.answer("c3").await["type"], "ack");
    assert_eq!(ub.until_type("ended").await["reason"], "terminal");
    assert_eq!(wb.until_type("ended").await["reason"], "terminal");

    // No acknowledged event lost: the log at A's death is a prefix of the final, gap-free log,
    // which holds each command once.
    let events = b_store.events(&session, 0).await.expect("events");
    assert_log_goes_on(&events, &acked);
    for state in ["greet", "ask", "bye"] {
        assert_eq!(said(&events, state), 1, "{state}: {events:#?}");
    }
    assert!(replay(&tiny.study(), &session, &events).is_ended());

    stop(b).await;
}

/// A participant waiting on A, paired by the shared lobby into a room that B starts: the
/// `paired` frame sends their page on, and their room socket, on A, is relayed to B.
async fn paired_across_instances(a_store: Arc<dyn Store>, b_store: Arc<dyn Store>) {
    let tiny = Tiny::default();
    let a = instance("A", a_store.clone(), &tiny, Some(SECRET)).await;
    let b = instance("B", b_store.clone(), &tiny, Some(SECRET)).await;
    let user = join_at(a.addr, "participant=carol&role=user").await;
    let wizard = join_at(b.addr, "participant=dave&role=wizard").await;
    user.accept_pages().await;
    wizard.accept_pages().await;
    let mut wu = user.ws().await;
    wu.hello(0).await;
    wu.until_type("waiting").await;
    let mut ww = wizard.ws().await;
    ww.hello(0).await;
    let paired = ww.until_type("paired").await;
    let session = paired["session"].as_str().unwrap_or_default().to_string();
    let told = wu.until_type("paired").await;
    assert_eq!(told["session"], paired["session"]);
    wait_owner(a_store.as_ref(), &session, Some("B")).await;

    // The user's page goes on to the room on A: the socket is relayed to B.
    assert!(user.page().await.body.contains("data-page=\"room\""));
    let mut ru = enter(&user, 0).await;
    let mut rw = enter(&wizard, 0).await;
    rw.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(rw.answer("c1").await["type"], "ack");
    assert_eq!(ru.event("message").await["text"], "Hello, I am Fred.");
    ru.cmd("u1", json!({"cmd": "text", "text": "hi"})).await;
    assert_eq!(ru.answer("u1").await["type"], "ack");
    rw.event("message").await;
    assert_eq!(
        owner(a_store.as_ref(), &session).await.as_deref(),
        Some("B")
    );
    let events = b_store.events(&session, 0).await.expect("events");
    assert_eq!(said(&events, "greet"), 1, "{events:#?}");
    drop((ru, rw, wu, ww));
    stop(a).await;
    stop(b).await;
}

#[tokio::test]
async fn a_room_on_a_is_reached_through_b_sqlite() {
    on_one_sqlite_store(relay_case).await;
}

#[tokio::test]
async fn a_room_on_a_is_reached_through_b_postgres() {
    on_one_postgres_database("relay", relay_case).await;
}

#[tokio::test]
async fn a_participant_paired_into_a_room_on_another_instance_reaches_it_postgres() {
    // The lobby tells a partner on another instance through PostgreSQL's notifications; one
    // SQLite store in one process has no such channel.
    let Some(db) = TestDatabase::create("relay_paired").await else {
        return;
    };
    let a = wozkit_store::open(&db.url).await.expect("store A opens");
    let b = wozkit_store::open(&db.url).await.expect("store B opens");
    paired_across_instances(a.clone(), b.clone()).await;
    db.drop_database().await;
}

/// Round trips of `ping` frames (answered by the connection loop of the room's instance) on
/// `ws`, paced under the per-connection rate limit; returns the sorted times in microseconds.
async fn ping_round_trips(ws: &mut Ws, n: usize) -> Vec<u128> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = std::time::Instant::now();
        ws.send(json!({"type": "ping"})).await;
        ws.until_type("pong").await;
        times.push(t.elapsed().as_micros());
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    times.sort_unstable();
    times
}

/// Figures, not a check: the extra latency of one relay hop (`ping` round trips of the same
/// participant directly on the room's instance and through another one). Run with
/// `cargo test -p wozkit-server --release --test api relay_hop_figures -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints figures; takes about half a minute"]
async fn relay_hop_figures() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    let tiny = Tiny {
        time_limit_s: 600,
        ..Tiny::default()
    };
    let a = instance("A", store.clone(), &tiny, Some(SECRET)).await;
    let b = instance("B", store.clone(), &tiny, Some(SECRET)).await;
    let Pair {
        user,
        wizard,
        waiting: _waiting,
        ..
    } = pair_on(a.addr, "erin", "frank").await;
    let room_user = enter(&user, 0).await;
    const N: usize = 150;
    let mut direct = enter(&wizard, 0).await;
    let on_a = ping_round_trips(&mut direct, N).await;
    direct.close().await;
    let mut relayed = enter(&at(&wizard, b.addr), 0).await;
    let via_b = ping_round_trips(&mut relayed, N).await;
    relayed.close().await;
    let pct = |v: &[u128], p: usize| v[(v.len() * p / 100).min(v.len() - 1)];
    for (name, v) in [("direct on A", &on_a), ("through B", &via_b)] {
        println!(
            "ping round trip {name}: median {} µs, p90 {} µs, p99 {} µs ({} samples)",
            pct(v, 50),
            pct(v, 90),
            pct(v, 99),
            v.len()
        );
    }
    drop(room_user);
    stop(b).await;
    stop(a).await;
}
