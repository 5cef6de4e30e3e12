//! Several instances on one store: a room runs only on the instance holding its lease. A room
//! owned by instance A is neither resumed nor touched by instance B while A renews its lease;
//! once A stops (its task aborted: no room ends, no lease is given back) and the lease runs
//! out, B takes the room over, rebuilds it from the log as a restart does, and the participants
//! reconnecting to B finish the session with nothing lost.
//!
//! Both instances share one PostgreSQL database (each with its own connection pool, as separate
//! processes would) when `WOZKIT_TEST_PG_URL` is set; the SQLite case runs both instances in
//! this process on one store, since one process holds a SQLite data directory.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wozkit_core::engine::replay;
use wozkit_core::event::{Event, EventKind};
use wozkit_server::{Config, StartError, Tunables, launch_with_listener};
use wozkit_store::Store;
use wozkit_store::testing::TestDatabase;

use crate::helpers::{Client, Tiny, enter, fast};
use crate::reconnect::last_seq;

/// Lease length of the test instances: short, so a takeover comes soon.
const LEASE_MS: u64 = 600;

/// One server instance on a shared store.
struct Instance {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<Result<(), StartError>>,
}

async fn instance(id: &str, store: Arc<dyn Store>, tiny: &Tiny) -> Instance {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let config = Config {
        studies: vec![tiny.study()],
        tunables: Tunables {
            instance_id: id.to_owned(),
            room_lease_ms: LEASE_MS,
            sole_instance: false,
            ..fast()
        },
    };
    let handle = tokio::spawn(launch_with_listener(config, store, listener, async {
        let _ = stopped.await;
    }));
    Instance {
        addr,
        stop: Some(stop),
        handle,
    }
}

fn at(c: &Client, addr: std::net::SocketAddr) -> Client {
    Client {
        addr,
        cookie: c.cookie.clone(),
        seat: c.seat.clone(),
    }
}

async fn join(addr: std::net::SocketAddr, query: &str) -> Client {
    let res = crate::helpers::http(addr, "GET", &format!("/join?{query}"), &[], "").await;
    assert_eq!(res.status, 303, "join failed: {}", res.body);
    let set = res.header("set-cookie").expect("join sets a cookie");
    let location = res.header("location").unwrap_or_default();
    Client {
        addr,
        cookie: set.split(';').next().unwrap_or_default().to_string(),
        seat: location.split("seat=").nth(1).map(str::to_string),
    }
}

async fn owner(store: &dyn Store, session: &str) -> Option<String> {
    store
        .room_owner(session)
        .await
        .expect("room owner")
        .map(|l| l.instance_id)
}

/// Polls until the room's lease names `want` (or nobody, for `None`).
async fn wait_owner(store: &dyn Store, session: &str, want: Option<&str>) {
    for _ in 0..200 {
        if owner(store, session).await.as_deref() == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the lease of {session} never came to {want:?}: {:?}",
        store.room_owner(session).await
    );
}

fn disconnects(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Disconnected { .. }))
        .count()
}

/// The case, on stores `a_store` (instance A) and `b_store` (instance B) over one database.
async fn a_room_moves_to_b_when_a_stops(a_store: Arc<dyn Store>, b_store: Arc<dyn Store>) {
    let tiny = Tiny::default();
    let a = instance("A", a_store.clone(), &tiny).await;
    let mut b = instance("B", b_store.clone(), &tiny).await;

    // Paired on A: A leases the room before it stores anything.
    let user = join(a.addr, "participant=alice&role=user").await;
    let wizard = join(a.addr, "participant=bob&role=wizard").await;
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
    ww.until_type("paired").await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    assert_eq!(
        owner(b_store.as_ref(), &session).await.as_deref(),
        Some("A")
    );
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(ww.answer("c1").await["type"], "ack");
    wu.event("message").await;

    // Several of B's heartbeats (a third of the lease each) and lease lengths pass: B takes
    // nothing over and stores nothing in A's room.
    let before = b_store.events(&session, 0).await.expect("events");
    tokio::time::sleep(Duration::from_millis(4 * LEASE_MS)).await;
    assert_eq!(
        owner(b_store.as_ref(), &session).await.as_deref(),
        Some("A")
    );
    let after = b_store.events(&session, 0).await.expect("events");
    assert_eq!(after, before, "B touched a room that A runs");
    assert_eq!(disconnects(&after), 0, "{after:#?}");
    // Knocking on B does not make B rebuild A's room either.
    let mut knock = at(&user, b.addr).ws().await;
    knock.hello(last_seq(&wu)).await;
    tokio::time::sleep(Duration::from_millis(LEASE_MS)).await;
    drop(knock);
    assert_eq!(
        owner(b_store.as_ref(), &session).await.as_deref(),
        Some("A")
    );
    assert_eq!(b_store.events(&session, 0).await.expect("events"), before);

    // A stops without ending anything or giving its lease back.
    let (seen_w, seen_u) = (last_seq(&ww), last_seq(&wu));
    a.handle.abort();
    let _ = a.handle.await;
    drop(a.stop);
    drop((ww, wu));
    let at_stop = b_store.events(&session, 0).await.expect("events");

    // After the lease runs out B takes the room over and rebuilds it from the log.
    wait_owner(b_store.as_ref(), &session, Some("B")).await;
    let mut ww = at(&wizard, b.addr).ws().await;
    ww.hello(seen_w).await;
    let mut wu = at(&user, b.addr).ws().await;
    wu.hello(seen_u).await;
    ww.until_type("view").await;
    ww.cmd("c2", json!({"cmd": "say", "state": "bye"})).await;
    assert_eq!(ww.answer("c2").await["type"], "ack");
    assert_eq!(wu.until_type("ended").await["reason"], "terminal");
    assert_eq!(ww.until_type("ended").await["reason"], "terminal");

    // Nothing lost: the log at A's stop is a prefix of the final log, which is gap-free, and
    // B recorded the participants' disconnection as a restart does.
    let events = b_store.events(&session, 0).await.expect("events");
    assert_eq!(&events[..at_stop.len()], at_stop.as_slice());
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert!(disconnects(&events[at_stop.len()..]) > 0, "{events:#?}");
    let s = replay(&tiny.study(), &session, &events);
    assert!(s.is_ended());
    // The ended room gives its lease back.
    wait_owner(b_store.as_ref(), &session, None).await;

    if let Some(stop) = b.stop.take() {
        let _ = stop.send(());
    }
    let stopped = tokio::time::timeout(Duration::from_secs(10), &mut b.handle).await;
    assert!(
        matches!(stopped, Ok(Ok(Ok(())))),
        "B did not stop: {stopped:?}"
    );
}

#[tokio::test]
async fn a_room_owned_by_a_moves_to_b_only_after_a_stops_sqlite() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    a_room_moves_to_b_when_a_stops(store.clone(), store).await;
}

#[tokio::test]
async fn a_room_owned_by_a_moves_to_b_only_after_a_stops_postgres() {
    let Some(db) = TestDatabase::create("instances_takeover").await else {
        return;
    };
    let a = wozkit_store::open(&db.url).await.expect("store A opens");
    let b = wozkit_store::open(&db.url).await.expect("store B opens");
    a_room_moves_to_b_when_a_stops(a.clone(), b).await;
    a.close().await;
    db.drop_database().await;
}
