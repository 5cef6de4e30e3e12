//! Pairing: complementary roles meet in a room and talk; a worker is never paired with itself.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{Tiny, enter, paired, spawn_app};

#[tokio::test]
async fn complementary_roles_are_paired_and_talk() {
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    assert!(user.page().await.body.contains("data-page=\"room\""));
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    let view = ww
        .until(|v| {
            v["type"] == "view"
                && v["view"]["options"]
                    .as_array()
                    .is_some_and(|o| !o.is_empty())
        })
        .await;
    assert_eq!(view["view"]["options"][0]["state"], "greet");

    ww.cmd("c1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(ww.answer("c1").await["type"], "ack");
    let mine = ww.event("message").await;
    assert_eq!(mine["label"], "greet", "the wizard sees the dialogue act");
    let theirs = wu.event("message").await;
    assert_eq!(theirs["text"], "Hello, I am Fred.");
    assert_eq!(
        theirs["source"], "free",
        "the user does not see that the text was a menu choice"
    );

    wu.cmd("u1", json!({"cmd": "text", "text": "<b>hi</b>"}))
        .await;
    assert_eq!(wu.answer("u1").await["type"], "ack");
    let m = ww
        .until(|v| {
            v["type"] == "event" && v["event"]["kind"] == "message" && v["event"]["role"] == "user"
        })
        .await;
    assert_eq!(m["event"]["text"], "<b>hi</b>");

    let events = app.events(&session).await;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "gap-free log"
    );
    let joined = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                wozkit_core::event::EventKind::Joined { bot: false, .. }
            )
        })
        .count();
    assert_eq!(joined, 2);
    app.stop().await;
}

#[tokio::test]
async fn a_worker_is_never_paired_with_itself() {
    let mut app = spawn_app(Tiny::default()).await;
    let first = app.join("PROLIFIC_PID=same&STUDY_ID=s&SESSION_ID=1").await;
    first.accept_pages().await;
    // The same worker again from another browser (the same Prolific submission): the same
    // participant, already waiting.
    let again = app.join("PROLIFIC_PID=same&STUDY_ID=s&SESSION_ID=1").await;
    assert_ne!(first.cookie, again.cookie);
    assert!(again.page().await.body.contains("data-page=\"waiting\""));

    let mut w1 = first.ws().await;
    w1.hello(0).await;
    w1.until_type("waiting").await;
    let mut w2 = again.ws().await;
    w2.hello(0).await;
    w2.until_type("waiting").await;
    let replaced = w1.until_type("error").await;
    assert_eq!(replaced["code"], "replaced");
    let alone = tokio::time::timeout(Duration::from_millis(600), w2.until_type("paired")).await;
    assert!(alone.is_err(), "paired with itself");

    let other = app.join("PROLIFIC_PID=other&STUDY_ID=s&SESSION_ID=3").await;
    other.accept_pages().await;
    let mut wo = other.ws().await;
    wo.hello(0).await;
    let a = wo.until_type("paired").await;
    let b = w2.until_type("paired").await;
    assert_eq!(a["session"], b["session"]);
    assert_ne!(a["role"], b["role"]);
    app.stop().await;
}
