//! The wizard's copilot in a live room (`docs/copilot.md`): the study's system suggests the
//! wizard's opening and each answer to the user; the wizard sends one as it is and edits
//! another; the log says what became of each, and the user never learns of it.

use serde_json::{Value, json};
use wozkit_core::copilot::{Uptake, uptake};
use wozkit_core::event::{EventKind, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};

use crate::helpers::*;

const COPILOT: &str = r#"
systems:
  helper:
    kind: builtin
    replies:
      - {when: [fire], say: "Where is the fire?"}
    fallback: ["Hello, how can I help?"]
copilot: {system: helper}
"#;

fn study() -> LoadedStudy {
    let text = format!("{}{COPILOT}", Tiny::default().yaml());
    load_text("tiny.yaml", &text, StudySource::Dir(".".into())).expect("the study loads")
}

fn suggested(v: &Value) -> bool {
    v["type"] == "event" && v["event"]["kind"] == "suggested"
}

fn wizard_said(v: &Value) -> bool {
    v["type"] == "event" && v["event"]["kind"] == "message" && v["event"]["role"] == "wizard"
}

#[tokio::test]
async fn the_wizard_is_suggested_replies_and_the_log_says_what_became_of_each() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut wu = enter(&user, 0).await;
    let mut ww = enter(&wizard, 0).await;

    // The room page offers the suggestion to the wizard only.
    assert!(wizard.page().await.body.contains("id=\"copilot-panel\""));
    assert!(!user.page().await.body.contains("copilot"));

    // The opening, once both have joined: sent as it is.
    let opening = ww.until(suggested).await["event"].clone();
    assert_eq!(opening["n"], 1);
    assert_eq!(opening["system"], "helper");
    assert_eq!(opening["text"], "Hello, how can I help?");
    ww.cmd(
        "w1",
        json!({"cmd": "text", "text": "Hello, how can I help?", "suggestion": 1}),
    )
    .await;
    assert_eq!(ww.answer("w1").await["type"], "ack");
    let heard = wu.until(wizard_said).await;
    assert_eq!(heard["event"]["text"], "Hello, how can I help?");

    // The answer to the user's message: edited before it is sent.
    wu.cmd(
        "u1",
        json!({"cmd": "text", "text": "There is a fire in the tower."}),
    )
    .await;
    assert_eq!(wu.answer("u1").await["type"], "ack");
    let answer = ww.until(suggested).await["event"].clone();
    assert_eq!(answer["n"], 2);
    assert_eq!(answer["text"], "Where is the fire?");
    ww.cmd(
        "w2",
        json!({"cmd": "text", "text": "Where exactly is the fire?", "suggestion": 2}),
    )
    .await;
    assert_eq!(ww.answer("w2").await["type"], "ack");
    wu.until(wizard_said).await;

    // Once the wizard has spoken the suggestion is closed, with a reason of its own.
    ww.cmd(
        "w3",
        json!({"cmd": "text", "text": "Again?", "suggestion": 2}),
    )
    .await;
    let refused = ww.answer("w3").await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(
        refused["detail"]["refusal"], "suggestion_closed",
        "{refused}"
    );

    // The log: both suggestions, what was sent, and how far it was edited.
    let events = app.events(&session).await;
    let (system, u) = uptake(&events).expect("suggestions in the log");
    assert_eq!(system, "helper");
    assert_eq!(
        u,
        Uptake {
            suggested: 2,
            sent: 1,
            edited: 1,
            ignored: 0,
            edit_distances: vec![8],
            edited_lengths: vec![18],
        }
    );
    let said: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Message {
                role: Role::Wizard,
                text,
                ..
            } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        said,
        ["Hello, how can I help?", "Where exactly is the fire?"]
    );

    // The report's copilot section reads the same from the store.
    let report = wozkit_data::report::build_report(
        app.store.as_ref(),
        &wozkit_data::report::ReportOptions::default(),
    )
    .await
    .expect("report");
    let section = report.copilot.expect("a copilot section");
    assert_eq!(section.sessions, 1);
    let helper = &section.systems[0];
    assert_eq!(helper.system, "helper");
    assert_eq!((helper.suggested, helper.sent, helper.edited), (2, 1, 1));
    assert_eq!(helper.acceptance, Some(1.0));
    assert_eq!(helper.mean_edits, Some(8.0));

    // The researcher's replay shows the help the wizard had.
    let researcher = login(&app).await;
    let replay = app
        .http(
            "GET",
            &format!("/researcher/session/{session}/replay.json?from=0&count=500"),
            &[("Cookie", &researcher)],
            "",
        )
        .await;
    assert_eq!(replay.status, 200, "{}", replay.body);
    let replay: Value = serde_json::from_str(&replay.body).expect("JSON");
    let notes: Vec<&str> = replay["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["line"]["kind"] == "note")
        .filter_map(|s| s["line"]["text"].as_str())
        .collect();
    assert_eq!(
        notes,
        [
            "copilot helper suggested (1): “Hello, how can I help?”",
            "sent from suggestion 1 as it was",
            "copilot helper suggested (2): “Where is the fire?”",
            "sent from suggestion 2, edited (8 characters changed)",
        ]
    );

    // The user was sent nothing of the copilot.
    let kinds: Vec<&str> = wu
        .seen
        .iter()
        .filter(|v| v["type"] == "event")
        .filter_map(|v| v["event"]["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"message"), "{kinds:?}");
    assert!(
        !kinds
            .iter()
            .any(|k| *k == "suggested" || *k == "suggestion_used"),
        "{kinds:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_suggestion_that_comes_after_the_wizard_spoke_is_not_shown() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut wu = enter(&user, 0).await;
    let mut ww = enter(&wizard, 0).await;
    // The wizard opens in their own words, ignoring the suggestion.
    ww.until(suggested).await;
    ww.cmd("w1", json!({"cmd": "text", "text": "Hi, this is Fred."}))
        .await;
    assert_eq!(ww.answer("w1").await["type"], "ack");
    // The wizard answers before the copilot can: a suggestion asked for the user's message
    // answers nothing once the wizard has, and is dropped if it comes later.
    wu.cmd("u1", json!({"cmd": "text", "text": "Fire!"})).await;
    assert_eq!(wu.answer("u1").await["type"], "ack");
    ww.cmd("w2", json!({"cmd": "text", "text": "On my way."}))
        .await;
    assert_eq!(ww.answer("w2").await["type"], "ack");
    // The next user message is suggested for as usual.
    wu.cmd(
        "u2",
        json!({"cmd": "text", "text": "Hurry, the fire grows."}),
    )
    .await;
    let said_at = wu.answer("u2").await["seq"].as_u64().expect("acked");
    let next = ww
        .until(|v| suggested(v) && v["event"]["seq"].as_u64() > Some(said_at))
        .await;
    assert_eq!(next["event"]["text"], "Where is the fire?");
    let events = app.events(&session).await;
    // No suggestion follows a wizard message directly: each answers the user's last words.
    let mut last_message = None;
    for e in &events {
        match &e.kind {
            EventKind::Message { role, .. } => last_message = Some(*role),
            EventKind::Suggested { .. } => {
                assert_ne!(last_message, Some(Role::Wizard), "{events:#?}")
            }
            _ => {}
        }
    }
    let (_, u) = uptake(&events).expect("suggestions");
    assert_eq!((u.sent, u.edited), (0, 0));
    assert_eq!(u.ignored, u.suggested);
    app.stop().await;
}
