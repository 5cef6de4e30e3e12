//! What participants read: a session of the built-in offshore study played over the real
//! sockets, and every frame the operator receives scanned for the study's internal names (action
//! ids, dialogue-act labels, state ids) and for Markdown backticks; the assistant's refusals are
//! plain text that names robots and actions by their labels.

use serde_json::{Value, json};
use wozkit_core::load::{LoadedStudy, load_builtin};

use crate::helpers::{enter, paired, spawn_app_in};

fn offshore() -> LoadedStudy {
    load_builtin("offshore-emergency").unwrap_or_else(|e| panic!("{e}"))
}

/// Every string in a frame with the key it sits under. Subtask ids are skipped: the page needs
/// them to find the labels, and two of them (`inspect`, `extinguish`) are spelled like actions.
fn strings<'a>(v: &'a Value, key: &str, out: &mut Vec<(String, &'a str)>) {
    if matches!(key, "subtask" | "subtasks" | "milestones") {
        return;
    }
    match v {
        Value::String(s) => out.push((key.to_string(), s)),
        Value::Array(a) => a.iter().for_each(|x| strings(x, key, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| strings(x, k, out)),
        _ => {}
    }
}

/// The study's internal names that the operator must never receive.
fn internal_names(study: &LoadedStudy) -> (Vec<String>, Vec<String>) {
    let st = &study.study;
    // Whole values: action and state ids (short words like `send` may appear inside sentences).
    let ids = st
        .actions
        .iter()
        .map(|a| a.id.clone())
        .chain(st.states.iter().map(|s| s.id.clone()))
        .collect();
    // Anywhere in a text: the dialogue-act labels of actions (`activate.robot`).
    let acts = st.actions.iter().filter_map(|a| a.act.clone()).collect();
    (ids, acts)
}

#[tokio::test]
async fn the_operator_reads_labels_never_ids_and_no_markdown() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let study = offshore();
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study.clone()).await;
    let (user, wizard, _session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;

    for (i, state) in [
        "intro_hello",
        "inform_alert_emergency",
        "request_pa_announcement",
    ]
    .iter()
    .enumerate()
    {
        let id = format!("s{i}");
        ww.cmd(&id, json!({"cmd": "say", "state": state})).await;
        assert_eq!(ww.answer(&id).await["type"], "ack", "saying {state}");
    }
    // The approval question arrives with its slot filled.
    let view = wu
        .until(|v| v["type"] == "view" && v["view"]["lock"].is_object())
        .await;
    assert_eq!(
        view["view"]["lock"]["prompt"],
        "Make a PA announcement telling the crew to leave the processing module east tower?"
    );
    wu.cmd("a", json!({"cmd": "approve"})).await;
    assert_eq!(wu.answer("a").await["type"], "ack");

    // Refusals the wizard can meet in the action panel, sent as commands.
    let refused = [
        // The quadcopter is at the base: the guard fails.
        json!({"cmd": "act", "action": "inspect", "robot": "qdc1"}),
        // It has no valve-closing capability.
        json!({"cmd": "act", "action": "emergency_shutdown", "robot": "qdc1"}),
        // A target for an action that takes none.
        json!({"cmd": "act", "action": "inspect", "robot": "hsk2", "target": "pu_et"}),
    ];
    let mut messages = vec![];
    for (i, cmd) in refused.into_iter().enumerate() {
        let id = format!("r{i}");
        ww.cmd(&id, cmd).await;
        let answer = ww.answer(&id).await;
        assert_eq!(answer["type"], "error", "{answer}");
        messages.push(answer["message"].as_str().unwrap_or_default().to_string());
    }
    assert_eq!(
        messages,
        [
            "“Inspect the area” is not possible now",
            "quadcopter 1 cannot do “Close the gas valves”",
            "“Inspect the area” takes no target location",
        ]
    );

    ww.cmd(
        "go",
        json!({"cmd": "act", "action": "send", "robot": "qdc1", "target": "pu_et"}),
    )
    .await;
    assert_eq!(ww.answer("go").await["type"], "ack");
    let started = wu.event("action_started").await;
    assert_eq!(started["label"], "Send to location");
    let busy = wu
        .until(|v| v["type"] == "view" && v["view"]["robots"][2]["busy"] == true)
        .await;
    assert_eq!(busy["view"]["robots"][2]["action"], "Send to location");
    assert_eq!(
        busy["view"]["robots"][2]["target"],
        "processing module east tower"
    );

    // The wizard's panel gives its reasons in plain text too.
    let wizard_view = ww.last_view();
    let reasons: Vec<&str> = wizard_view["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["combos"].as_array().into_iter().flatten())
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(!reasons.is_empty());
    for r in &reasons {
        assert!(!r.contains('`'), "a reason with Markdown: {r}");
    }

    let (ids, acts) = internal_names(&study);
    let mut seen = vec![];
    for frame in &wu.seen {
        strings(frame, "", &mut seen);
    }
    assert!(seen.len() > 50, "the operator received too little to judge");
    for (key, text) in &seen {
        assert!(!text.contains('`'), "backtick under `{key}`: {text}");
        assert!(
            !ids.iter().any(|id| id == text),
            "internal id under `{key}`: {text}"
        );
        for act in &acts {
            assert!(
                !text.contains(act.as_str()),
                "act label under `{key}`: {text}"
            );
        }
    }
    app.stop().await;
}
