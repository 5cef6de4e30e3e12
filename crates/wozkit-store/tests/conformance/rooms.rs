//! Conformance cases about room leases: instances racing for one room (exactly one wins), a
//! lease that expires lets another instance take the room, renewing keeps it, releasing frees
//! it, and taking over orphaned rooms never gives one room to two instances. On PostgreSQL the
//! two "instances" are two separate store handles (two connection pools); on SQLite, where one
//! process holds the database, they share the one store.

use std::collections::BTreeSet;
use std::sync::Arc;

use wozkit_core::event::EndReason;
use wozkit_store::Store;
use wozkit_store::store::RoomLease;

use crate::harness::{Backend, new_session};

/// Two handles on the backend's database, as two instances would have.
async fn two_instances(backend: &Backend) -> (Arc<dyn Store>, Arc<dyn Store>) {
    let a = backend.open().await;
    let b = match backend {
        Backend::Sqlite(_) => a.clone(),
        _ => backend.open().await,
    };
    (a, b)
}

pub async fn instances_race_for_one_room_and_exactly_one_wins(backend: &Backend) {
    let (a, b) = two_instances(backend).await;
    a.create_session(new_session("s1", "st", 1))
        .await
        .expect("s1");
    let mut racers = Vec::new();
    for i in 0..16 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        racers.push(tokio::spawn(async move {
            let me = format!("inst-{i}");
            let won = store
                .acquire_room("s1", &me, &format!("http://{me}"), 1_000, 11_000)
                .await
                .expect("acquire");
            (me, won)
        }));
    }
    let mut winners = Vec::new();
    for r in racers {
        let (me, won) = r.await.expect("racer");
        if won {
            winners.push(me);
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let owner = b.room_owner("s1").await.expect("owner").expect("a lease");
    assert_eq!(
        owner,
        RoomLease {
            session_id: "s1".into(),
            instance_id: winners[0].clone(),
            address: format!("http://{}", winners[0]),
            expires_at_ms: 11_000,
        }
    );
    // The holder acquiring again renews; anybody else is still refused before expiry.
    assert!(
        a.acquire_room("s1", &winners[0], "http://moved", 2_000, 12_000)
            .await
            .expect("again")
    );
    assert!(
        !b.acquire_room("s1", "other", "http://other", 11_999, 21_999)
            .await
            .expect("refused")
    );
    let owner = a.room_owner("s1").await.expect("owner").expect("a lease");
    assert_eq!(
        (
            owner.instance_id.as_str(),
            owner.address.as_str(),
            owner.expires_at_ms
        ),
        (winners[0].as_str(), "http://moved", 12_000)
    );
    assert_eq!(a.room_owner("nope").await.expect("none"), None);
}

pub async fn expiry_lets_another_instance_take_a_room_and_renewal_keeps_it(backend: &Backend) {
    let (a, b) = two_instances(backend).await;
    for id in ["s1", "s2"] {
        a.create_session(new_session(id, "st", 1)).await.expect(id);
    }
    assert!(
        a.acquire_room("s1", "A", "http://a", 0, 10_000)
            .await
            .expect("a s1")
    );
    assert!(
        a.acquire_room("s2", "A", "http://a", 0, 10_000)
            .await
            .expect("a s2")
    );
    // A's heartbeat moves both leases at once.
    assert_eq!(
        a.renew_rooms("A", 20_000).await.expect("renew"),
        vec!["s1".to_owned(), "s2".to_owned()]
    );
    // At 15 s the old expiry has passed but the renewed one holds.
    assert!(
        !b.acquire_room("s1", "B", "http://b", 15_000, 25_000)
            .await
            .expect("b early")
    );
    assert_eq!(
        b.claim_orphan_rooms("B", "http://b", 15_000, 15_000, 25_000, 100)
            .await
            .expect("nothing orphaned"),
        Vec::<String>::new()
    );
    // A stops renewing; once the lease has expired B takes the room.
    assert!(
        b.acquire_room("s1", "B", "http://b", 20_000, 30_000)
            .await
            .expect("b late")
    );
    let owner = a.room_owner("s1").await.expect("owner").expect("lease");
    assert_eq!(
        (owner.instance_id.as_str(), owner.address.as_str()),
        ("B", "http://b")
    );
    // A's next heartbeat tells it which room it lost: only s2 is still its own.
    assert_eq!(
        a.renew_rooms("A", 40_000).await.expect("renew"),
        vec!["s2".to_owned()]
    );
    assert_eq!(
        b.renew_rooms("B", 40_000).await.expect("renew"),
        vec!["s1".to_owned()]
    );
    // A lease of a session that ended is dropped by its holder's next heartbeat.
    a.end_session("s2", EndReason::Finished, 30_000)
        .await
        .expect("end s2");
    assert_eq!(
        a.renew_rooms("A", 40_000).await.expect("renew"),
        Vec::<String>::new()
    );
    assert_eq!(a.room_owner("s2").await.expect("owner"), None);
    // A cannot release what it no longer holds; B can.
    assert!(!a.release_room("s1", "A").await.expect("not A's"));
    assert!(b.release_room("s1", "B").await.expect("B's"));
    assert_eq!(a.room_owner("s1").await.expect("owner"), None);
    assert!(
        a.acquire_room("s1", "A", "http://a", 40_000, 50_000)
            .await
            .expect("free")
    );
}

pub async fn orphaned_rooms_are_taken_over_once(backend: &Backend) {
    let (a, b) = two_instances(backend).await;
    let ids: Vec<String> = (0..40).map(|i| format!("s{i:02}")).collect();
    for id in &ids {
        a.create_session(new_session(id, "st", 1))
            .await
            .expect("session");
    }
    // A session created after the claim's cut-off and held by nobody is being started by the
    // instance that paired it: left alone until it is older.
    a.create_session(new_session("young", "st", 5_000))
        .await
        .expect("young");
    // s00 ended: never claimed. s01 is held by a live instance: never claimed before expiry.
    a.end_session("s00", EndReason::Finished, 5)
        .await
        .expect("end");
    assert!(
        a.acquire_room("s01", "C", "http://c", 0, 100_000)
            .await
            .expect("c")
    );
    // s02's owner died: its lease expired at 1 s.
    assert!(
        a.acquire_room("s02", "D", "http://d", 0, 1_000)
            .await
            .expect("d")
    );
    let (ca, cb) = tokio::join!(
        {
            let a = a.clone();
            async move {
                a.claim_orphan_rooms("A", "http://a", 2_000, 2_000, 12_000, 1_000)
                    .await
            }
        },
        {
            let b = b.clone();
            async move {
                b.claim_orphan_rooms("B", "http://b", 2_000, 2_000, 12_000, 1_000)
                    .await
            }
        }
    );
    let (ca, cb) = (ca.expect("claim a"), cb.expect("claim b"));
    let sa: BTreeSet<&String> = ca.iter().collect();
    let sb: BTreeSet<&String> = cb.iter().collect();
    assert!(
        sa.is_disjoint(&sb),
        "claimed twice: {:?}",
        sa.intersection(&sb)
    );
    let all: BTreeSet<&String> = sa.union(&sb).copied().collect();
    let expected: BTreeSet<&String> = ids.iter().skip(2).collect();
    assert_eq!(all, expected);
    for id in &ca {
        let owner = b.room_owner(id).await.expect("owner").expect("lease");
        assert_eq!(
            (owner.instance_id.as_str(), owner.expires_at_ms),
            ("A", 12_000)
        );
    }
    assert_eq!(
        a.room_owner("s01")
            .await
            .expect("owner")
            .map(|o| o.instance_id),
        Some("C".to_owned())
    );
    assert_eq!(a.room_owner("s00").await.expect("owner"), None);
    // A limit takes only that many; nothing is left once every room is held.
    assert_eq!(
        b.claim_orphan_rooms("B", "http://b", 3_000, 3_000, 13_000, 5)
            .await
            .expect("again"),
        Vec::<String>::new()
    );
    assert_eq!(
        b.claim_orphan_rooms("B", "http://b", 3_000, 5_000, 13_000, 100)
            .await
            .expect("young one"),
        vec!["young".to_owned()]
    );
    let later = b
        .claim_orphan_rooms("B", "http://b", 12_000, 12_000, 22_000, 5)
        .await
        .expect("after expiry");
    assert_eq!(later.len(), 5, "{later:?}");
}
