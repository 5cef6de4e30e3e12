//! Conformance cases about the records beside the logs: participants (lookup by token hash
//! and by crowd worker, updates), sessions (listing, filters, ending) and settings.

use std::collections::BTreeMap;

use wozkit_core::event::{EndReason, Role};
use wozkit_store::{
    NewParticipant, ParticipantPatch, Platform, SessionFilter, SessionStatus, StoreError,
    hash_token, new_token,
};

use crate::harness::{Backend, message, new_session};

pub fn participant(id: &str, token_hash: &str, worker: Option<&str>) -> NewParticipant {
    NewParticipant {
        id: id.to_owned(),
        token_hash: token_hash.to_owned(),
        study_id: "study".to_owned(),
        platform: Platform::Prolific,
        worker_id: worker.map(str::to_owned),
        external_ids: BTreeMap::from([
            ("PROLIFIC_PID".to_owned(), worker.unwrap_or("").to_owned()),
            ("STUDY_ID".to_owned(), "st-1".to_owned()),
        ]),
        flow_step: "consent".to_owned(),
        created_at_ms: 5,
    }
}

pub async fn participants_by_token_and_worker(backend: &Backend) {
    let store = backend.open().await;
    let (token, hash) = new_token();
    let created = store
        .create_participant(participant("p1", &hash, Some("W1")))
        .await
        .expect("p1");
    assert_eq!((created.role, created.session_id.as_deref()), (None, None));
    let found = store
        .participant_by_token_hash(&hash_token(&token))
        .await
        .expect("lookup");
    assert_eq!(found.as_ref(), Some(&created));
    assert_eq!(
        store.participant("p1").await.expect("by id").as_ref(),
        Some(&created)
    );
    assert!(
        store
            .participant_by_token_hash(&hash_token("wrong"))
            .await
            .expect("miss")
            .is_none()
    );

    let returning = store
        .participant_by_worker("study", Platform::Prolific, "W1")
        .await
        .expect("by worker");
    assert_eq!(returning.map(|p| p.id), Some("p1".to_owned()));
    for (study, platform, worker) in [
        ("other", Platform::Prolific, "W1"),
        ("study", Platform::Mturk, "W1"),
        ("study", Platform::Prolific, "W2"),
    ] {
        let miss = store
            .participant_by_worker(study, platform, worker)
            .await
            .expect("lookup");
        assert!(miss.is_none(), "{study}/{platform:?}/{worker}");
    }

    let (_, hash2) = new_token();
    let again = store
        .create_participant(participant("p2", &hash2, Some("W1")))
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "same worker twice: {again:?}"
    );
    let same_token = store
        .create_participant(participant("p3", &hash, Some("W3")))
        .await;
    assert!(
        matches!(same_token, Err(StoreError::Conflict { .. })),
        "{same_token:?}"
    );
    // Anonymous lab links have no worker id and never collide.
    for id in ["lab1", "lab2"] {
        let mut new = participant(id, &new_token().1, None);
        new.platform = Platform::Lab;
        store
            .create_participant(new)
            .await
            .expect("anonymous participant");
    }
    store.close().await;
}

pub async fn participant_updates(backend: &Backend) {
    let store = backend.open().await;
    let (_, hash) = new_token();
    store
        .create_participant(participant("p1", &hash, Some("W1")))
        .await
        .expect("create");
    store
        .create_session(new_session("s1", "study", 1))
        .await
        .expect("session");

    let paired = store
        .update_participant(
            "p1",
            ParticipantPatch {
                role: Some(Some(Role::Wizard)),
                session_id: Some(Some("s1".to_owned())),
                flow_step: Some("room".to_owned()),
                ..ParticipantPatch::default()
            },
        )
        .await
        .expect("pair");
    assert_eq!(paired.role, Some(Role::Wizard));
    assert_eq!(paired.session_id.as_deref(), Some("s1"));
    assert_eq!(paired.flow_step, "room");
    assert_eq!(paired.completion_code, None);
    let in_session = store
        .participants_in_session("s1")
        .await
        .expect("in session");
    assert_eq!(in_session, vec![paired.clone()]);

    let done = store
        .update_participant(
            "p1",
            ParticipantPatch {
                completion_code: Some(Some("C0DE".to_owned())),
                ..ParticipantPatch::default()
            },
        )
        .await
        .expect("complete");
    assert_eq!(done.completion_code.as_deref(), Some("C0DE"));
    assert_eq!(
        (done.role, done.flow_step.as_str()),
        (Some(Role::Wizard), "room"),
        "kept"
    );

    let unpaired = store
        .update_participant(
            "p1",
            ParticipantPatch {
                session_id: Some(None),
                ..ParticipantPatch::default()
            },
        )
        .await
        .expect("unpair");
    assert_eq!(unpaired.session_id, None);
    assert_eq!(
        store
            .participant_by_token_hash(&hash)
            .await
            .expect("lookup"),
        Some(unpaired)
    );

    let missing = store
        .update_participant("nobody", ParticipantPatch::default())
        .await;
    assert!(
        matches!(missing, Err(StoreError::NotFound { .. })),
        "{missing:?}"
    );
    store.close().await;
}

pub async fn session_listing_and_ending(backend: &Backend) {
    let store = backend.open().await;
    for (i, (id, study)) in [
        ("s1", "alpha"),
        ("s2", "alpha"),
        ("s3", "beta"),
        ("s4", "alpha"),
    ]
    .into_iter()
    .enumerate()
    {
        let created = store
            .create_session(new_session(id, study, 100 + i as u64))
            .await
            .expect("create");
        assert_eq!(
            (created.last_seq, created.ended, created.seed),
            (0, None, u64::MAX - 7)
        );
    }
    let dup = store.create_session(new_session("s1", "alpha", 1)).await;
    assert!(matches!(dup, Err(StoreError::Conflict { .. })), "{dup:?}");
    store
        .append("s2", vec![message("x", 1), message("y", 2)])
        .await
        .expect("append");

    assert!(
        store
            .end_session("s2", EndReason::TimeLimit, 500)
            .await
            .expect("end")
    );
    assert!(
        !store
            .end_session("s2", EndReason::Aborted, 600)
            .await
            .expect("again")
    );
    let unknown = store.end_session("nope", EndReason::Aborted, 1).await;
    assert!(
        matches!(unknown, Err(StoreError::UnknownSession(_))),
        "{unknown:?}"
    );

    let ids =
        |list: Vec<wozkit_store::SessionRecord>| list.into_iter().map(|s| s.id).collect::<Vec<_>>();
    let all = store
        .list_sessions(&SessionFilter::default())
        .await
        .expect("list");
    assert_eq!(ids(all.clone()), ["s1", "s2", "s3", "s4"]);
    let s2 = all.iter().find(|s| s.id == "s2").expect("s2");
    assert_eq!(s2.last_seq, 2);
    assert_eq!(
        s2.ended.map(|e| (e.reason, e.at_ms)),
        Some((EndReason::TimeLimit, 500))
    );
    assert!(!s2.is_live());

    let alpha_live = SessionFilter {
        study_id: Some("alpha".to_owned()),
        status: Some(SessionStatus::Live),
        ..SessionFilter::default()
    };
    assert_eq!(
        ids(store.list_sessions(&alpha_live).await.expect("list")),
        ["s1", "s4"]
    );
    assert_eq!(store.count_sessions(&alpha_live).await.expect("count"), 2);
    let ended = SessionFilter {
        status: Some(SessionStatus::Ended),
        ..SessionFilter::default()
    };
    assert_eq!(
        ids(store.list_sessions(&ended).await.expect("list")),
        ["s2"]
    );
    let page = SessionFilter {
        limit: Some(2),
        offset: 1,
        ..SessionFilter::default()
    };
    assert_eq!(
        ids(store.list_sessions(&page).await.expect("page")),
        ["s2", "s3"]
    );
    assert_eq!(
        store
            .count_sessions(&page)
            .await
            .expect("count ignores paging"),
        4
    );
    assert!(store.session("nope").await.expect("lookup").is_none());
    store.close().await;
}

pub async fn meta_values(backend: &Backend) {
    let store = backend.open().await;
    assert_eq!(store.meta("k").await.expect("get"), None);
    store.set_meta("k", "one").await.expect("set");
    store.set_meta("k", "two").await.expect("replace");
    store.set_meta("other", "x").await.expect("set");
    assert_eq!(store.meta("k").await.expect("get").as_deref(), Some("two"));
    assert_eq!(
        store.meta("other").await.expect("get").as_deref(),
        Some("x")
    );
    eprintln!("meta values ok on {}", backend.name());
    store.close().await;
}

/// Concurrent increments of one counter, through two opened stores where the backend allows
/// two (PostgreSQL: two instances), each get a different number, and together exactly 1..=N.
pub async fn meta_increments_are_atomic(backend: &Backend) {
    const N: i64 = 64;
    let first = backend.open().await;
    let second = match backend {
        Backend::Postgres(_) => backend.open().await,
        // One process holds a SQLite directory; its handle is shared instead.
        Backend::Sqlite(_) => first.clone(),
    };
    assert_eq!(first.meta_increment("other").await.expect("fresh key"), 1);
    let mut tasks = Vec::new();
    for i in 0..N {
        let store = if i % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        tasks.push(tokio::spawn(async move {
            store.meta_increment("count").await.expect("increment")
        }));
    }
    let mut got = Vec::new();
    for task in tasks {
        got.push(task.await.expect("task"));
    }
    got.sort_unstable();
    assert_eq!(
        got,
        (1..=N).collect::<Vec<_>>(),
        "each call gets its own number"
    );
    assert_eq!(
        first.meta("count").await.expect("get"),
        Some(N.to_string()),
        "the stored value is the last number handed out"
    );
    assert_eq!(
        first.meta("other").await.expect("get").as_deref(),
        Some("1"),
        "another key counts apart"
    );
    first.set_meta("text", "not a number").await.expect("set");
    assert!(
        first.meta_increment("text").await.is_err(),
        "a value that is not an integer is refused"
    );
    assert_eq!(
        first.meta("text").await.expect("get").as_deref(),
        Some("not a number"),
        "a refused increment changes nothing"
    );
    first.set_meta("preset", "41").await.expect("set");
    assert_eq!(
        second
            .meta_increment("preset")
            .await
            .expect("from a set value"),
        42
    );
    eprintln!("meta increments ok on {}", backend.name());
    second.close().await;
    first.close().await;
}

pub async fn participants_listed_in_bulk(backend: &Backend) {
    let store = backend.open().await;
    assert_eq!(store.list_participants(None).await.expect("empty"), vec![]);
    let mut made = vec![];
    for (id, study, at) in [("b", "study", 7), ("a", "other", 7), ("c", "study", 3)] {
        let (_, hash) = new_token();
        let mut new = participant(id, &hash, None);
        new.study_id = study.to_owned();
        new.platform = Platform::Lab;
        new.created_at_ms = at;
        made.push(store.create_participant(new).await.expect("create"));
    }
    store
        .create_session(new_session("s1", "study", 1))
        .await
        .expect("session");
    let placed = store
        .update_participant(
            "b",
            ParticipantPatch {
                role: Some(Some(Role::User)),
                session_id: Some(Some("s1".to_owned())),
                completion_code: Some(Some("CODE".to_owned())),
                ..ParticipantPatch::default()
            },
        )
        .await
        .expect("place");
    let [b, a, c] = [made[0].clone(), made[1].clone(), made[2].clone()];
    assert_ne!(placed, b, "the update shows");
    // Ordered by creation time, then id; placed or not; as stored now.
    assert_eq!(
        store.list_participants(None).await.expect("all"),
        vec![c.clone(), a, placed.clone()]
    );
    assert_eq!(
        store
            .list_participants(Some("study"))
            .await
            .expect("one study"),
        vec![c, placed]
    );
    assert_eq!(
        store
            .list_participants(Some("none"))
            .await
            .expect("no study"),
        vec![]
    );
    store.close().await;
}

/// Concurrent swaps expecting the same value, through two opened stores where the backend
/// allows two: exactly one wins; a swap expecting another value, or absence of a present key,
/// changes nothing.
pub async fn meta_swaps_have_one_winner(backend: &Backend) {
    const N: usize = 32;
    let first = backend.open().await;
    let second = match backend {
        Backend::Postgres(_) => backend.open().await,
        Backend::Sqlite(_) => first.clone(),
    };
    for expected in [None, Some("open")] {
        let mut tasks = Vec::new();
        for i in 0..N {
            let store = if i % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            let expected = expected.map(str::to_string);
            tasks.push(tokio::spawn(async move {
                let new = match &expected {
                    None => "open".to_string(),
                    Some(_) => format!("claimed by {i}"),
                };
                store
                    .meta_swap("claim", expected.as_deref(), &new)
                    .await
                    .expect("swap")
            }));
        }
        let mut won = 0;
        for task in tasks {
            won += usize::from(task.await.expect("task"));
        }
        assert_eq!(won, 1, "exactly one swap from {expected:?} wins");
    }
    let now = first.meta("claim").await.expect("get").expect("set");
    assert!(now.starts_with("claimed by "), "{now}");
    assert!(
        !first
            .meta_swap("claim", Some("open"), "again")
            .await
            .expect("swap")
    );
    assert!(!first.meta_swap("claim", None, "again").await.expect("swap"));
    assert_eq!(first.meta("claim").await.expect("get"), Some(now.clone()));
    assert!(
        first
            .meta_swap("claim", Some(&now), "released")
            .await
            .expect("swap")
    );
    assert_eq!(
        first.meta("claim").await.expect("get").as_deref(),
        Some("released")
    );
    eprintln!("meta swaps ok on {}", backend.name());
    first.close().await;
}
