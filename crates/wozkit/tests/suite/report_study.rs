//! `wozkit report --study`: the store keeps no study definitions, so the report learns a live
//! study's questionnaire (reverse-coded items, scales) from the study given on the command line;
//! without it, the report and stderr say the answers were used as stored.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_store::{NewEvent, NewSession};

const STUDY: &str = r#"
id: rev
title: Reverse-coded items
roles:
  user: {label: Operator}
  wizard: {label: Assistant}
states:
  - {id: start, type: interaction, initial: true, transitions: [bye]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
survey:
  questions:
    - {id: hard, text: It was hard., kind: likert, points: 7, reverse: true}
"#;

/// Two sessions of `rev`; the user answered `hard` with 1 and 2 (reversed on 1..7: 7 and 6).
async fn fill(data: &Path) {
    let store = wozkit_store::open(&data.display().to_string())
        .await
        .expect("open store");
    for (id, hard) in [("s1", 1), ("s2", 2)] {
        store
            .create_session(NewSession {
                id: id.into(),
                study_id: "rev".into(),
                study_version: "1".into(),
                seed: 0,
                created_at_ms: 1_000,
            })
            .await
            .expect("create session");
        let answers = serde_json::from_value(json!({ "hard": hard })).expect("an answer map");
        let user = Actor::Participant {
            role: Role::User,
            participant: None,
        };
        let kinds = [
            (
                Actor::System,
                EventKind::SessionStarted {
                    study: "rev".into(),
                    study_version: "1".into(),
                    seed: 0,
                    initial_state: "start".into(),
                },
            ),
            (
                user.clone(),
                EventKind::Message {
                    role: Role::User,
                    text: "hello".into(),
                    source: MessageSource::Free,
                },
            ),
            (
                Actor::System,
                EventKind::SessionEnded {
                    reason: EndReason::Terminal,
                    goal_reached: true,
                },
            ),
            (
                user,
                EventKind::SurveyAnswered {
                    role: Role::User,
                    answers,
                },
            ),
        ];
        let events = kinds
            .into_iter()
            .map(|(actor, kind)| NewEvent {
                actor,
                kind,
                at_ms: 1_000,
            })
            .collect();
        store.append(id, events).await.expect("append");
    }
    store.close().await;
}

/// Runs `wozkit report` on `data` with `extra` arguments: exit code, the JSON report, stderr.
fn report(data: &Path, extra: &[&str]) -> (i32, Value, String) {
    let json_path = data.join("report.json");
    let _ = std::fs::remove_file(&json_path);
    let out = Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .arg("report")
        .arg("--data")
        .arg(data)
        .arg("--json")
        .arg(&json_path)
        .args(extra)
        .env_remove("WOZKIT_DATA")
        .output()
        .expect("wozkit runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = std::fs::read_to_string(&json_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, stderr)
}

fn hard(report: &Value) -> &Value {
    report["questionnaire"]
        .as_array()
        .and_then(|items| items.iter().find(|q| q["item"] == "user.hard"))
        .unwrap_or_else(|| panic!("no user.hard in {report}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_study_flag_reverses_items_and_its_absence_is_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    fill(&data).await;
    let study = dir.path().join("rev.yaml");
    std::fs::write(&study, STUDY).expect("write study");

    let (code, scored, err) = report(&data, &["--study", &study.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(hard(&scored)["overall"]["mean"], 6.5, "(7 + 6) / 2");
    assert_eq!(hard(&scored)["reversed"]["high"], 7.0);
    assert_eq!(scored["unknown_questionnaires"], json!([]));
    assert!(!err.contains("warning"), "{err}");

    let (code, raw, err) = report(&data, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(hard(&raw)["overall"]["mean"], 1.5, "answers as stored");
    assert_eq!(hard(&raw)["reversed"], Value::Null);
    assert_eq!(raw["unknown_questionnaires"], json!(["rev"]));
    assert!(
        err.contains("warning: no definition of study `rev`") && err.contains("--study"),
        "{err}"
    );

    let missing = dir.path().join("missing.yaml");
    let (code, _, err) = report(&data, &["--study", &missing.display().to_string()]);
    assert_eq!(code, 1);
    assert!(err.contains("--study"), "{err}");
}
