//! The waiting room's limit: a "no partner" completion code, or a built-in bot as partner.

use serde_json::json;
use wozkit_core::event::{Actor, EndReason, EventKind, LockRelease, Role};
use wozkit_store::SessionFilter;

use crate::helpers::{Tiny, enter, spawn_app};

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
