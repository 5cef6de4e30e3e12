//! One lobby across instances: two server instances share one PostgreSQL database (each with its
//! own connection pool, as separate processes would). A participant waiting on one instance is
//! paired with a partner arriving on the other, both told the same session; the same crowd
//! worker on both instances is never paired with itself; pairing is first come first served
//! whichever instance each participant reached. A newcomer without a role gets the one the shared
//! queue lacks (ties alternating across instances), and each instance's console counts who waits
//! on the other. Researcher logins and the failed-login limit hold across instances, since both
//! live in the store.
//!
//! Needs `WOZKIT_TEST_PG_URL` (see `.ci/start-postgres.sh`): without it each test prints why it
//! did nothing and passes, unless `WOZKIT_TEST_PG_REQUIRED` is set, which makes it fail.

use std::net::SocketAddr;
use std::time::Duration;

use wozkit_server::Tunables;
use wozkit_store::Store;
use wozkit_store::testing::TestDatabase;

use crate::client::{Client, Ws, http};
use crate::helpers::{TestApp, Tiny, fast, next_figures, open_live, spawn_app_on, urlencoding};

/// One server instance on its own pool of the shared database.
async fn instance(id: &str, db: &TestDatabase) -> TestApp {
    let tunables = Tunables {
        instance_id: id.to_owned(),
        sole_instance: false,
        ..fast()
    };
    spawn_app_on(&db.url, Tiny::default().study(), tunables).await
}

/// Two instances, `a` and `b`, on a fresh database; `None` (with a note) without PostgreSQL.
async fn two(case: &str) -> Option<(TestDatabase, TestApp, TestApp)> {
    let db = TestDatabase::create(case).await?;
    let a = instance("instance-a", &db).await;
    let b = instance("instance-b", &db).await;
    Some((db, a, b))
}

async fn finish(db: TestDatabase, mut a: TestApp, mut b: TestApp) {
    a.stop().await;
    b.stop().await;
    a.store.close().await;
    b.store.close().await;
    db.drop_database().await;
}

/// A participant whose waiting socket has said hello and been told it waits.
async fn waiting(c: &Client) -> Ws {
    c.accept_pages().await;
    let mut ws = c.ws().await;
    ws.hello(0).await;
    let first = ws
        .until(|v| v["type"] == "waiting" || v["type"] == "paired")
        .await;
    assert_eq!(first["type"], "waiting", "{first}");
    ws
}

/// The session a socket is paired into.
async fn session_of(ws: &mut Ws) -> String {
    ws.until_type("paired").await["session"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_user_waiting_on_one_instance_is_paired_with_a_wizard_on_the_other() {
    let Some((db, a, b)) = two("shared_lobby_pair").await else {
        return;
    };
    let user = a.join("participant=ann&role=user").await;
    let mut wu = waiting(&user).await;
    let wizard = b.join("participant=bob&role=wizard").await;
    wizard.accept_pages().await;
    let mut ww = wizard.ws().await;
    ww.hello(0).await;
    let on_b = session_of(&mut ww).await;
    let on_a = session_of(&mut wu).await;
    assert_eq!(on_a, on_b, "both are told the same session");
    // Both are seated in that session, as either instance reads it.
    let seated = a
        .store
        .participants_in_session(&on_a)
        .await
        .expect("participants");
    assert_eq!(seated.len(), 2);
    assert!(b.store.waiters(None).await.expect("waiters").is_empty());
    drop((wu, ww));
    finish(db, a, b).await;
}

#[tokio::test]
async fn the_same_worker_on_both_instances_is_never_paired_with_itself() {
    let Some((db, a, b)) = two("shared_lobby_worker").await else {
        return;
    };
    let first = a.join("PROLIFIC_PID=same&STUDY_ID=s&SESSION_ID=1").await;
    let mut w1 = waiting(&first).await;
    // The same worker from another browser (the same Prolific submission), reaching the other
    // instance: the same participant.
    let again = b.join("PROLIFIC_PID=same&STUDY_ID=s&SESSION_ID=1").await;
    assert_ne!(first.cookie, again.cookie);
    let mut w2 = waiting(&again).await;
    // The first tab, on the other instance, is told at once that it was replaced.
    let replaced = w1.until_type("error").await;
    assert_eq!(replaced["code"], "replaced", "{replaced}");
    let listed = b.store.waiters(None).await.expect("waiters");
    assert_eq!(listed.len(), 1, "one place for one participant: {listed:?}");
    assert!(
        !listed[0].instance.is_empty(),
        "the place names its instance"
    );
    // Nobody else is there: the worker is not paired with itself, whatever the waiting updates.
    let alone = tokio::time::timeout(
        Duration::from_millis(800),
        w2.until(|v| v["type"] == "paired"),
    )
    .await;
    assert!(alone.is_err(), "paired with itself");
    // Another worker on instance a is paired with the second tab, on instance b.
    let other = a.join("PROLIFIC_PID=other&STUDY_ID=s&SESSION_ID=3").await;
    other.accept_pages().await;
    let mut wo = other.ws().await;
    wo.hello(0).await;
    let mine = wo.until_type("paired").await;
    let theirs = w2.until_type("paired").await;
    assert_eq!(mine["session"], theirs["session"]);
    assert_ne!(mine["role"], theirs["role"]);
    drop((w1, wo));
    finish(db, a, b).await;
}

#[tokio::test]
async fn pairing_is_first_come_first_served_across_instances() {
    let Some((db, a, b)) = two("shared_lobby_order").await else {
        return;
    };
    // Users arrive in turn on alternate instances.
    let u1 = a.join("participant=u1&role=user").await;
    let mut w_u1 = waiting(&u1).await;
    let u2 = b.join("participant=u2&role=user").await;
    let mut w_u2 = waiting(&u2).await;
    let u3 = a.join("participant=u3&role=user").await;
    let mut w_u3 = waiting(&u3).await;
    assert_eq!(
        w_u3.until(|v| v["type"] == "waiting" && v["position"] == 3)
            .await["position"],
        3,
        "places count the users waiting on every instance"
    );
    // Wizards arrive on the other instances: the users are taken in the order they came.
    let mut order = vec![];
    for (i, instance) in [&b, &a, &b].into_iter().enumerate() {
        let wizard = instance
            .join(&format!("participant=wiz{i}&role=wizard"))
            .await;
        wizard.accept_pages().await;
        let mut ws = wizard.ws().await;
        ws.hello(0).await;
        order.push(session_of(&mut ws).await);
    }
    assert_eq!(session_of(&mut w_u1).await, order[0], "u1 came first");
    assert_eq!(session_of(&mut w_u2).await, order[1], "u2 came second");
    assert_eq!(session_of(&mut w_u3).await, order[2], "u3 came third");
    finish(db, a, b).await;
}

/// The role the crowd worker `pid` was given in the tiny study.
async fn role_of(store: &dyn Store, pid: &str) -> String {
    store
        .participant_by_worker("tiny", wozkit_store::Platform::Prolific, pid)
        .await
        .expect("participant")
        .and_then(|p| p.role)
        .unwrap_or_else(|| panic!("{pid} has no role"))
        .as_str()
        .to_owned()
}

/// A crowd worker's entry link (crowd links never choose a role).
fn crowd(pid: &str) -> String {
    format!("PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID={pid}")
}

#[tokio::test]
async fn newcomers_on_alternate_instances_get_the_role_the_shared_queue_lacks() {
    let Some((db, a, b)) = two("shared_lobby_roles").await else {
        return;
    };
    // Nobody waits: roles balance over everyone present on either instance (still on their
    // pages), and a tie is broken by the count both instances share, the wizard first: n0 ties
    // (wizard), n1 fills the missing user, n2 ties again (the second tie: user), n3 fills the
    // missing wizard.
    let mut got = vec![];
    for (i, instance) in [&a, &b, &a, &b].into_iter().enumerate() {
        let pid = format!("n{i}");
        instance.join(&crowd(&pid)).await;
        got.push(role_of(a.store.as_ref(), &pid).await);
    }
    assert_eq!(got, ["wizard", "user", "user", "wizard"]);
    // A wizard waits on a: newcomers on b become users while that queue lacks them.
    let w = a.join(&crowd("n4")).await;
    assert_eq!(role_of(b.store.as_ref(), "n4").await, "wizard");
    let ws = waiting(&w).await;
    for pid in ["n5", "n6"] {
        b.join(&crowd(pid)).await;
        assert_eq!(role_of(b.store.as_ref(), pid).await, "user", "{pid}");
    }
    drop(ws);
    finish(db, a, b).await;
}

/// Logs in as the admin on `addr`; returns the cookie.
async fn admin_cookie(addr: SocketAddr) -> String {
    let res = try_login(addr, "admin", "letmein").await;
    assert_eq!(res.status, 303, "{}", res.body);
    res.header("set-cookie")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The first `figures` event of `/researcher/live` on `addr`, as JSON.
async fn live_figures(addr: SocketAddr, cookie: &str) -> serde_json::Value {
    let (mut live, _) = open_live(addr, cookie).await;
    next_figures(&mut live).await
}

#[tokio::test]
async fn the_console_of_one_instance_counts_who_waits_on_the_other() {
    let Some((db, a, b)) = two("shared_lobby_console").await else {
        return;
    };
    wozkit_server::auth::ensure_password(a.store.as_ref(), Some("letmein"))
        .await
        .expect("password");
    let cookie = admin_cookie(a.addr).await;
    let user = b.join("participant=ann&role=user").await;
    let ws = waiting(&user).await;
    // The page's waiting room and the study's card on a.
    let page = http(a.addr, "GET", "/researcher", &[("Cookie", &cookie)], "").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains("<li>tiny: 1 user(s), 0 wizard(s) waiting</li>"),
        "the waiting room on a: {}",
        page.body
    );
    assert!(
        page.body
            .contains("<dd data-figure=\"waiting_users\">1</dd>"),
        "the card on a: {}",
        page.body
    );
    // The live figures on a.
    let figures = live_figures(a.addr, &cookie).await;
    let tiny = figures["studies"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["study"] == "tiny"))
        .unwrap_or_else(|| panic!("no figures for tiny: {figures}"))
        .clone();
    assert_eq!(tiny["waiting_users"], 1, "{tiny}");
    assert_eq!(tiny["waiting_wizards"], 0, "{tiny}");
    drop(ws);
    finish(db, a, b).await;
}

/// A place in the table as an instance killed before giving it up would leave it.
fn leftover(participant: &str, instance: &str) -> wozkit_store::store::NewWaiter {
    let now = wozkit_server::app::now_ms();
    wozkit_store::store::NewWaiter {
        participant: participant.to_owned(),
        study_id: "elsewhere".to_owned(),
        pair_key: None,
        role: wozkit_core::event::Role::User,
        worker: None,
        instance: instance.to_owned(),
        conn: 1,
        front: false,
        since_ms: now,
        heard_at_ms: now,
    }
}

#[tokio::test]
async fn an_instance_removes_the_places_its_earlier_run_left() {
    let Some((db, a, b)) = two("shared_lobby_leftovers").await else {
        return;
    };
    for (participant, instance) in [("left-on-a", "instance-a"), ("left-on-b", "instance-b")] {
        a.store
            .join_lobby(leftover(participant, instance), 0)
            .await
            .expect("a leftover place");
    }
    // The first participant waiting on a: a's leftover is gone, b's place is b's business.
    let user = a.join("participant=ann&role=user").await;
    let ws = waiting(&user).await;
    let mut left: Vec<String> = b
        .store
        .waiters(None)
        .await
        .expect("waiters")
        .into_iter()
        .map(|w| w.participant)
        .collect();
    left.sort();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&"left-on-b".to_owned()), "{left:?}");
    assert!(!left.contains(&"left-on-a".to_owned()), "{left:?}");
    drop(ws);
    finish(db, a, b).await;
}

/// POSTs the login form to `addr`.
async fn try_login(addr: SocketAddr, name: &str, password: &str) -> crate::client::Response {
    let origin = format!("http://{addr}");
    http(
        addr,
        "POST",
        "/researcher/login",
        &[
            ("Origin", origin.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &format!(
            "name={}&password={}&next=/researcher",
            urlencoding(name),
            urlencoding(password)
        ),
    )
    .await
}

#[tokio::test]
async fn logins_and_failed_login_limits_hold_across_instances() {
    let Some((db, a, b)) = two("shared_lobby_logins").await else {
        return;
    };
    wozkit_server::auth::ensure_password(a.store.as_ref(), Some("letmein"))
        .await
        .expect("password");
    // A login made on a works on b.
    let res = try_login(a.addr, "admin", "letmein").await;
    assert_eq!(res.status, 303, "{}", res.body);
    let cookie = res
        .header("set-cookie")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    let page = http(b.addr, "GET", "/researcher", &[("Cookie", &cookie)], "").await;
    assert_eq!(page.status, 200, "the login of a on b: {}", page.body);
    // Failed logins on a count on b: one short of the limit on a, the last one on b...
    let limit = wozkit_server::auth::FAILED_LOGIN_LIMIT;
    for i in 0..limit - 1 {
        assert_eq!(
            try_login(a.addr, "admin", &format!("wrong-{i}"))
                .await
                .status,
            401
        );
    }
    assert_eq!(try_login(b.addr, "admin", "wrong").await.status, 401);
    // ...and the right password is refused on both.
    assert_eq!(try_login(b.addr, "admin", "letmein").await.status, 429);
    assert_eq!(try_login(a.addr, "admin", "letmein").await.status, 429);
    finish(db, a, b).await;
}
