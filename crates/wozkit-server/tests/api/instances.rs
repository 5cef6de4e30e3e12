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
use wozkit_core::engine::replay;
use wozkit_core::event::{Event, EventKind};
use wozkit_store::{NewEvent, Store};

use crate::cluster::{
    LEASE_MS, Pair, assert_log_goes_on, at, instance, on_one_postgres_database,
    on_one_sqlite_store, owner, pair_on, reconnect_at, stop, wait_owner,
};
use crate::helpers::{Tiny, enter};
use crate::reconnect::last_seq;

fn disconnects(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Disconnected { .. }))
        .count()
}

/// The case, on stores `a_store` (instance A) and `b_store` (instance B) over one database.
async fn a_room_moves_to_b_when_a_stops(a_store: Arc<dyn Store>, b_store: Arc<dyn Store>) {
    let tiny = Tiny::default();
    let a = instance("A", a_store.clone(), &tiny, None).await;
    let b = instance("B", b_store.clone(), &tiny, None).await;

    // Paired on A: A leases the room before it stores anything.
    let Pair {
        user,
        wizard,
        session,
        waiting: _waiting,
    } = pair_on(a.addr, "alice", "bob").await;
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
    let (mut ww, mut wu) = reconnect_at(b.addr, (&wizard, seen_w), (&user, seen_u)).await;
    ww.cmd("c2", json!({"cmd": "say", "state": "bye"})).await;
    assert_eq!(ww.answer("c2").await["type"], "ack");
    assert_eq!(wu.until_type("ended").await["reason"], "terminal");
    assert_eq!(ww.until_type("ended").await["reason"], "terminal");

    // Nothing lost: the log at A's stop is a prefix of the final log, which is gap-free, and
    // B recorded the participants' disconnection as a restart does.
    let events = b_store.events(&session, 0).await.expect("events");
    assert_log_goes_on(&events, &at_stop);
    assert!(disconnects(&events[at_stop.len()..]) > 0, "{events:#?}");
    let s = replay(&tiny.study(), &session, &events);
    assert!(s.is_ended());
    // The ended room gives its lease back.
    wait_owner(b_store.as_ref(), &session, None).await;

    stop(b).await;
}

#[tokio::test]
async fn a_room_owned_by_a_moves_to_b_only_after_a_stops_sqlite() {
    on_one_sqlite_store(a_room_moves_to_b_when_a_stops).await;
}

#[tokio::test]
async fn a_room_owned_by_a_moves_to_b_only_after_a_stops_postgres() {
    on_one_postgres_database("instances_takeover", a_room_moves_to_b_when_a_stops).await;
}

/// The case, on one store: another writer appends to a live room's log (as an instance that
/// took the room over while this one stalled past its lease would). The room's next append is
/// refused by the store instead of interleaving with the other writer's, so the room stops
/// storing nothing; its connections close; the participants reconnect, the room is rebuilt from
/// the log with the other writer's event in it, and the session goes on and ends with a
/// gap-free log and every event seen by the wizard.
async fn a_room_whose_log_moved_stops_and_is_rebuilt(store: Arc<dyn Store>, _: Arc<dyn Store>) {
    let tiny = Tiny::default();
    let a = instance("A", store.clone(), &tiny, None).await;
    let Pair {
        user,
        wizard,
        session,
        waiting: _waiting,
    } = pair_on(a.addr, "alice", "bob").await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(ww.answer("c1").await["type"], "ack");
    wu.event("message").await;

    // Another writer stores the wizard's greeting once more, behind the room's back.
    let before = store.events(&session, 0).await.expect("events");
    let greeting = before
        .iter()
        .rfind(|e| matches!(e.kind, EventKind::Message { .. }))
        .expect("the greeting")
        .clone();
    let foreign = store
        .append(
            &session,
            vec![NewEvent {
                actor: greeting.actor.clone(),
                kind: greeting.kind.clone(),
                at_ms: greeting.at_ms + 1,
            }],
        )
        .await
        .expect("the other writer's append");
    let foreign_seq = foreign[0].seq;

    // The room's next command is not stored on top of it: no answer, the connections close.
    ww.cmd("c2", json!({"cmd": "say", "state": "bye"})).await;
    while let Some(frame) = ww.next().await {
        assert_ne!(
            frame["type"], "ack",
            "stored over another writer's event: {frame}"
        );
    }
    while wu.next().await.is_some() {}
    let at_stop = store.events(&session, 0).await.expect("events");
    assert_eq!(
        at_stop.len(),
        before.len() + 1,
        "the room stored nothing more"
    );

    // Reconnecting rebuilds the room from the log, the other writer's event included.
    let (seen_w, seen_u) = (last_seq(&ww), last_seq(&wu));
    let (mut ww, mut wu) = reconnect_at(a.addr, (&wizard, seen_w), (&user, seen_u)).await;
    ww.cmd("c3", json!({"cmd": "say", "state": "bye"})).await;
    assert_eq!(ww.answer("c3").await["type"], "ack");
    assert_eq!(wu.until_type("ended").await["reason"], "terminal");
    assert_eq!(ww.until_type("ended").await["reason"], "terminal");

    let events = store.events(&session, 0).await.expect("events");
    assert_log_goes_on(&events, &at_stop);
    let seen: Vec<u64> = ww
        .seen
        .iter()
        .filter(|f| f["type"] == "event")
        .filter_map(|f| f["event"]["seq"].as_u64())
        .collect();
    assert!(
        seen.contains(&foreign_seq),
        "the wizard was sent the other writer's event {foreign_seq}: {seen:?}"
    );
    assert!(replay(&tiny.study(), &session, &events).is_ended());
    stop(a).await;
}

#[tokio::test]
async fn a_room_whose_log_moved_stops_and_is_rebuilt_sqlite() {
    on_one_sqlite_store(a_room_whose_log_moved_stops_and_is_rebuilt).await;
}

#[tokio::test]
async fn a_room_whose_log_moved_stops_and_is_rebuilt_postgres() {
    on_one_postgres_database(
        "instances_log_moved",
        a_room_whose_log_moved_stops_and_is_rebuilt,
    )
    .await;
}
