//! Conformance cases about event logs: numbering under concurrency, reading back, atomic
//! batches, durability across reopen, and paging through every event for exports.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use wozkit_core::event::EndReason;
use wozkit_store::{EventCursor, NewEvent, StoreError, new_token};

use super::records::participant;
use crate::harness::{Backend, message, new_session, text_of};

/// Many tasks append batches to many sessions at once. Every session's log must be numbered
/// 1..=n without gaps, hold every acknowledged event at the `seq` it was acknowledged with, keep
/// each batch contiguous, and keep each task's appends in the order they were made.
pub async fn concurrent_appends_get_gap_free_ordered_seqs(backend: &Backend) {
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

pub async fn events_after_seq(backend: &Backend) {
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
pub async fn failed_batch_writes_nothing(backend: &Backend) {
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

pub async fn unknown_session_is_refused(backend: &Backend) {
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
pub async fn reopen_keeps_everything(backend: &Backend) {
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

pub async fn events_page_walks_every_event(backend: &Backend) {
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

/// Many concurrent `append_once` calls with one key: exactly one stores its events, the others
/// store nothing and say so; another key, or the same key in another session, is independent;
/// a key stays used after reopening; an unknown session is refused.
pub async fn append_once_stores_one_of_concurrent_calls(backend: &Backend) {
    const CALLS: usize = 10;
    let store = backend.open().await;
    for id in ["once-a", "once-b"] {
        store
            .create_session(new_session(id, "study", 1))
            .await
            .expect("create session");
    }
    // All spawned before any is awaited, so they reach the store together.
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let events = vec![message(&format!("answer {i}"), 10)];
                store
                    .append_once("once-a", "survey/p1", events)
                    .await
                    .expect("append_once")
            })
        })
        .collect();
    let mut stored = vec![];
    for call in calls {
        if let Some(events) = call.await.expect("task") {
            stored.push(events);
        }
    }
    assert_eq!(stored.len(), 1, "exactly one call appends");
    let log = store.events("once-a", 0).await.expect("events");
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].seq, stored[0][0].seq);
    assert_eq!(text_of(&log[0].kind), text_of(&stored[0][0].kind));

    let other_key = store
        .append_once("once-a", "survey/p2", vec![message("p2", 11)])
        .await
        .expect("another key");
    assert_eq!(other_key.map(|e| e[0].seq), Some(2));
    let other_session = store
        .append_once("once-b", "survey/p1", vec![message("b", 12)])
        .await
        .expect("another session");
    assert_eq!(other_session.map(|e| e[0].seq), Some(1));
    store.close().await;
    drop(store);

    let store = backend.open().await;
    let again = store
        .append_once("once-a", "survey/p1", vec![message("late", 13)])
        .await
        .expect("after reopen");
    assert!(again.is_none(), "a used key stays used");
    assert_eq!(store.events("once-a", 0).await.expect("events").len(), 2);
    assert!(matches!(
        store.append_once("nope", "k", vec![message("x", 1)]).await,
        Err(StoreError::UnknownSession(_))
    ));
    store.close().await;
}

/// `append_after` stores only while the log ends where its writer believes: two writers that
/// both believe they hold the log (a room on an instance that stalled past its lease, and the
/// instance that took it over) cannot interleave. Of concurrent calls expecting one end,
/// exactly one stores; the others store nothing and say where the log ends.
pub async fn append_after_stores_only_onto_the_expected_end(backend: &Backend) {
    const CALLS: usize = 8;
    let store = backend.open().await;
    store
        .create_session(new_session("fenced", "study", 1))
        .await
        .expect("create session");
    let first = store
        .append_after("fenced", 0, vec![message("one", 10), message("two", 10)])
        .await
        .expect("onto the empty log");
    assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);

    // Another writer appends: a writer still expecting the end at 2 is refused.
    store
        .append("fenced", vec![message("someone else", 11)])
        .await
        .expect("plain append");
    match store
        .append_after("fenced", 2, vec![message("stale", 12)])
        .await
    {
        Err(StoreError::LogMoved {
            session,
            after,
            last,
        }) => {
            assert_eq!((session.as_str(), after, last), ("fenced", 2, 3));
        }
        other => panic!("a stale writer must be refused, got {other:?}"),
    }

    // Concurrent writers expecting the same end: exactly one stores.
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .append_after("fenced", 3, vec![message(&format!("race {i}"), 13)])
                    .await
            })
        })
        .collect();
    let mut stored = 0;
    for call in calls {
        match call.await.expect("task") {
            Ok(events) => {
                assert_eq!(events[0].seq, 4);
                stored += 1;
            }
            Err(StoreError::LogMoved { last: 4, .. }) => {}
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!(stored, 1, "exactly one of the racing writers stores");
    let log = store.events("fenced", 0).await.expect("events");
    let texts: Vec<&str> = log.iter().map(|e| text_of(&e.kind)).collect();
    assert_eq!(
        texts.len(),
        4,
        "nothing of the refused writers is stored: {texts:?}"
    );
    assert!(!texts.contains(&"stale"));
    assert!(matches!(
        store.append_after("nope", 0, vec![message("x", 1)]).await,
        Err(StoreError::UnknownSession(_))
    ));
    store.close().await;
}
