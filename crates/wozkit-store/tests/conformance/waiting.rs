//! Conformance cases about the lobby's `waiting` table: complementary roles pair first come
//! first served (those put at the front first), never with themselves or the same crowd worker,
//! never with a waiter not heard from lately; another tab replaces a place; only the connection
//! holding a place refreshes or gives it up; and concurrent joiners never take the same waiter.
//! A reconnect that keeps its waiting time keeps its place; the presence per role counts
//! newcomers and live places once each; and a waiter in lasting surplus switches roles only
//! when no partner can still come.

use std::collections::HashSet;
use std::sync::Arc;

use wozkit_core::event::Role;
use wozkit_store::store::{Joined, NewWaiter, RoleCounts, RoleSwitch};
use wozkit_store::{NewParticipant, ParticipantPatch, Platform, Store};

use crate::harness::Backend;

fn entry(participant: &str, role: Role, worker: Option<&str>, heard_at_ms: u64) -> NewWaiter {
    NewWaiter {
        participant: participant.to_owned(),
        study_id: "s".to_owned(),
        pair_key: None,
        role,
        worker: worker.map(str::to_owned),
        instance: "i1".to_owned(),
        conn: 1,
        front: false,
        since_ms: heard_at_ms,
        heard_at_ms,
    }
}

/// The partner taken, or `None` when the joiner was queued.
async fn join(store: &dyn Store, e: NewWaiter, live_since_ms: u64) -> Option<String> {
    match store
        .join_lobby(e, live_since_ms)
        .await
        .expect("join")
        .joined
    {
        Joined::Taken(w) => Some(w.participant),
        Joined::Queued(_) => None,
    }
}

async fn queue(store: &dyn Store) -> Vec<String> {
    store
        .waiters(Some("s"))
        .await
        .expect("waiters")
        .into_iter()
        .map(|w| w.participant)
        .collect()
}

pub async fn lobby_pairs_first_come_first_served(backend: &Backend) {
    let store = backend.open().await;
    let s = store.as_ref();
    assert_eq!(join(s, entry("u1", Role::User, None, 10), 0).await, None);
    assert_eq!(join(s, entry("u2", Role::User, None, 11), 0).await, None);
    assert_eq!(join(s, entry("u3", Role::User, None, 12), 0).await, None);
    // Two of the same role never pair.
    assert_eq!(queue(s).await, ["u1", "u2", "u3"]);
    let all = s.waiters(None).await.expect("all");
    assert!(all[0].order < all[1].order && all[1].order < all[2].order);
    // A stranded participant goes ahead of everyone, behind earlier stranded ones.
    let mut f1 = entry("f1", Role::User, None, 13);
    f1.front = true;
    let mut f2 = entry("f2", Role::User, None, 14);
    f2.front = true;
    assert_eq!(join(s, f1, 0).await, None);
    assert_eq!(join(s, f2, 0).await, None);
    assert_eq!(queue(s).await, ["f1", "f2", "u1", "u2", "u3"]);
    let mut taken = vec![];
    for w in ["w1", "w2", "w3", "w4"] {
        taken.push(
            join(s, entry(w, Role::Wizard, None, 20), 0)
                .await
                .expect("a partner"),
        );
    }
    assert_eq!(taken, ["f1", "f2", "u1", "u2"]);
    assert_eq!(queue(s).await, ["u3"]);
    // Another study and a private pair key are other queues.
    let mut other = entry("w5", Role::Wizard, None, 21);
    other.study_id = "t".to_owned();
    assert_eq!(join(s, other, 0).await, None);
    let mut private = entry("w6", Role::Wizard, None, 21);
    private.pair_key = Some("k".to_owned());
    assert_eq!(join(s, private, 0).await, None);
    let mut mate = entry("u7", Role::User, None, 22);
    mate.pair_key = Some("k".to_owned());
    assert_eq!(join(s, mate, 0).await.as_deref(), Some("w6"));
    assert_eq!(queue(s).await, ["u3"]);
    // Kept across a reopen.
    drop(store);
    let store = backend.open().await;
    let left = store.waiters(None).await.expect("after reopen");
    let left: Vec<(&str, &str)> = left
        .iter()
        .map(|w| (w.study_id.as_str(), w.participant.as_str()))
        .collect();
    assert_eq!(left, [("s", "u3"), ("t", "w5")]);
    store.close().await;
}

pub async fn lobby_never_pairs_a_participant_or_worker_with_itself(backend: &Backend) {
    let store = backend.open().await;
    let s = store.as_ref();
    assert_eq!(
        join(s, entry("a", Role::User, Some("prolific:X"), 1), 0).await,
        None
    );
    // The same worker under another participant id, in the other role: not paired.
    assert_eq!(
        join(s, entry("b", Role::Wizard, Some("prolific:X"), 2), 0).await,
        None
    );
    // A second tab of `a`, now as a wizard: its user place is replaced, not taken; the place
    // replaced is returned (its connection is told), and the wait counts from the first tab.
    let mut again = entry("a", Role::Wizard, Some("prolific:X"), 3);
    again.conn = 2;
    let joined = s.join_lobby(again, 0).await.expect("join");
    let replaced = joined.replaced.expect("the first tab's place");
    assert_eq!(
        (replaced.participant.as_str(), replaced.role, replaced.conn),
        ("a", Role::User, 1)
    );
    match joined.joined {
        Joined::Queued(w) => assert_eq!((w.conn, w.since_ms, w.heard_at_ms), (2, 1, 3)),
        Joined::Taken(w) => panic!("the same worker taken: {w:?}"),
    }
    let roles: Vec<(String, Role, u64)> = s
        .waiters(Some("s"))
        .await
        .expect("waiters")
        .into_iter()
        .map(|w| (w.participant, w.role, w.conn))
        .collect();
    // The place is the first tab's too: `a` has waited longer than `b`.
    assert_eq!(
        roles,
        [
            ("a".to_owned(), Role::Wizard, 2),
            ("b".to_owned(), Role::Wizard, 1)
        ]
    );
    // Only the connection holding the place refreshes or gives it up.
    assert!(!s.lobby_heard("a", "i1", 1, 9).await.expect("old tab"));
    assert!(!s.leave_lobby("a", "i1", 1).await.expect("old tab"));
    assert!(!s.leave_lobby("a", "i2", 2).await.expect("other instance"));
    assert!(s.lobby_heard("a", "i1", 2, 9).await.expect("this tab"));
    // Another worker's user takes the first wizard; nothing of theirs was replaced.
    let joined = s
        .join_lobby(entry("c", Role::User, Some("prolific:Y"), 10), 0)
        .await
        .expect("join");
    assert_eq!(joined.replaced, None);
    match joined.joined {
        Joined::Taken(w) => assert_eq!(w.participant, "a"),
        Joined::Queued(_) => panic!("c should take a"),
    }
    assert!(s.leave_lobby("b", "i1", 1).await.expect("leave"));
    assert!(!s.leave_lobby("b", "i1", 1).await.expect("left twice"));
    assert!(queue(s).await.is_empty());
    store.close().await;
}

pub async fn lobby_passes_over_waiters_not_heard_lately(backend: &Backend) {
    let store = backend.open().await;
    let s = store.as_ref();
    assert_eq!(join(s, entry("old", Role::User, None, 100), 0).await, None);
    assert_eq!(join(s, entry("new", Role::User, None, 500), 0).await, None);
    // Live means heard at or after 400: `old` is passed over, but keeps its place.
    assert_eq!(
        join(s, entry("w1", Role::Wizard, None, 600), 400)
            .await
            .as_deref(),
        Some("new")
    );
    assert_eq!(queue(s).await, ["old"]);
    // Heard again: taken next.
    assert!(s.lobby_heard("old", "i1", 1, 700).await.expect("heard"));
    // An older time never moves heard_at_ms back.
    assert!(s.lobby_heard("old", "i1", 1, 50).await.expect("heard"));
    assert_eq!(s.waiters(None).await.expect("waiters")[0].heard_at_ms, 700);
    assert_eq!(
        join(s, entry("w2", Role::Wizard, None, 800), 400)
            .await
            .as_deref(),
        Some("old")
    );
    store.close().await;
}

pub async fn lobby_concurrent_joiners_never_share_a_waiter(backend: &Backend) {
    let store = backend.open().await;
    const USERS: usize = 20;
    for i in 0..USERS {
        let e = entry(&format!("u{i:02}"), Role::User, None, 10 + i as u64);
        assert_eq!(join(store.as_ref(), e, 0).await, None);
    }
    // On PostgreSQL a second pool on the same database, as a second instance has; SQLite serves
    // one process, so the same store.
    let other: Arc<dyn Store> = match backend {
        Backend::Postgres(_) => backend.open().await,
        Backend::Sqlite(_) => store.clone(),
    };
    let mut tasks = vec![];
    for i in 0..USERS + 10 {
        let store = if i % 2 == 0 {
            store.clone()
        } else {
            other.clone()
        };
        tasks.push(tokio::spawn(async move {
            let mut e = entry(&format!("w{i:02}"), Role::Wizard, None, 100);
            e.instance = format!("i{}", i % 2);
            join(store.as_ref(), e, 0).await
        }));
    }
    let mut taken = HashSet::new();
    let mut queued = 0;
    for t in tasks {
        match t.await.expect("task") {
            Some(p) => assert!(taken.insert(p.clone()), "{p} was taken twice"),
            None => queued += 1,
        }
    }
    assert_eq!(taken.len(), USERS, "every user is taken once");
    assert_eq!(queued, 10, "the wizards left over wait");
    let left = store.waiters(None).await.expect("waiters");
    assert!(left.iter().all(|w| w.role == Role::Wizard));
    assert_eq!(left.len(), 10);
    // Complementary joiners at the same moment pair with each other rather than both waiting.
    let mut tasks = vec![];
    for i in 0..10 {
        let store = if i % 2 == 0 {
            store.clone()
        } else {
            other.clone()
        };
        tasks.push(tokio::spawn(async move {
            let mut e = entry(&format!("late{i}"), Role::User, None, 200);
            e.study_id = "race".to_owned();
            let mut w = entry(&format!("latew{i}"), Role::Wizard, None, 200);
            w.study_id = "race".to_owned();
            let (a, b) = tokio::join!(join(store.as_ref(), e, 0), join(store.as_ref(), w, 0));
            usize::from(a.is_some()) + usize::from(b.is_some())
        }));
    }
    let mut pairs = 0;
    for t in tasks {
        pairs += t.await.expect("task");
    }
    assert_eq!(pairs, 10, "ten users and ten wizards make ten pairs");
    assert!(store.waiters(Some("race")).await.expect("race").is_empty());
    if matches!(backend, Backend::Postgres(_)) {
        other.close().await;
    }
    store.close().await;
}

pub async fn lobby_notices_reach_every_instance(backend: &Backend) {
    let store = backend.open().await;
    match backend {
        Backend::Sqlite(_) => {
            // One process: no channel; the caller delivers in-process.
            assert!(!store.notify_lobby("x").await.expect("notify"));
            assert!(store.listen_lobby().await.expect("listen").is_none());
        }
        Backend::Postgres(_) => {
            let other = backend.open().await;
            let mut here = store
                .listen_lobby()
                .await
                .expect("listen")
                .expect("a channel");
            let mut there = other
                .listen_lobby()
                .await
                .expect("listen")
                .expect("a channel");
            assert!(
                store
                    .notify_lobby("paired i2 7 p1 s1")
                    .await
                    .expect("notify")
            );
            assert!(other.notify_lobby("second").await.expect("notify"));
            for rx in [&mut here, &mut there] {
                assert_eq!(rx.recv().await.as_deref(), Some("paired i2 7 p1 s1"));
                assert_eq!(rx.recv().await.as_deref(), Some("second"));
            }
            let long = "x".repeat(wozkit_store::store::LOBBY_NOTICE_MAX + 1);
            assert!(
                store.notify_lobby(&long).await.is_err(),
                "an over-long notice"
            );
            other.close().await;
        }
    }
    store.close().await;
}

pub async fn lobby_reconnect_keeps_its_place(backend: &Backend) {
    let store = backend.open().await;
    let s = store.as_ref();
    assert_eq!(join(s, entry("a", Role::User, None, 10), 0).await, None);
    assert_eq!(join(s, entry("b", Role::User, None, 11), 0).await, None);
    // `a` reloads: its connection gives the place up, and the new one keeps its waiting time.
    assert!(s.leave_lobby("a", "i1", 1).await.expect("leave"));
    let mut back = entry("a", Role::User, None, 30);
    back.since_ms = 10;
    back.conn = 2;
    assert_eq!(join(s, back, 0).await, None);
    assert_eq!(queue(s).await, ["a", "b"]);
    assert_eq!(
        join(s, entry("w", Role::Wizard, None, 31), 0)
            .await
            .as_deref(),
        Some("a")
    );
    store.close().await;
}

/// A participant of study `s` who entered at `at_ms` with `role`.
async fn arrive(store: &dyn Store, id: &str, role: Role, at_ms: u64) {
    store
        .create_participant(NewParticipant {
            id: id.to_owned(),
            token_hash: format!("hash-{id}"),
            study_id: "s".to_owned(),
            platform: Platform::Prolific,
            worker_id: Some(id.to_owned()),
            external_ids: Default::default(),
            flow_step: "0:consent".to_owned(),
            created_at_ms: at_ms,
        })
        .await
        .expect("participant");
    let patch = ParticipantPatch {
        role: Some(Some(role)),
        ..ParticipantPatch::default()
    };
    store.update_participant(id, patch).await.expect("role");
}

fn counts(users: u64, wizards: u64) -> RoleCounts {
    RoleCounts { users, wizards }
}

pub async fn lobby_presence_counts_newcomers_and_live_places_once(backend: &Backend) {
    let store = backend.open().await;
    let s = store.as_ref();
    arrive(s, "u1", Role::User, 1_000).await;
    arrive(s, "u2", Role::User, 2_000).await;
    arrive(s, "w1", Role::Wizard, 3_000).await;
    assert_eq!(
        s.lobby_presence("s", 0, 0).await.expect("presence"),
        counts(2, 1)
    );
    assert_eq!(
        s.lobby_presence("t", 0, 0).await.expect("presence"),
        counts(0, 0)
    );
    // Entered before the cut-off: not counted, unless holding a live place.
    assert_eq!(
        s.lobby_presence("s", 1_500, 0).await.expect("presence"),
        counts(1, 1)
    );
    assert_eq!(join(s, entry("u1", Role::User, None, 5_000), 0).await, None);
    assert_eq!(
        s.lobby_presence("s", 1_500, 4_000).await.expect("presence"),
        counts(2, 1)
    );
    assert_eq!(
        s.lobby_presence("s", 0, 4_000).await.expect("presence"),
        counts(2, 1),
        "a newcomer with a live place counts once"
    );
    assert_eq!(
        s.lobby_presence("s", 1_500, 6_000).await.expect("presence"),
        counts(1, 1),
        "a silent place does not count"
    );
    // Seated or finished: not present.
    let seated = ParticipantPatch {
        session_id: Some(Some("S".to_owned())),
        ..ParticipantPatch::default()
    };
    s.update_participant("u2", seated).await.expect("seat");
    let done = ParticipantPatch {
        completion_code: Some(Some("C".to_owned())),
        ..ParticipantPatch::default()
    };
    s.update_participant("w1", done).await.expect("code");
    assert_eq!(
        s.lobby_presence("s", 0, 0).await.expect("presence"),
        counts(1, 0)
    );
    store.close().await;
}

fn switch(participant: &str, conn: u64, at_ms: u64, arrived_since_ms: u64) -> RoleSwitch {
    RoleSwitch {
        participant: participant.to_owned(),
        study_id: "s".to_owned(),
        instance: "i1".to_owned(),
        conn,
        from: Role::User,
        flow_step: "1:instructions".to_owned(),
        at_ms,
        live_since_ms: at_ms - 1_000,
        arrived_since_ms,
    }
}

pub async fn lobby_switches_the_last_waiter_of_a_lasting_surplus(backend: &Backend) {
    let store = backend.open().await;
    let s = store.as_ref();
    for (i, u) in ["u1", "u2"].into_iter().enumerate() {
        arrive(s, u, Role::User, 100).await;
        let mut e = entry(u, Role::User, None, 10_000);
        e.since_ms = 1_000 + i as u64;
        assert_eq!(join(s, e, 0).await, None);
    }
    // A wizard on their way (entered at 9 000) may still take one of the two users.
    arrive(s, "w1", Role::Wizard, 9_000).await;
    let now = 10_500;
    assert!(
        !s.switch_lobby_role(switch("u2", 1, now, 5_000))
            .await
            .expect("switch"),
        "two users, a wizard on the way: no switch"
    );
    // Not the last waiter of the role, or another connection than the place's: never.
    assert!(
        !s.switch_lobby_role(switch("u1", 1, now, 9_500))
            .await
            .expect("switch")
    );
    assert!(
        !s.switch_lobby_role(switch("u2", 7, now, 9_500))
            .await
            .expect("switch")
    );
    assert!(
        s.switch_lobby_role(switch("u2", 1, now, 9_500))
            .await
            .expect("switch"),
        "two users, no wizard expected any more: the last one switches"
    );
    assert_eq!(queue(s).await, ["u1"]);
    let u2 = s.participant("u2").await.expect("read").expect("u2");
    assert_eq!(
        (u2.role, u2.flow_step.as_str()),
        (Some(Role::Wizard), "1:instructions")
    );
    // The switched participant is on their way again (changed at 10 500).
    assert_eq!(
        s.lobby_presence("s", 9_500, 9_500).await.expect("presence"),
        counts(1, 1)
    );
    assert!(
        !s.switch_lobby_role(switch("u1", 1, now, 9_500))
            .await
            .expect("switch"),
        "one user: no switch"
    );
    // Three users and one wizard expected: two would be left, so the last one switches.
    for (i, u) in ["u3", "u4"].into_iter().enumerate() {
        arrive(s, u, Role::User, 100).await;
        let mut e = entry(u, Role::User, None, 10_000);
        e.since_ms = 2_000 + i as u64;
        assert_eq!(join(s, e, 0).await, None);
    }
    assert!(
        s.switch_lobby_role(switch("u4", 1, now, 9_500))
            .await
            .expect("switch")
    );
    assert_eq!(queue(s).await, ["u1", "u3"]);
    store.close().await;
}
