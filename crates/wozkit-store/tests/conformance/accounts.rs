//! Conformance cases about researcher accounts: unique live names, logins that expire and end
//! with a password change, a removal or "log out everywhere", and failed logins counted per
//! address and per name, all kept across a reopen.

use wozkit_store::{NewAccount, NewLogin, StoreError, hash_token, new_token};

use crate::harness::Backend;

fn account(id: &str, name: &str, access: &str) -> NewAccount {
    NewAccount {
        id: id.to_owned(),
        name: name.to_owned(),
        access: access.to_owned(),
        password_hash: format!("$argon2id$hash-of-{id}"),
        created_at_ms: 100,
    }
}

fn login(account: &str, created: u64, expires: u64) -> (String, NewLogin) {
    let (token, hash) = new_token();
    (
        token,
        NewLogin {
            token_hash: hash,
            account_id: account.to_owned(),
            created_at_ms: created,
            expires_at_ms: expires,
        },
    )
}

pub async fn accounts_names_and_removal(backend: &Backend) {
    let store = backend.open().await;
    let admin = store
        .create_account(account("a1", "admin", "owner"))
        .await
        .expect("admin");
    assert_eq!((admin.name.as_str(), admin.removed_at_ms), ("admin", None));
    store
        .create_account(account("a2", "bea", "observer"))
        .await
        .expect("bea");
    let taken = store
        .create_account(account("a3", "admin", "researcher"))
        .await;
    assert!(
        matches!(taken, Err(StoreError::Conflict { .. })),
        "a second live account named admin: {taken:?}"
    );
    let names: Vec<String> = store
        .accounts()
        .await
        .expect("list")
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["admin", "bea"]);
    let bea = store
        .account_by_name("bea")
        .await
        .expect("by name")
        .expect("bea");
    assert_eq!((bea.id.as_str(), bea.access.as_str()), ("a2", "observer"));

    assert!(store.remove_account("a2", 500).await.expect("remove"));
    assert!(
        !store.remove_account("a2", 600).await.expect("again"),
        "removed twice"
    );
    assert_eq!(store.account_by_name("bea").await.expect("by name"), None);
    let removed = store.account("a2").await.expect("by id").expect("kept row");
    assert_eq!(removed.removed_at_ms, Some(500));
    assert_eq!(
        removed.password_hash, "",
        "a removed account's hash is forgotten"
    );
    assert!(
        !store.set_account_password("a2", "new").await.expect("set"),
        "a removed account takes no password"
    );
    // The name is free again, for a new account with a new id.
    store
        .create_account(account("a4", "bea", "researcher"))
        .await
        .expect("bea again");
    assert_eq!(store.accounts().await.expect("list").len(), 2);

    assert!(
        store
            .set_account_password("a1", "changed")
            .await
            .expect("set")
    );
    store.close().await;
    let store = backend.open().await;
    let admin = store
        .account_by_name("admin")
        .await
        .expect("get")
        .expect("admin");
    assert_eq!(admin.password_hash, "changed", "kept across a reopen");
    assert_eq!(
        store
            .account_by_name("bea")
            .await
            .expect("get")
            .map(|a| a.id),
        Some("a4".to_owned())
    );
    eprintln!("accounts ok on {}", backend.name());
    store.close().await;
}

pub async fn logins_expire_and_end(backend: &Backend) {
    let store = backend.open().await;
    store
        .create_account(account("a1", "admin", "owner"))
        .await
        .expect("a1");
    store
        .create_account(account("a2", "bea", "observer"))
        .await
        .expect("a2");
    let (t1, l1) = login("a1", 1_000, 2_000);
    let (t2, l2) = login("a1", 1_000, 5_000);
    let (t3, l3) = login("a2", 1_000, 5_000);
    for l in [l1, l2, l3] {
        store.create_login(l).await.expect("login");
    }
    let found = store
        .login(&hash_token(&t1), 1_500)
        .await
        .expect("get")
        .expect("live login");
    assert_eq!(
        (found.account.name.as_str(), found.expires_at_ms),
        ("admin", 2_000)
    );
    assert_eq!(
        store.login(&hash_token(&t1), 2_000).await.expect("get"),
        None,
        "expired"
    );
    assert_eq!(store.login("not-a-hash", 1_500).await.expect("get"), None);
    let unknown = store.create_login(login("nobody", 1_000, 5_000).1).await;
    assert!(
        matches!(unknown, Err(StoreError::NotFound { .. })),
        "{unknown:?}"
    );

    // Survives a reopen.
    store.close().await;
    let store = backend.open().await;
    assert!(
        store
            .login(&hash_token(&t2), 1_500)
            .await
            .expect("get")
            .is_some()
    );

    // One login ends; the others stay.
    assert!(store.end_login(&hash_token(&t2)).await.expect("end"));
    assert!(!store.end_login(&hash_token(&t2)).await.expect("end again"));
    assert!(
        store
            .login(&hash_token(&t3), 1_500)
            .await
            .expect("get")
            .is_some()
    );

    // Log out everywhere: every login of a1, none of a2.
    let (t4, l4) = login("a1", 1_100, 5_000);
    let (t5, l5) = login("a1", 1_100, 5_000);
    store.create_login(l4).await.expect("l4");
    store.create_login(l5).await.expect("l5");
    // t1 expired at 2000 but is still stored until a later login sweeps it.
    assert!(store.end_logins("a1").await.expect("end all") >= 2);
    for t in [&t4, &t5] {
        assert_eq!(store.login(&hash_token(t), 1_500).await.expect("get"), None);
    }
    assert!(
        store
            .login(&hash_token(&t3), 1_500)
            .await
            .expect("get")
            .is_some()
    );

    // A password change ends the account's logins.
    let (t6, l6) = login("a1", 1_200, 5_000);
    store.create_login(l6).await.expect("l6");
    assert!(
        store
            .set_account_password("a1", "other")
            .await
            .expect("set")
    );
    assert_eq!(
        store.login(&hash_token(&t6), 1_500).await.expect("get"),
        None
    );

    // A removal ends them too, and a removed account gets no new login.
    assert!(store.remove_account("a2", 1_300).await.expect("remove"));
    assert_eq!(
        store.login(&hash_token(&t3), 1_500).await.expect("get"),
        None
    );
    let refused = store.create_login(login("a2", 1_400, 5_000).1).await;
    assert!(
        matches!(refused, Err(StoreError::NotFound { .. })),
        "{refused:?}"
    );
    eprintln!("logins ok on {}", backend.name());
    store.close().await;
}

pub async fn failed_logins_per_address_and_name(backend: &Backend) {
    let store = backend.open().await;
    for at in [10, 20, 30] {
        store
            .record_failed_login("10.0.0.1", "admin", at, 0)
            .await
            .expect("record");
    }
    store
        .record_failed_login("10.0.0.2", "admin", 40, 0)
        .await
        .expect("record");
    store
        .record_failed_login("10.0.0.1", "bea", 50, 0)
        .await
        .expect("record");
    let f = store
        .failed_logins("10.0.0.1", "admin", 0)
        .await
        .expect("count");
    assert_eq!(f.by_address, [10, 20, 30, 50]);
    assert_eq!(f.by_name, [10, 20, 30, 40]);
    let f = store
        .failed_logins("10.0.0.1", "admin", 25)
        .await
        .expect("since");
    assert_eq!((f.by_address, f.by_name), (vec![30, 50], vec![30, 40]));
    let f = store
        .failed_logins("10.0.0.9", "carl", 0)
        .await
        .expect("none");
    assert!(f.by_address.is_empty() && f.by_name.is_empty());

    // Kept across a reopen (the limit holds across restarts).
    store.close().await;
    let store = backend.open().await;
    let f = store
        .failed_logins("10.0.0.2", "bea", 0)
        .await
        .expect("count");
    assert_eq!((f.by_address, f.by_name), (vec![40], vec![50]));

    // A success forgets the name's failures, not the address's.
    store.clear_failed_logins("admin").await.expect("clear");
    let f = store
        .failed_logins("10.0.0.1", "admin", 0)
        .await
        .expect("count");
    assert_eq!((f.by_address, f.by_name), (vec![10, 20, 30, 50], vec![]));

    // Old failures are forgotten by a later record.
    store
        .record_failed_login("10.0.0.3", "dan", 100, 45)
        .await
        .expect("record");
    let f = store
        .failed_logins("10.0.0.1", "bea", 0)
        .await
        .expect("count");
    assert_eq!((f.by_address, f.by_name), (vec![50], vec![50]));
    eprintln!("failed logins ok on {}", backend.name());
    store.close().await;
}
