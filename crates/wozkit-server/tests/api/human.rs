//! `human` systems: an arena of a builtin bot and a person at the desk. A wizard joins by a lab
//! link with `role=wizard` and answers at the desk; the human side's reply is what they typed,
//! recorded with who typed it; with no wizard at the desk the human side fails and the battle
//! is void.

use std::time::Duration;

use wozkit_core::event::{Event, EventKind, Role};
use wozkit_core::load::{StudySource, load_text};

use crate::client::{Client, http};
use crate::helpers::{TestApp, attr_after, judgments, spawn_app_in};

const STUDY: &str = r#"id: people
title: People and models
flow:
  user:
    - {kind: arena}
    - {kind: completion}
  wizard:
    - {kind: desk, title: Answer as the assistant}
    - {kind: completion}
systems:
  bot:
    kind: builtin
    fallback: ["I am the scripted bot."]
  person:
    kind: human
    limits: {timeout_s: 30, retries: 0, breaker: {failures: 100, cooldown_s: 1}}
evaluation:
  task: arena
  judgments_per_item: 3
  items_per_worker: 1
  conversation: {min_turns: 1, max_turns: 3, reveal: true}
  justification: {required: false}
  no_items: {text: "No battles are left.", code: true}
"#;

struct Battle {
    step: String,
    lease: String,
}

async fn battle_page(c: &Client) -> Battle {
    let res = c.page().await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(
        attr_after(&res.body, "data-page=\""),
        "arena",
        "{}",
        res.body
    );
    Battle {
        step: attr_after(&res.body, "name=\"step\" value=\""),
        lease: attr_after(&res.body, "name=\"lease\" value=\""),
    }
}

async fn post(c: &Client, path: &str, b: &Battle, extra: &str) -> u16 {
    let res = c
        .post(path, &format!("step={}&lease={}{extra}", b.step, b.lease))
        .await;
    assert!(res.status == 303, "{path}: {} {}", res.status, res.body);
    res.status
}

/// The session of the side played by `system`, and the other side's session.
async fn sessions(app: &TestApp, lease: &str, system: &str) -> (String, String) {
    let left = format!("chat-{lease}-left");
    let right = format!("chat-{lease}-right");
    let on_left = app.events(&left).await.first().is_some_and(
        |e| matches!(&e.kind, EventKind::ChatStarted { system: s, .. } if s == system),
    );
    if on_left {
        (left, right)
    } else {
        (right, left)
    }
}

fn replies(events: &[Event]) -> Vec<String> {
    wozkit_core::event::messages(events)
        .filter(|(r, _)| *r == Role::Wizard)
        .map(|(_, t)| t.to_string())
        .collect()
}

fn failures(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::SystemFailed { .. }))
        .count()
}

async fn participant_of(app: &TestApp, session: &str) -> String {
    match app.events(session).await.first().map(|e| e.kind.clone()) {
        Some(EventKind::ChatStarted { participant, .. }) => participant,
        other => panic!("{session} does not start with ChatStarted: {other:?}"),
    }
}

/// Reloads the desk until a turn of `session` waits; returns the reply form's `turn`.
async fn waiting_turn(wizard: &Client, session: &str) -> String {
    for _ in 0..200 {
        let desk = wizard.page().await;
        assert_eq!(desk.status, 200, "{}", desk.body);
        let marker = format!("data-dialogue=\"{session}\" data-waiting=\"");
        let turn = attr_after(&desk.body, &marker);
        if !turn.is_empty() {
            return turn;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no turn of {session} reached the desk");
}

#[tokio::test]
async fn a_wizard_answers_for_the_human_side_and_without_one_the_battle_is_void() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let study = load_text("study.yaml", STUDY, StudySource::Dir(".".into()))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study).await;

    // A crowd link cannot ask for the wizard's role; a lab link can.
    let crowd = app
        .join("PROLIFIC_PID=p-wiz&STUDY_ID=s&SESSION_ID=x&role=wizard")
        .await;
    assert_eq!(
        attr_after(&crowd.page().await.body, "data-page=\""),
        "arena"
    );
    let wizard = app.join("participant=desk-1&role=wizard").await;
    let desk = wizard.page().await;
    assert_eq!(desk.status, 200, "{}", desk.body);
    assert_eq!(
        attr_after(&desk.body, "data-page=\""),
        "desk",
        "{}",
        desk.body
    );
    assert!(desk.body.contains("data-testid=\"desk-empty\""));
    let poll = http(
        wizard.addr,
        "GET",
        "/p/desk/poll",
        &[("Cookie", wizard.cookie.as_str())],
        "",
    )
    .await;
    assert_eq!(poll.status, 200, "{}", poll.body);
    let poll: serde_json::Value = serde_json::from_str(&poll.body).expect("poll JSON");
    assert_eq!(poll["at_desk"], true);

    // A battle: the user's turn goes to both sides; the wizard answers the human one.
    let user = app.join("PROLIFIC_PID=u-1&STUDY_ID=s&SESSION_ID=u1").await;
    let b = battle_page(&user).await;
    let (human, bot) = sessions(&app, &b.lease, "person").await;
    let sender = {
        let user = user.clone();
        let (step, lease) = (b.step.clone(), b.lease.clone());
        tokio::spawn(async move {
            user.post(
                "/p/chat/send",
                &format!("step={step}&lease={lease}&text=which+city+for+jazz%3F"),
            )
            .await
        })
    };
    let turn = waiting_turn(&wizard, &human).await;
    assert_eq!(turn, "1", "the reply is the conversation's second message");
    let desk = wizard.page().await;
    assert!(desk.body.contains("which city for jazz?"), "{}", desk.body);
    let typed = "New Orleans, without a doubt.";
    let res = wizard
        .post(
            "/p/desk/reply",
            &format!("dialogue={human}&turn={turn}&text=New+Orleans%2C+without+a+doubt."),
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    let sent = sender.await.expect("send task");
    assert_eq!(sent.status, 303, "{}", sent.body);
    // The same turn answered again, now that it is no longer waiting: refused with the text
    // given back, nothing stored.
    let late = wizard
        .post(
            "/p/desk/reply",
            &format!("dialogue={human}&turn={turn}&text=Or+maybe+Chicago."),
        )
        .await;
    assert_eq!(late.status, 409, "{}", late.body);
    assert!(
        late.body.contains("data-testid=\"desk-late\""),
        "{}",
        late.body
    );
    assert!(late.body.contains("Or maybe Chicago."), "{}", late.body);

    let human_events = app.events(&human).await;
    assert_eq!(replies(&human_events), [typed]);
    assert_eq!(failures(&human_events), 0);
    let reply_by = human_events
        .iter()
        .find(|e| {
            matches!(
                &e.kind,
                EventKind::Message {
                    role: Role::Wizard,
                    ..
                }
            )
        })
        .map(|e| e.actor.clone());
    assert!(
        matches!(&reply_by, Some(wozkit_core::event::Actor::Bot { name, .. }) if name == "person"),
        "the reply is the system's message: {reply_by:?}"
    );
    let wizard_id = participant_of_wizard(&app, &human_events);
    assert!(!wizard_id.is_empty(), "who typed the reply is recorded");
    assert_ne!(wizard_id, participant_of(&app, &human).await);
    assert_eq!(replies(&app.events(&bot).await), ["I am the scripted bot."]);

    // The vote counts.
    post(&user, "/p/chat/end", &b, "").await;
    let b2 = battle_page(&user).await;
    post(&user, "/p/chat/finish", &b2, "&vote=left").await;
    let log = app
        .events(&format!("log-{}", participant_of(&app, &human).await))
        .await;
    let j = judgments(&log);
    assert_eq!(j.len(), 1, "{j:?}");
    assert!(j[0].counted && !j[0].void, "{j:?}");

    // The wizard leaves; a second battle finds nobody at the desk.
    let step = attr_after(&wizard.page().await.body, "name=\"step\" value=\"");
    let res = wizard.post("/p/desk/leave", &format!("step={step}")).await;
    assert_eq!(res.status, 303, "{}", res.body);
    assert_eq!(
        attr_after(&wizard.page().await.body, "data-page=\""),
        "completion"
    );
    let user2 = app.join("PROLIFIC_PID=u-2&STUDY_ID=s&SESSION_ID=u2").await;
    let b = battle_page(&user2).await;
    let (human, bot) = sessions(&app, &b.lease, "person").await;
    post(&user2, "/p/chat/send", &b, "&text=hello+there").await;
    let human_events = app.events(&human).await;
    assert_eq!(failures(&human_events), 1, "{human_events:#?}");
    assert!(replies(&human_events).is_empty());
    assert!(
        human_events.iter().any(|e| matches!(&e.kind,
            EventKind::SystemFailed { system, error } if system == "person" && error.contains("no wizard is at the desk"))),
        "{human_events:#?}"
    );
    assert_eq!(replies(&app.events(&bot).await), ["I am the scripted bot."]);
    post(&user2, "/p/chat/end", &b, "").await;
    let b2 = battle_page(&user2).await;
    post(&user2, "/p/chat/finish", &b2, "&vote=tie").await;
    let log = app
        .events(&format!("log-{}", participant_of(&app, &human).await))
        .await;
    let j = judgments(&log);
    assert_eq!(j.len(), 1, "{j:?}");
    assert!(j[0].void && !j[0].counted, "{j:?}");
    app.stop().await;
}

/// The participant named by the `human_reply` annotation before the reply.
fn participant_of_wizard(_app: &TestApp, events: &[Event]) -> String {
    let at = events
        .iter()
        .position(|e| {
            matches!(
                &e.kind,
                EventKind::Message {
                    role: Role::Wizard,
                    ..
                }
            )
        })
        .expect("a reply");
    events[..at]
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::Annotation { key, value } if key == "human_reply" => {
                assert_eq!(value["turn"], 1, "{value}");
                value["participant"].as_str().map(str::to_string)
            }
            _ => None,
        })
        .unwrap_or_default()
}
