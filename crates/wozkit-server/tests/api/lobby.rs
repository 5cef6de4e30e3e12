//! The waiting room: its limit (a "no partner" completion code, or a built-in bot as partner),
//! pairing only live waiters, the front of the queue for a participant whose partner never
//! came, and a lobby that forgets those who left.

use std::time::Duration;

use serde_json::json;
use wozkit_core::event::{Actor, EndReason, EventKind, LockRelease, Role};
use wozkit_store::{Platform, SessionFilter};

use crate::helpers::{TestApp, Tiny, enter, fast, login, spawn_app, spawn_app_tuned};

/// The researcher page, as `researcher` sees it.
async fn researcher_page(app: &TestApp, researcher: &str) -> String {
    let res = app
        .http("GET", "/researcher", &[("Cookie", researcher)], "")
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    res.body
}

/// The lobby's size as the researcher page shows it.
async fn lobby_size(app: &TestApp, researcher: &str) -> usize {
    let page = researcher_page(app, researcher).await;
    page.split("id=\"lobby-size\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no lobby size on the page: {page}"))
}

/// Waits (up to ten seconds) until the researcher page satisfies `pred`.
async fn until_page(app: &TestApp, researcher: &str, what: &str, pred: impl Fn(&str) -> bool) {
    for _ in 0..200 {
        if pred(&researcher_page(app, researcher).await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the researcher page never showed {what}: {}",
        researcher_page(app, researcher).await
    );
}

#[tokio::test]
async fn waiting_too_long_gives_a_no_partner_code() {
    let mut app = spawn_app(Tiny {
        wait_limit_s: 1,
        ..Tiny::default()
    })
    .await;
    let alone = app.join("participant=carol&role=user").await;
    alone.accept_pages().await;
    let mut ws = alone.ws().await;
    ws.hello(0).await;
    let ended = ws.until_type("ended").await;
    assert_eq!(ended["reason"], "no_partner");
    assert_eq!(ended["next"], "/p");

    let page = alone.page().await.body;
    let code = page
        .split("data-testid=\"completion-code\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or_default();
    assert_eq!(code.len(), 8, "{page}");
    assert!(page.contains("data-testid=\"no-partner\""));

    let sessions = app
        .store
        .list_sessions(&SessionFilter::default())
        .await
        .expect("sessions");
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        sessions[0].ended.map(|e| e.reason),
        Some(EndReason::NoPartner)
    );
    let events = app.events(&sessions[0].id).await;
    assert!(events.iter().any(|e| e.kind
        == EventKind::CompletionIssued {
            role: Role::User,
            code: code.to_string(),
            no_partner: true
        }));
    app.stop().await;
}

#[tokio::test]
async fn a_bot_wizard_backfills() {
    let mut app = spawn_app(Tiny {
        wait_limit_s: 1,
        on_timeout: "bot",
        ..Tiny::default()
    })
    .await;
    let user = app.join("participant=dan&role=user").await;
    user.accept_pages().await;
    let mut ws = user.ws().await;
    ws.hello(0).await;
    let paired = ws.until_type("paired").await;
    assert_eq!(paired["partner"], "bot");
    let session = paired["session"].as_str().unwrap_or_default().to_string();
    let mut room = enter(&user, 0).await;
    let greeting = room
        .until(|v| {
            v["type"] == "event"
                && v["event"]["kind"] == "message"
                && v["event"]["role"] == "wizard"
        })
        .await;
    assert_eq!(greeting["event"]["actor"]["type"], "bot");
    room.cmd("u1", json!({"cmd": "text", "text": "Hi, what now?"}))
        .await;
    assert_eq!(room.answer("u1").await["type"], "ack");
    let events = app.events(&session).await;
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::Joined {
            role: Role::Wizard,
            bot: true
        }
    )));
    app.stop().await;
}

#[tokio::test]
async fn a_bot_user_backfills_and_answers_approvals() {
    let mut app = spawn_app(Tiny {
        wait_limit_s: 1,
        on_timeout: "bot",
        ..Tiny::default()
    })
    .await;
    let wizard = app.join("participant=erin&role=wizard").await;
    wizard.accept_pages().await;
    let mut ws = wizard.ws().await;
    ws.hello(0).await;
    let session = ws.until_type("paired").await["session"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut room = enter(&wizard, 0).await;
    room.cmd("c1", json!({"cmd": "say", "state": "greet"}))
        .await;
    assert_eq!(room.answer("c1").await["type"], "ack");
    room.cmd("c2", json!({"cmd": "say", "state": "ask"})).await;
    assert_eq!(room.answer("c2").await["type"], "ack");
    let released = room.event("lock_released").await;
    assert!(released["how"] == "approved" || released["how"] == "denied");
    assert_eq!(released["actor"]["type"], "bot");
    let e = app
        .wait_event(&session, |e| {
            matches!(e.kind, EventKind::LockReleased { .. })
        })
        .await;
    assert!(matches!(
        e.actor,
        Actor::Bot {
            role: Role::User,
            ..
        }
    ));
    assert!(matches!(
        e.kind,
        EventKind::LockReleased {
            how: LockRelease::Approved | LockRelease::Denied
        }
    ));
    app.stop().await;
}

#[tokio::test]
async fn a_waiter_whose_socket_stops_answering_is_not_paired() {
    let mut app = spawn_app_tuned(
        Tiny::default(),
        wozkit_server::Tunables {
            heartbeat_ms: 50,
            stale_after_ms: 300,
            ..fast()
        },
    )
    .await;
    let researcher = login(&app).await;
    let silent = app.join("participant=silent&role=user").await;
    silent.accept_pages().await;
    let mut dead = silent.ws().await;
    dead.hello(0).await;
    until_page(&app, &researcher, "the user waiting", |p| {
        p.contains("1 user(s), 0 wizard(s) waiting")
    })
    .await;
    // From now on `dead` is never read: it answers no ping, like a socket whose peer vanished
    // without closing it. Its place is given up...
    until_page(&app, &researcher, "nobody waiting", |p| {
        p.contains("nobody is waiting")
    })
    .await;
    // ...so a wizard arriving now waits instead of being paired with it.
    let wizard = app.join("participant=wiz&role=wizard").await;
    wizard.accept_pages().await;
    let mut ww = wizard.ws().await;
    ww.hello(0).await;
    let first = ww
        .until(|v| v["type"] == "waiting" || v["type"] == "paired")
        .await;
    assert_eq!(first["type"], "waiting", "{first}");
    // A live user is paired with the wizard.
    let live = app.join("participant=live&role=user").await;
    live.accept_pages().await;
    let mut wl = live.ws().await;
    wl.hello(0).await;
    let session = wl.until_type("paired").await["session"].clone();
    assert_eq!(ww.until_type("paired").await["session"], session);
    let stale = app
        .store
        .participant_by_worker("tiny", Platform::Lab, "silent")
        .await
        .expect("store")
        .expect("the silent participant exists");
    assert_eq!(stale.session_id, None);
    drop(dead);
    app.stop().await;
}

#[tokio::test]
async fn a_partner_who_never_arrives_puts_the_live_one_first_in_the_queue() {
    let mut app = spawn_app(Tiny {
        grace_s: 1,
        ..Tiny::default()
    })
    .await;
    let user = app.join("participant=ann&role=user").await;
    let no_show = app.join("participant=bo&role=wizard").await;
    user.accept_pages().await;
    no_show.accept_pages().await;
    let mut wu = user.ws().await;
    wu.hello(0).await;
    let mut wn = no_show.ws().await;
    wn.hello(0).await;
    let first = wu.until_type("paired").await["session"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(wn.until_type("paired").await["session"], first.as_str());
    // Another user starts waiting meanwhile.
    let other = app.join("participant=cy&role=user").await;
    other.accept_pages().await;
    let mut wo = other.ws().await;
    wo.hello(0).await;
    assert_eq!(wo.until_type("waiting").await["position"], 1);

    // The user enters the room; the wizard never does. After the join deadline the user's
    // page is sent back to the waiting room.
    let mut room = enter(&user, 0).await;
    let ended = room.until_type("ended").await;
    assert_eq!(ended["next"], "/p");
    assert!(user.page().await.body.contains("data-page=\"waiting\""));
    let mut back = user.ws().await;
    back.hello(0).await;
    assert_eq!(back.until_type("waiting").await["position"], 1);

    // The next wizard is paired with the user who was stranded, not the one who waited longer.
    let wizard = app.join("participant=dee&role=wizard").await;
    wizard.accept_pages().await;
    let mut ww = wizard.ws().await;
    ww.hello(0).await;
    let second = ww.until_type("paired").await["session"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(back.until_type("paired").await["session"], second.as_str());
    assert_ne!(first, second);
    let record = app.store.session(&first).await.expect("store");
    assert!(record.is_some_and(|r| r.ended.is_some()));
    let ann = app
        .store
        .participant_by_worker("tiny", Platform::Lab, "ann")
        .await
        .expect("store")
        .expect("ann");
    assert_eq!(ann.session_id.as_deref(), Some(second.as_str()));
    // The other user is still waiting, now first.
    let still = wo
        .until(|v| v["type"] == "waiting" && v["position"] == 1)
        .await;
    assert_eq!(still["type"], "waiting");
    app.stop().await;
}

#[tokio::test]
async fn the_lobby_forgets_waiters_who_leave() {
    let mut app = spawn_app(Tiny {
        grace_s: 1,
        ..Tiny::default()
    })
    .await;
    let researcher = login(&app).await;
    assert_eq!(lobby_size(&app, &researcher).await, 0);
    let mut sockets = vec![];
    for name in ["p1", "p2", "p3"] {
        // Private pair keys: three queues, nobody paired.
        let c = app
            .join(&format!("participant={name}&role=user&pair={name}"))
            .await;
        c.accept_pages().await;
        let mut ws = c.ws().await;
        ws.hello(0).await;
        ws.until_type("waiting").await;
        sockets.push(ws);
    }
    assert!(lobby_size(&app, &researcher).await >= 3);
    for ws in sockets {
        ws.close().await;
    }
    // Gone longer than the grace period: nothing is left of them.
    until_page(&app, &researcher, "an empty lobby", |p| {
        p.contains("id=\"lobby-size\">0<")
    })
    .await;
    app.stop().await;
}

/// A participant seated in a session by a partner who took an earlier place of theirs (a
/// connection cut by a killed instance, its place still in the table) while their new
/// connection was queuing: the partner's notice went to the old place, and the new place is
/// held, so no notice and no lost place tell them. The waiting connection finds the seat in
/// the participant's record and sends them to the session instead of waiting out the limit.
#[tokio::test]
async fn a_waiter_seated_without_a_notice_is_sent_to_the_session() {
    let tiny = Tiny {
        wait_limit_s: 10,
        ..Tiny::default()
    };
    let version = tiny.study().study.version;
    let mut app = spawn_app_tuned(
        tiny,
        wozkit_server::Tunables {
            stale_after_ms: 1500,
            ..fast()
        },
    )
    .await;
    let waiter = app.join("participant=seated&role=user&pair=k").await;
    waiter.accept_pages().await;
    let mut ws = waiter.ws().await;
    ws.hello(0).await;
    ws.until_type("waiting").await;
    // What the partner's pairing did, its notice having gone to the earlier place.
    let me = app
        .store
        .participant_by_worker("tiny", Platform::Lab, "seated")
        .await
        .expect("store")
        .expect("the participant exists");
    let places = app.store.waiters(None).await.expect("waiters");
    assert!(places.iter().any(|w| w.participant == me.id), "{places:?}");
    let session = wozkit_store::new_id();
    app.store
        .create_session(wozkit_store::NewSession {
            id: session.clone(),
            study_id: "tiny".into(),
            study_version: version,
            seed: 1,
            created_at_ms: 1,
        })
        .await
        .expect("session");
    app.store
        .update_participant(
            &me.id,
            wozkit_store::ParticipantPatch {
                session_id: Some(Some(session.clone())),
                ..Default::default()
            },
        )
        .await
        .expect("seat");
    let told = ws
        .until(|v| v["type"] == "paired" || v["type"] == "ended")
        .await;
    assert_eq!(told["type"], "paired", "{told}");
    assert_eq!(told["session"], session.as_str(), "{told}");
    // Its place is given up: nobody is paired with it any more.
    let places = app.store.waiters(None).await.expect("waiters");
    assert!(places.is_empty(), "{places:?}");
    app.stop().await;
}
