//! Behaviour only the SQLite backend has: the data directory lock and the locations `open`
//! accepts.

mod harness;

use std::time::Duration;
use wozkit_store::prelude::*;

use wozkit_store::{
    SessionFilter, SqliteOptions, SqliteStore, Store, StoreError, open, open_snapshot,
    sqlite::DB_FILE,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_store_on_the_same_file_is_refused_until_the_first_closes() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join(DB_FILE);
    let first = SqliteStore::open_with(&path, SqliteOptions::default())
        .await
        .expect("open");
    let impatient = SqliteOptions {
        lock_wait: Duration::from_millis(100),
        ..SqliteOptions::default()
    };
    let second = SqliteStore::open_with(&path, impatient.clone()).await;
    assert!(
        matches!(second, Err(StoreError::Locked(_))),
        "{:?}",
        second.err()
    );
    first.close().await;
    let second = SqliteStore::open_with(&path, impatient)
        .await
        .expect("free after close");
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_accepts_directories_and_sqlite_urls() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data = dir.path().join("wozkit-data");
    let store = open(&data.display().to_string())
        .await
        .expect("data directory");
    store.set_meta("k", "v").await.expect("set");
    store.close().await;
    assert!(data.join(DB_FILE).is_file());

    let store = open(&format!("sqlite:{}", data.join(DB_FILE).display()))
        .await
        .expect("sqlite:FILE");
    assert_eq!(store.meta("k").await.expect("get").as_deref(), Some("v"));
    store.close().await;

    let store = open(&format!("sqlite://{}", data.display()))
        .await
        .expect("sqlite://DIR");
    assert_eq!(store.meta("k").await.expect("get").as_deref(), Some("v"));
    store.close().await;

    for bad in ["", "sqlite:", "mysql://localhost/db"] {
        let err = open(bad).await.err();
        assert!(
            matches!(err, Some(StoreError::Location { .. })),
            "{bad:?}: {err:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_reads_beside_the_writer_and_keeps_its_view() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let writer = SqliteStore::open_dir(dir.path()).await.expect("open");
    writer
        .create_session(harness::new_session("s1", "study", 1_000))
        .await
        .expect("create");
    writer
        .append("s1", vec![harness::message("one", 1_001)])
        .await
        .expect("append");

    // The writer holds the directory's lock; a snapshot opens anyway.
    let snapshot = open_snapshot(&dir.path().display().to_string())
        .await
        .expect("a snapshot opens beside the writer");
    assert_eq!(snapshot.events("s1", 0).await.expect("read").len(), 1);

    // What the writer commits afterwards is not in the snapshot: every query of one export
    // sees the same state.
    writer
        .append("s1", vec![harness::message("two", 1_002)])
        .await
        .expect("append");
    writer
        .create_session(harness::new_session("s2", "study", 2_000))
        .await
        .expect("create");
    assert_eq!(snapshot.events("s1", 0).await.expect("read").len(), 1);
    let listed = snapshot
        .list_sessions(&SessionFilter::default())
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].last_seq, 1);

    // It cannot write, and says so.
    let refused = snapshot.set_meta("k", "v").await;
    assert!(matches!(refused, Err(StoreError::ReadOnly)), "{refused:?}");
    snapshot.close().await;

    // A new snapshot sees the new state.
    let later = open_snapshot(&dir.path().display().to_string())
        .await
        .expect("second snapshot");
    assert_eq!(later.events("s1", 0).await.expect("read").len(), 2);
    later.close().await;
    writer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_nothing_is_a_clear_error_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let missing = dir.path().join("never-served");
    let err = open_snapshot(&missing.display().to_string()).await.err();
    assert!(
        matches!(&err, Some(StoreError::Location { reason, .. }) if reason.contains("no wozkit database")),
        "{err:?}"
    );
    assert!(
        !missing.exists(),
        "a read must not create the data directory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_reads_items_and_leases() {
    use wozkit_core::event::ItemPool;
    use wozkit_store::{ClaimRequest, EvalItem};
    let dir = tempfile::tempdir().expect("temporary directory");
    let location = dir.path().display().to_string();
    let store = open(&location).await.expect("open");
    let item = EvalItem {
        id: "i1".to_owned(),
        pool: ItemPool::Item,
        dialogues: vec!["d1".to_owned()],
        needed: 2,
    };
    store.register_items("st", &[item]).await.expect("register");
    let claim = ClaimRequest {
        study_id: "st".to_owned(),
        worker: "w1".to_owned(),
        pool: ItemPool::Item,
        lease_id: "l1".to_owned(),
        now_ms: 0,
        lease_ms: 100,
        max_per_worker: None,
        prefer: vec![],
    };
    let lease = store.claim(claim).await.expect("claim").expect("lease");
    let snapshot = open_snapshot(&location).await.expect("snapshot");
    assert_eq!(snapshot.leases("st").await.expect("leases"), [lease]);
    let counts = snapshot.item_counts("st", 50).await.expect("counts");
    assert_eq!((counts.len(), counts[0].active), (1, 1));
    snapshot.close().await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_are_managed_beside_a_running_writer() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let location = dir.path().display().to_string();
    let server = open(&location).await.expect("open");
    let admin = wozkit_store::open_accounts(&location)
        .await
        .expect("open beside the writer");
    let created = admin
        .create_account(wozkit_store::NewAccount {
            id: "a1".into(),
            name: "bea".into(),
            access: "observer".into(),
            password_hash: "h".into(),
            created_at_ms: 1,
        })
        .await
        .expect("create an account beside the writer");
    assert_eq!(created.name, "bea");
    // The server sees it at once.
    let seen = server.account_by_name("bea").await.expect("read");
    assert_eq!(seen.map(|a| a.id), Some("a1".to_owned()));
    // Anything that is not about accounts is refused there.
    let refused = admin
        .create_session(harness::new_session("s1", "study", 1))
        .await;
    assert!(matches!(refused, Err(StoreError::ReadOnly)), "{refused:?}");
    // The server still writes, accounts included.
    assert!(server.set_account_password("a1", "h2").await.expect("set"));
    server
        .create_session(harness::new_session("s1", "study", 1))
        .await
        .expect("server writes");
    assert_eq!(
        admin
            .account("a1")
            .await
            .expect("read")
            .map(|a| a.password_hash),
        Some("h2".to_owned())
    );
    admin.close().await;
    server.close().await;
    // Nobody holds the directory now: the ordinary store.
    let alone = wozkit_store::open_accounts(&location).await.expect("open");
    alone
        .create_session(harness::new_session("s2", "study", 1))
        .await
        .expect("writes everything");
    alone.close().await;
}

/// A disk that fills up, made by capping the database's pages: every write past the cap fails
/// with a clear "full" error (each request of a failed group commit gets it; none hangs), every
/// append that was answered with its events is in the log, and once the cap is lifted (space
/// returns) the same store writes again, numbering on from the last stored event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_each_write_clearly_and_writing_resumes_when_space_returns() {
    use harness::{message, new_session, text_of};
    use std::sync::Arc;

    let dir = tempfile::tempdir().expect("temporary directory");
    let store = Arc::new(
        SqliteStore::open_with(dir.path().join(DB_FILE), SqliteOptions::default())
            .await
            .expect("open"),
    );
    let sessions: Vec<String> = (0..6).map(|i| format!("full-{i}")).collect();
    for s in &sessions {
        store
            .create_session(new_session(s, "study", 1))
            .await
            .expect("create");
    }
    store.cap_pages(Some(4)).await.expect("cap");

    // Six writers append concurrently (so group commits hold several of them) until each has
    // been refused a few times; each keeps the events it was answered with.
    let filler = "x".repeat(600);
    let writers = sessions.iter().map(|s| {
        let (store, s, filler) = (Arc::clone(&store), s.clone(), filler.clone());
        tokio::spawn(async move {
            let (mut stored, mut refusals) = (vec![], vec![]);
            for i in 0..2_000 {
                let text = format!("{s} {i} {filler}");
                match store.append(&s, vec![message(&text, 2)]).await {
                    Ok(events) => stored.extend(events),
                    Err(e) => {
                        refusals.push(e);
                        if refusals.len() == 3 {
                            break;
                        }
                    }
                }
            }
            (s, stored, refusals)
        })
    });
    let mut acknowledged = vec![];
    for w in writers {
        let w = tokio::time::timeout(Duration::from_secs(120), w)
            .await
            .expect("every write is answered, none hangs")
            .expect("writer task");
        acknowledged.push(w);
    }
    for (s, stored, refusals) in &acknowledged {
        assert_eq!(refusals.len(), 3, "{s} never filled the capped database");
        for e in refusals {
            assert!(e.is_storage_full(), "not a full-disk error: {e:?}");
            assert!(e.to_string().contains("full"), "unclear message: {e}");
        }
        let log = store.events(s, 0).await.expect("events");
        assert_eq!(
            &log, stored,
            "{s}: the log is not exactly the acknowledged appends"
        );
    }
    assert!(
        store
            .set_meta("while-full", &filler.repeat(20))
            .await
            .is_err(),
        "a write that needs new pages fails while full"
    );

    // Space returns: every session takes appends again, numbered on without a gap.
    store.cap_pages(None).await.expect("lift the cap");
    for (s, stored, _) in &acknowledged {
        let again = store
            .append(s, vec![message("after", 3)])
            .await
            .expect("appends once space returns");
        assert_eq!(again[0].seq, stored.len() as u64 + 1);
        let log = store.events(s, 0).await.expect("events");
        assert_eq!(log.len(), stored.len() + 1);
        assert_eq!(text_of(&log[stored.len()].kind), "after");
    }
    store
        .set_meta("after", &filler.repeat(20))
        .await
        .expect("other writes work again");
    store.close().await;
}
