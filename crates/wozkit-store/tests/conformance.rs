//! The store conformance suite: every case runs on SQLite and, when `WOZKIT_TEST_PG_URL` is set,
//! on PostgreSQL, so both backends are held to one behaviour.

mod harness;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use harness::{Backend, message, new_session, text_of};
use wozkit_core::event::{EndReason, Role};
use wozkit_store::{
    EventCursor, NewEvent, NewParticipant, ParticipantPatch, Platform, SessionFilter,
    SessionStatus, Store, StoreError, hash_token, new_token,
};

conformance!(
    concurrent_appends_get_gap_free_ordered_seqs,
    events_after_seq,
    failed_batch_writes_nothing,
    unknown_session_is_refused,
    reopen_keeps_everything,
    participants_by_token_and_worker,
    participant_updates,
    session_listing_and_ending,
    events_page_walks_every_event,
    meta_values,
);

/// Many tasks append batches to many sessions at once. Every session's log must be numbered
/// 1..=n without gaps, hold every acknowledged event at the `seq` it was acknowledged with, keep
/// each batch contiguous, and keep each task's appends in the order they were made.
async fn concurrent_appends_get_gap_free_ordered_seqs(backend: &Backend) {
    const SESSIONS: usize = 40;
    const TASKS: usize = 120;
    const APPENDS_PER_TASK: usize = 15;
    let store = backend.open().await;
    for s in 0..SESSIONS {
        store
            .create_session(new_session(&format!("s{s:03}"), "study", 1))
            .await
            .expect("create session");
    }
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0..APPENDS_PER_TASK {
                let session = format!("s{:03}", (t * 7 + i * 3) % SESSIONS);
                let batch: Vec<NewEvent> = (0..1 + (t + i) % 3)
                    .map(|j| message(&format!("t{t}-a{i}-e{j}"), 1000 + i as u64))
                    .collect();
                let stored = store.append(&session, batch).await.expect("append");
                acked.push((session, stored));
            }
            acked
        }));
    }
    let mut acked_by_session: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    for task in tasks {
        let mut last_seq_of_task: HashMap<String, u64> = HashMap::new();
        for (session, stored) in task.await.expect("task") {
            let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
            let first = seqs[0];
            assert_eq!(
                seqs,
                (first..first + seqs.len() as u64).collect::<Vec<_>>(),
                "a batch is contiguous"
            );
            let before = last_seq_of_task.insert(session.clone(), *seqs.last().unwrap_or(&0));
            assert!(
                before.is_none_or(|b| b < first),
                "a task's appends stay in order"
            );
            for event in stored {
                assert_eq!(event.session, session);
                acked_by_session
                    .entry(session.clone())
                    .or_default()
                    .push((text_of(&event.kind).to_owned(), event.seq));
            }
        }
    }
    let mut total = 0;
    for s in 0..SESSIONS {
        let session = format!("s{s:03}");
        let log = store.events(&session, 0).await.expect("events");
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=log.len() as u64).collect::<Vec<_>>(),
            "{session} is gap-free"
        );
        let stored: HashMap<String, u64> = log
            .iter()
            .map(|e| (text_of(&e.kind).to_owned(), e.seq))
            .collect();
        let acked = acked_by_session.remove(&session).unwrap_or_default();
        assert_eq!(
            acked.len(),
            log.len(),
            "{session}: every stored event was acknowledged"
        );
        for (text, seq) in acked {
            assert_eq!(
                stored.get(&text),
                Some(&seq),
                "{session}: {text} stored where acked"
            );
        }
        let record = store
            .session(&session)
            .await
            .expect("session")
            .expect("exists");
        assert_eq!(record.last_seq, log.len() as u64);
        total += log.len();
    }
    assert!(total >= TASKS * APPENDS_PER_TASK);
    store.close().await;
}

async fn events_after_seq(backend: &Backend) {
    let store = backend.open().await;
    store
        .create_session(new_session("a", "study", 1))
        .await
        .expect("create");
    let batch: Vec<NewEvent> = (1..=10).map(|i| message(&format!("m{i}"), i)).collect();
    let stored = store.append("a", batch.clone()).await.expect("append");
    let all = store.events("a", 0).await.expect("events");
    assert_eq!(all, stored, "stored events read back exactly");
    for (event, new) in all.iter().zip(&batch) {
        assert_eq!(
            (&event.actor, &event.kind, event.at_ms),
            (&new.actor, &new.kind, new.at_ms)
        );
        assert_eq!(event.v, wozkit_core::event::EVENT_SCHEMA_VERSION);
    }
    let tail = store.events("a", 4).await.expect("events after 4");
    assert_eq!(
        tail.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (5..=10).collect::<Vec<_>>()
    );
    assert!(
        store
            .events("a", 10)
            .await
            .expect("events after last")
            .is_empty()
    );
    assert!(
        store
            .events("nobody", 0)
            .await
            .expect("unknown session")
            .is_empty()
    );
    assert!(
        store
            .append("a", Vec::new())
            .await
            .expect("empty append")
            .is_empty()
    );
    store.close().await;
}

/// A batch that cannot be stored as a whole stores nothing, and the next batch starts at the
/// `seq` the failed one would have taken.
async fn failed_batch_writes_nothing(backend: &Backend) {
    let store = backend.open().await;
    store
        .create_session(new_session("a", "study", 1))
        .await
        .expect("create");
    store
        .append("a", vec![message("first", 1)])
        .await
        .expect("append");
    let mut bad = vec![message("x", 2), message("y", 3)];
    bad.push(message("out of range", u64::MAX));
    let err = store
        .append("a", bad)
        .await
        .expect_err("time beyond i64 is refused");
    assert!(matches!(err, StoreError::OutOfRange { .. }), "{err}");
    let log = store.events("a", 0).await.expect("events");
    assert_eq!(log.len(), 1, "nothing of the failed batch was stored");
    let next = store
        .append("a", vec![message("second", 4)])
        .await
        .expect("append");
    assert_eq!(next[0].seq, 2);
    store.close().await;
}

async fn unknown_session_is_refused(backend: &Backend) {
    let store = backend.open().await;
    let err = store
        .append("ghost", vec![message("boo", 1)])
        .await
        .expect_err("refused");
    assert!(
        matches!(err, StoreError::UnknownSession(ref s) if s == "ghost"),
        "{err}"
    );
    // The refusal does not poison later requests.
    store
        .create_session(new_session("ghost", "study", 1))
        .await
        .expect("create");
    let stored = store
        .append("ghost", vec![message("boo", 2)])
        .await
        .expect("append");
    assert_eq!(stored[0].seq, 1);
    store.close().await;
}

/// Everything survives closing and reopening, and numbering continues where it stopped, both
/// after an orderly close and after the last handle is simply dropped.
async fn reopen_keeps_everything(backend: &Backend) {
    let store = backend.open().await;
    store
        .create_session(new_session("a", "study", 1))
        .await
        .expect("create");
    store
        .create_session(new_session("b", "study", 2))
        .await
        .expect("create");
    store
        .append("a", (1..=5).map(|i| message(&format!("a{i}"), i)).collect())
        .await
        .expect("a");
    store.append("b", vec![message("b1", 1)]).await.expect("b");
    store
        .end_session("b", EndReason::Finished, 99)
        .await
        .expect("end");
    let (_, hash) = new_token();
    store
        .create_participant(participant("p1", &hash, Some("W1")))
        .await
        .expect("participant");
    store
        .set_meta("researcher_password", "argon2-hash")
        .await
        .expect("meta");
    let before_a = store.events("a", 0).await.expect("events");
    store.close().await;
    drop(store);

    let store = backend.open().await;
    assert_eq!(store.events("a", 0).await.expect("events"), before_a);
    let b = store
        .session("b")
        .await
        .expect("session")
        .expect("b exists");
    assert_eq!(
        b.ended.map(|e| (e.reason, e.at_ms)),
        Some((EndReason::Finished, 99))
    );
    assert!(
        store
            .participant_by_token_hash(&hash)
            .await
            .expect("lookup")
            .is_some()
    );
    assert_eq!(
        store
            .meta("researcher_password")
            .await
            .expect("meta")
            .as_deref(),
        Some("argon2-hash")
    );
    let next = store
        .append("a", vec![message("a6", 6)])
        .await
        .expect("append");
    assert_eq!(next[0].seq, 6, "numbering continues after reopen");
    drop(store); // no close: the writer finishes on its own and releases the database

    let store = backend.open().await;
    assert_eq!(store.events("a", 5).await.expect("events").len(), 1);
    let next = store
        .append("b", vec![message("b2", 2)])
        .await
        .expect("append");
    assert_eq!(next[0].seq, 2);
    store.close().await;
}

fn participant(id: &str, token_hash: &str, worker: Option<&str>) -> NewParticipant {
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

async fn participants_by_token_and_worker(backend: &Backend) {
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

async fn participant_updates(backend: &Backend) {
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

async fn session_listing_and_ending(backend: &Backend) {
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

async fn events_page_walks_every_event(backend: &Backend) {
    let store = backend.open().await;
    let mut expected = HashSet::new();
    for (s, study) in [
        ("e1", "alpha"),
        ("e2", "beta"),
        ("e3", "alpha"),
        ("e4", "alpha"),
    ] {
        store
            .create_session(new_session(s, study, 1))
            .await
            .expect("create");
        let n = if s == "e4" { 0 } else { 5 + s.len() % 3 };
        let batch: Vec<NewEvent> = (0..n).map(|i| message(&format!("{s}-{i}"), 1)).collect();
        for e in store.append(s, batch).await.expect("append") {
            expected.insert((study, e.session, e.seq));
        }
    }
    for study in [None, Some("alpha")] {
        let mut seen = Vec::new();
        let mut cursor: Option<EventCursor> = None;
        loop {
            let page = store
                .events_page(study, cursor.as_ref(), 4)
                .await
                .expect("page");
            let Some(last) = page.last() else { break };
            assert!(page.len() <= 4);
            cursor = Some(EventCursor::after(last));
            seen.extend(page.into_iter().map(|e| (e.session, e.seq)));
        }
        let want: HashSet<(String, u64)> = expected
            .iter()
            .filter(|(st, _, _)| study.is_none_or(|w| w == *st))
            .map(|(_, s, q)| (s.clone(), *q))
            .collect();
        assert_eq!(
            seen.len(),
            want.len(),
            "each event exactly once ({study:?})"
        );
        assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), want);
        // One session after another, each in seq order.
        let mut finished: HashSet<&str> = HashSet::new();
        for pair in seen.windows(2) {
            let ((a, qa), (b, qb)) = (&pair[0], &pair[1]);
            if a == b {
                assert_eq!(*qb, qa + 1);
            } else {
                assert!(finished.insert(a), "{a} appears in two runs");
                assert_eq!(*qb, 1);
            }
        }
    }
    store.close().await;
}

async fn meta_values(backend: &Backend) {
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
