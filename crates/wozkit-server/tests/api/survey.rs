//! The questionnaire under concurrent submissions: one answer set per participant and
//! questionnaire, whatever the number of submissions racing (a double click, two tabs).

use futures_util::future::join_all;
use serde_json::json;
use wozkit_core::event::EventKind;

use crate::helpers::{Tiny, enter, paired, spawn_app};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submissions_store_one_answer_set() {
    const SUBMISSIONS: usize = 10;
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    ww.cmd("c2", json!({"cmd": "say", "state": "bye"})).await;
    ww.answer("c2").await;
    wu.until_type("ended").await;
    assert!(user.page().await.body.contains("data-page=\"survey\""));
    let step = user.step().await;

    // Every submission carries a different answer, so the stored one tells which won.
    let forms: Vec<String> = (0..SUBMISSIONS)
        .map(|i| format!("step={step}&q1={}", 1 + i % 5))
        .collect();
    let responses = join_all(forms.iter().map(|f| user.post("/p/survey", f))).await;
    for res in &responses {
        assert_eq!(res.status, 303, "{}", res.body);
        assert_eq!(res.header("location").as_deref(), Some("/p"));
    }
    let page = user.page().await.body;
    assert!(page.contains("data-testid=\"completion-code\""), "{page}");

    let answers: Vec<_> = app
        .events(&session)
        .await
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::SurveyAnswered { .. }))
        .collect();
    assert_eq!(answers.len(), 1, "{answers:#?}");

    // A late resubmission (the back button) changes nothing either.
    let late = user.post("/p/survey", &format!("step={step}&q1=1")).await;
    assert_eq!(late.status, 303);
    let again = app.events(&session).await;
    let count = again
        .iter()
        .filter(|e| matches!(e.kind, EventKind::SurveyAnswered { .. }))
        .count();
    assert_eq!(count, 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_completion_pages_issue_one_code_event() {
    const LOADS: usize = 10;
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    ww.answer("c1").await;
    ww.cmd("c2", json!({"cmd": "say", "state": "bye"})).await;
    ww.answer("c2").await;
    wu.until_type("ended").await;
    let step = user.step().await;
    // Submitted without following the redirect, so the completion page is not opened yet.
    let res = user.post("/p/survey", &format!("step={step}&q1=3")).await;
    assert_eq!(res.status, 303);

    let pages = join_all((0..LOADS).map(|_| user.page())).await;
    for page in &pages {
        assert_eq!(page.status, 200);
        assert!(page.body.contains("data-testid=\"completion-code\""));
    }
    let issued = app
        .events(&session)
        .await
        .into_iter()
        .filter(|e| matches!(&e.kind, EventKind::CompletionIssued { role, .. } if *role == wozkit_core::event::Role::User))
        .count();
    assert_eq!(issued, 1);
    app.stop().await;
}
