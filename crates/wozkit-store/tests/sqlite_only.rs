//! Behaviour only the SQLite backend has: the data directory lock and the locations `open`
//! accepts.

use std::time::Duration;

use wozkit_store::{SqliteOptions, SqliteStore, Store, StoreError, open, sqlite::DB_FILE};

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
