//! User goals over the sockets: the user receives the goal (`goal_generated`) and its state after
//! every message (`turn_state`, without the wizard's belief state) and sees it ticked; the wizard
//! never receives either, live or on reconnecting from the start.

use std::path::Path;

use serde_json::{Value, json};
use wozkit_core::engine::replay;
use wozkit_core::event::EventKind;
use wozkit_core::load::load_path;

use crate::helpers::{enter, paired, spawn_app_in};

fn is_goal_frame(v: &Value) -> bool {
    matches!(
        v["event"]["kind"].as_str(),
        Some("goal_generated" | "turn_state")
    )
}

#[tokio::test]
async fn the_user_sees_the_goal_ticked_and_the_wizard_never_receives_it() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../wozkit-core/tests/fixtures/goals-study");
    let study = load_path(&fixture).unwrap_or_else(|e| panic!("{e}"));
    let data = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(data.path().to_path_buf(), study.clone()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;

    // The user's goal.
    let generated = wu.event("goal_generated").await;
    let sub = generated["goal"]["subgoals"][0].clone();
    let table = sub["table"].as_str().unwrap().to_string();
    let row = sub["row"].as_str().unwrap().to_string();
    let constraints: Vec<Value> = sub["constraints"].as_array().unwrap().clone();
    assert!(!constraints.is_empty(), "{generated}");
    let plain: Vec<&Value> = constraints
        .iter()
        .filter(|c| c.get("reference").is_none())
        .collect();

    // The wizard greets, the user states the first sub-goal's constraints.
    ww.cmd(
        "w1",
        json!({"cmd": "text", "text": "Hello, how can I help?"}),
    )
    .await;
    assert_eq!(ww.answer("w1").await["type"], "ack");
    wu.event("message").await;
    let first_state = wu.event("turn_state").await;
    assert_eq!(first_state["turn"], 0);
    assert!(
        first_state["user_state"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["satisfied"] == false)
    );
    let said: Vec<&str> = plain.iter().map(|c| c["value"].as_str().unwrap()).collect();
    wu.cmd(
        "u1",
        json!({"cmd": "text", "text": format!("I want {}.", said.join(", "))}),
    )
    .await;
    assert_eq!(wu.answer("u1").await["type"], "ack");
    let state = wu
        .until(|v| {
            v["type"] == "event" && v["event"]["kind"] == "turn_state" && v["event"]["turn"] == 1
        })
        .await["event"]
        .clone();
    for e in state["user_state"].as_array().unwrap() {
        let expressed = e["subgoal"] == 1
            && e["kind"] == "constraint"
            && plain.iter().any(|c| c["slot"] == e["slot"]);
        assert_eq!(e["satisfied"], expressed, "{e}");
    }
    // The user never reads the wizard's belief state.
    assert_eq!(state["sys_state"], json!({}));

    // The wizard searches, selects the drawn row and offers it: the requests are informed.
    let filters: Vec<Value> = plain
        .iter()
        .map(|c| json!({"column": c["slot"], "op": "equals", "value": c["value"]}))
        .collect();
    ww.cmd(
        "w2",
        json!({"cmd": "query", "table": table, "filters": filters}),
    )
    .await;
    assert_eq!(ww.answer("w2").await["type"], "ack");
    ww.cmd("w3", json!({"cmd": "select", "table": table, "key": row}))
        .await;
    assert_eq!(ww.answer("w3").await["type"], "ack");
    ww.event("db_selected").await;
    ww.cmd("w4", json!({"cmd": "say", "state": table})).await;
    assert_eq!(ww.answer("w4").await["type"], "ack");
    let state = wu
        .until(|v| {
            v["type"] == "event" && v["event"]["kind"] == "turn_state" && v["event"]["turn"] == 2
        })
        .await["event"]
        .clone();
    let db = study.database.as_deref().unwrap();
    let drawn = db.select(&table, &row).unwrap();
    let requests: Vec<&Value> = state["user_state"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["subgoal"] == 1 && e["kind"] == "request")
        .collect();
    assert!(!requests.is_empty());
    for e in requests {
        assert_eq!(e["satisfied"], true, "{e}");
        let slot = e["slot"].as_str().unwrap();
        assert_eq!(
            e["value"].as_str().unwrap(),
            wozkit_core::database::value_text(&drawn[slot])
        );
    }

    // Nothing of the goal reached the wizard, live or on reconnecting from the start; the user
    // gets the goal again on reconnecting.
    let mut wagain = enter(&wizard, 0).await;
    wagain.event("message").await;
    let mut uagain = enter(&user, 0).await;
    assert_eq!(
        uagain.event("goal_generated").await["goal"],
        generated["goal"]
    );
    for frames in [&ww.seen, &wagain.seen] {
        assert!(!frames.iter().any(is_goal_frame), "{frames:#?}");
        let text = serde_json::to_string(frames).unwrap();
        assert!(
            !text.contains("user_state"),
            "a goal state reached the wizard"
        );
        assert!(!text.contains("subgoals"), "the goal reached the wizard");
    }

    // The log holds the goal and one state per message, and replays to the same goal state.
    let events = app.events(&session).await;
    let messages = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Message { .. }))
        .count();
    let states: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnState {
                user_state,
                sys_state,
                ..
            } => Some((user_state, sys_state)),
            _ => None,
        })
        .collect();
    assert_eq!(states.len(), messages);
    let (last_user, last_sys) = states.last().unwrap();
    assert!(!last_sys.is_empty(), "the log keeps the belief state");
    let s = replay(&study, &session, &events);
    assert_eq!(&&s.goal.unwrap().entries, last_user);
    app.stop().await;
}
