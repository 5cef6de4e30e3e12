//! Every way a session ends: terminal state, time limit, finish, disconnect. Then the survey and
//! the completion code.

use serde_json::json;
use wozkit_core::event::{EndReason, EventKind, Role};

use crate::helpers::{Tiny, enter, paired, spawn_app};

#[tokio::test]
async fn a_terminal_state_ends_the_session_then_survey_and_code() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    ww.cmd("c2", json!({"cmd": "say", "state": "bye"})).await;
    ww.answer("c2").await;
    let ended = wu.until_type("ended").await;
    assert_eq!(
        (ended["reason"].as_str(), ended["next"].as_str()),
        (Some("terminal"), Some("/p"))
    );
    assert_eq!(ww.until_type("ended").await["reason"], "terminal");

    let page = user.page().await.body;
    assert!(page.contains("data-page=\"survey\""), "{page}");
    let step = user.step().await;
    let bad = user.post("/p/survey", &format!("step={step}&q1=9")).await;
    assert_eq!(bad.status, 422);
    assert!(bad.body.contains("problem-q1"));
    let ok = user.post("/p/survey", &format!("step={step}&q1=4")).await;
    assert_eq!(ok.status, 303);
    let done = user.page().await.body;
    let code = done
        .split("data-testid=\"completion-code\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or_default()
        .to_string();
    assert_eq!(code.len(), 8);

    let events = app.events(&session).await;
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::SessionEnded {
            reason: EndReason::Terminal,
            ..
        }
    )));
    assert!(events.iter().any(|e| matches!(&e.kind, EventKind::SurveyAnswered { role: Role::User, answers } if answers["q1"] == 4)));
    assert!(events.iter().any(|e| e.kind
        == EventKind::CompletionIssued {
            role: Role::User,
            code: code.clone(),
            no_partner: false
        }));
    let record = app
        .store
        .session(&session)
        .await
        .expect("session")
        .expect("exists");
    assert_eq!(record.ended.map(|e| e.reason), Some(EndReason::Terminal));
    app.stop().await;
}

#[tokio::test]
async fn the_time_limit_ends_the_session() {
    let mut app = spawn_app(Tiny {
        time_limit_s: 2,
        ..Tiny::default()
    })
    .await;
    let (user, wizard, _) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    assert_eq!(wu.until_type("ended").await["reason"], "time_limit");
    assert_eq!(ww.until_type("ended").await["reason"], "time_limit");
    assert!(wizard.page().await.body.contains("data-page=\"survey\""));
    app.stop().await;
}

#[tokio::test]
async fn finish_ends_the_session_once_allowed() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, _) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    wu.cmd("f0", json!({"cmd": "finish"})).await;
    assert_eq!(
        wu.answer("f0").await["detail"]["refusal"],
        "finish_not_allowed"
    );
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    wu.cmd("u1", json!({"cmd": "text", "text": "hi"})).await;
    wu.answer("u1").await;
    assert_eq!(wu.last_view()["can_finish"], true);
    wu.cmd("f1", json!({"cmd": "finish"})).await;
    assert_eq!(wu.answer("f1").await["type"], "ack");
    assert_eq!(ww.until_type("ended").await["reason"], "finished");
    app.stop().await;
}

#[tokio::test]
async fn a_disconnect_beyond_the_grace_period_ends_the_session() {
    let mut app = spawn_app(Tiny {
        grace_s: 1,
        ..Tiny::default()
    })
    .await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let wu = enter(&user, 0).await;
    wu.close().await;
    assert_eq!(ww.until_type("partner").await["status"], "reconnecting");
    assert_eq!(ww.until_type("ended").await["reason"], "disconnect");
    let events = app.events(&session).await;
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::Disconnected {
            role: Role::User,
            ..
        }
    )));
    assert!(user.page().await.body.contains("data-page=\"survey\""));
    app.stop().await;
}
