//! A server killed in the middle of pairing: the session exists (and maybe some participants are
//! seated in it) but its room never stored `Start`. On the next start such a session must not
//! stay live forever with its participants stuck in a room that never opens.
//!
//! The kill itself is covered by `crates/wozkit/tests/suite/crash.rs` (the real binary, SIGKILL at
//! random moments); here the states a kill can leave behind are built directly in the store, so
//! each one is tested every time.

use std::path::Path;

use serde_json::json;
use wozkit_core::event::{EndReason, EventKind, Role};
use wozkit_store::{NewSession, ParticipantPatch, SessionFilter, SessionStatus, new_id};

use crate::helpers::{Client, TestApp, Tiny, enter, spawn_app, spawn_app_in};

/// Two participants in the waiting room (not connected), then the server stops.
async fn two_waiting(tiny: &Tiny) -> (TestApp, tempfile::TempDir, Client, Client) {
    let mut app = spawn_app(tiny.clone()).await;
    let user = app.join("participant=ann&role=user&pair=k").await;
    let wizard = app.join("participant=ben&role=wizard&pair=k").await;
    user.accept_pages().await;
    wizard.accept_pages().await;
    let tmp = app.take_dir().expect("temp dir");
    app.stop().await;
    (app, tmp, user, wizard)
}

/// What pairing writes before the room starts: the session, and the given participants seated.
async fn half_paired(dir: &Path, seated: &[(&Client, Role)]) -> String {
    let store = wozkit_store::open(dir.to_str().expect("utf-8 path"))
        .await
        .expect("store");
    let id = new_id();
    store
        .create_session(NewSession {
            id: id.clone(),
            study_id: "tiny".into(),
            study_version: String::new(),
            seed: 42,
            created_at_ms: wozkit_server::now_ms(),
        })
        .await
        .expect("session");
    for (client, role) in seated {
        let hash = wozkit_store::hash_token(client.cookie.split_once('=').map_or("", |c| c.1));
        let p = store
            .participant_by_token_hash(&hash)
            .await
            .expect("participant")
            .expect("known participant");
        store
            .update_participant(
                &p.id,
                ParticipantPatch {
                    role: Some(Some(*role)),
                    session_id: Some(Some(id.clone())),
                    flow_step: Some("3:room".into()),
                    ..ParticipantPatch::default()
                },
            )
            .await
            .expect("seated");
    }
    store.close().await;
    id
}

fn moved(c: &Client, app: &TestApp) -> Client {
    Client {
        addr: app.addr,
        ..c.clone()
    }
}

#[tokio::test]
async fn a_pair_seated_before_the_room_started_plays_after_a_restart() {
    let tiny = Tiny::default();
    let (_, tmp, user, wizard) = two_waiting(&tiny).await;
    let session = half_paired(tmp.path(), &[(&user, Role::User), (&wizard, Role::Wizard)]).await;

    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let (user, wizard) = (moved(&user, &app), moved(&wizard, &app));
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(ww.answer("c1").await["type"], "ack");
    wu.event("message").await;
    ww.cmd("c2", json!({"cmd": "say", "state": "bye"})).await;
    assert_eq!(ww.answer("c2").await["type"], "ack");
    assert_eq!(wu.until_type("ended").await["reason"], "terminal");
    let events = app.events(&session).await;
    assert!(
        matches!(
            events.first().map(|e| &e.kind),
            Some(EventKind::SessionStarted { .. })
        ),
        "{events:#?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn one_seated_participant_is_released_when_the_partner_never_comes() {
    let tiny = Tiny {
        grace_s: 1,
        ..Tiny::default()
    };
    let (_, tmp, user, wizard) = two_waiting(&tiny).await;
    let session = half_paired(tmp.path(), &[(&user, Role::User)]).await;

    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let (user, wizard) = (moved(&user, &app), moved(&wizard, &app));
    let mut wu = enter(&user, 0).await;
    assert_eq!(wu.until_type("ended").await["reason"], "disconnect");
    let ended = app
        .wait_event(&session, |e| {
            matches!(e.kind, EventKind::SessionEnded { .. })
        })
        .await;
    assert!(matches!(
        ended.kind,
        EventKind::SessionEnded {
            reason: EndReason::Disconnect,
            ..
        }
    ));
    // The one never seated is still waiting and is paired with the next participant.
    let other = app.join("participant=cat&role=user&pair=k").await;
    other.accept_pages().await;
    let mut a = wizard.ws().await;
    a.hello(0).await;
    let mut b = other.ws().await;
    b.hello(0).await;
    assert_eq!(a.until_type("paired").await["partner"], "human");
    b.until_type("paired").await;
    app.stop().await;
}

#[tokio::test]
async fn a_session_nobody_was_seated_in_does_not_stay_live() {
    let tiny = Tiny::default();
    let (_, tmp, _, _) = two_waiting(&tiny).await;
    let session = half_paired(tmp.path(), &[]).await;

    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let ended = app
        .wait_event(&session, |e| {
            matches!(e.kind, EventKind::SessionEnded { .. })
        })
        .await;
    assert!(matches!(
        ended.kind,
        EventKind::SessionEnded {
            reason: EndReason::Aborted,
            ..
        }
    ));
    let live = SessionFilter {
        status: Some(SessionStatus::Live),
        ..SessionFilter::default()
    };
    for _ in 0..50 {
        if app
            .store
            .list_sessions(&live)
            .await
            .expect("sessions")
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        app.store
            .list_sessions(&live)
            .await
            .expect("sessions")
            .is_empty()
    );
    app.stop().await;
}

/// The room stores `Start` before the seats are stored: a kill between the two leaves a started
/// session nobody was seated in, and nobody told. After the restart it ends at once as aborted,
/// not at its join deadline as if a partner had left (the grace here is ten minutes, longer than
/// `wait_event` waits).
#[tokio::test]
async fn a_started_session_nobody_was_seated_in_is_aborted_after_a_restart() {
    let tiny = Tiny {
        grace_s: 600,
        ..Tiny::default()
    };
    let mut app = spawn_app(tiny.clone()).await;
    let user = app.join("participant=ann&role=user&pair=k").await;
    let wizard = app.join("participant=ben&role=wizard&pair=k").await;
    user.accept_pages().await;
    wizard.accept_pages().await;
    let mut wu = user.ws().await;
    wu.hello(0).await;
    let mut ww = wizard.ws().await;
    ww.hello(0).await;
    let session = wu.until_type("paired").await["session"]
        .as_str()
        .expect("session id")
        .to_string();
    ww.until_type("paired").await;
    app.wait_event(&session, |e| {
        matches!(e.kind, EventKind::SessionStarted { .. })
    })
    .await;
    let tmp = app.take_dir().expect("temp dir");
    app.stop().await;
    // As if the kill came before the seats were stored.
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store");
    for p in store
        .participants_in_session(&session)
        .await
        .expect("participants")
    {
        let patch = ParticipantPatch {
            session_id: Some(None),
            ..ParticipantPatch::default()
        };
        store
            .update_participant(&p.id, patch)
            .await
            .expect("unseat");
    }
    store.close().await;

    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let ended = app
        .wait_event(&session, |e| {
            matches!(e.kind, EventKind::SessionEnded { .. })
        })
        .await;
    assert!(
        matches!(
            ended.kind,
            EventKind::SessionEnded {
                reason: EndReason::Aborted,
                ..
            }
        ),
        "{ended:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_lone_participant_of_a_study_with_bots_gets_its_bot_back() {
    let tiny = Tiny {
        on_timeout: "bot",
        ..Tiny::default()
    };
    let (_, tmp, user, _) = two_waiting(&tiny).await;
    let session = half_paired(tmp.path(), &[(&user, Role::User)]).await;

    let mut app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let user = moved(&user, &app);
    let mut wu = enter(&user, 0).await;
    // The bot plays the wizard: it greets.
    let said = wu.event("message").await;
    assert_eq!(said["role"], "wizard", "{said}");
    app.wait_event(&session, |e| {
        matches!(
            e.kind,
            EventKind::Joined {
                role: Role::Wizard,
                bot: true
            }
        )
    })
    .await;
    app.stop().await;
}
