//! `wozkit export --format multiwoz21 --acts-from STUDY`: a collected session's turns get the
//! adjudicated dialogue acts of an act-annotation study's counted judgments (an act ticked by
//! both of two annotators is kept, by one of them it is not; an uncounted judgment adds
//! nothing); without the flag the turns keep the format's defaults; the flag with a format
//! without acts is refused with a message naming both.

mod common;

use std::path::Path;

use serde_json::{Value, json};
use wozkit_core::event::{Actor, EndReason, EventKind, Judgment, MessageSource, Role};
use wozkit_store::{NewEvent, NewSession};

use common::wozkit;

const SOURCE: &str = "pilot";
const ACTS: &str = "pilot-acts";

fn judgment(lease: &str, item: &str, counted: bool, acts: &[&str], pairs: Value) -> Judgment {
    serde_json::from_value(json!({
        "page": "1:rate",
        "item": item,
        "lease": lease,
        "pool": "item",
        "dialogues": [item],
        "systems": ["pilot"],
        "answers": {"acts": acts, "pairs": pairs},
        "counted": counted,
        "claimed_at_ms": 1_000,
    }))
    .expect("a judgment")
}

async fn fill(data: &Path) {
    let store = wozkit_store::open(&data.display().to_string())
        .await
        .expect("open store");
    store
        .create_session(NewSession {
            id: "s1".into(),
            study_id: SOURCE.into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: 1_000,
        })
        .await
        .expect("create session");
    let messages = [
        (Role::User, "Hello, a cheap place please."),
        (Role::Wizard, "In which area?"),
        (Role::User, "North."),
    ];
    let events = messages
        .iter()
        .map(|(role, text)| NewEvent {
            actor: Actor::Participant {
                role: *role,
                participant: None,
            },
            kind: EventKind::Message {
                role: *role,
                text: text.to_string(),
                source: MessageSource::Free,
            },
            at_ms: 1_000,
        })
        .collect();
    store.append("s1", events).await.expect("append");
    store
        .end_session("s1", EndReason::Finished, 2_000)
        .await
        .expect("end");
    let cheap = json!([{"act": "Restaurant-Inform", "slot": "pricerange", "value": "cheap"}]);
    let labels = [
        (
            "a1",
            judgment(
                "L1",
                "s1#0",
                true,
                &["general-greet", "Restaurant-Inform"],
                cheap.clone(),
            ),
        ),
        (
            "a2",
            judgment("L2", "s1#0", true, &["Restaurant-Inform"], cheap),
        ),
        // Not counted (its lease had gone to another worker): adds nothing.
        (
            "a3",
            judgment("L3", "s1#2", false, &["Restaurant-Inform"], json!([])),
        ),
    ];
    for (who, j) in labels {
        let log = format!("log-{who}");
        store
            .open_participant_log(NewSession {
                id: log.clone(),
                study_id: ACTS.into(),
                study_version: "1".into(),
                seed: 1,
                created_at_ms: 3_000,
            })
            .await
            .expect("open log");
        let actor = Actor::Participant {
            role: Role::User,
            participant: Some(who.into()),
        };
        let events = vec![
            NewEvent {
                actor: actor.clone(),
                kind: EventKind::ParticipantLogStarted {
                    participant: who.into(),
                    study: ACTS.into(),
                    study_version: "1".into(),
                },
                at_ms: 3_000,
            },
            NewEvent {
                actor,
                kind: EventKind::Judged(Box::new(j)),
                at_ms: 4_000,
            },
        ];
        store.append(&log, events).await.expect("append log");
    }
    store.close().await;
}

fn export(data: &Path, out: &Path, extra: &[&str]) -> Value {
    let (data, out) = (data.display().to_string(), out.display().to_string());
    let mut args = vec![
        "export",
        "--format",
        "multiwoz21",
        "--data",
        &data,
        "--out",
        &out,
        "--study",
        SOURCE,
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = wozkit(&args);
    assert_eq!(code, 0, "export failed: {stdout}\n{stderr}");
    serde_json::from_str(&std::fs::read_to_string(&out).expect("written")).expect("JSON")
}

#[tokio::test(flavor = "multi_thread")]
async fn adjudicated_acts_are_written_with_the_flag_and_not_without() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    fill(&data).await;
    let with = export(&data, &dir.path().join("with.json"), &["--acts-from", ACTS]);
    let without = export(&data, &dir.path().join("without.json"), &[]);
    let log = with["s1"]["log"].as_array().expect("log");
    assert_eq!(
        log[0]["dialog_act"],
        json!({"Restaurant-Inform": [["pricerange", "cheap"]]}),
        "inform by both annotators, greet by one of two"
    );
    assert_eq!(
        log[2]["dialog_act"],
        json!({}),
        "an uncounted label adds nothing"
    );
    let plain = without["s1"]["log"].as_array().expect("log");
    assert_eq!(plain[0]["dialog_act"], json!({}));
    for (a, b) in log.iter().zip(plain) {
        let strip = |v: &Value| {
            let mut v = v.clone();
            v.as_object_mut().expect("turn").remove("dialog_act");
            v
        };
        assert_eq!(strip(a), strip(b), "only the acts differ");
    }

    let (code, _, stderr) = wozkit(&[
        "export",
        "--format",
        "taskmaster1",
        "--data",
        &data.display().to_string(),
        "--out",
        &dir.path().join("x.json").display().to_string(),
        "--acts-from",
        ACTS,
    ]);
    assert_ne!(code, 0, "--acts-from with taskmaster1 is refused");
    assert!(
        stderr.contains("--acts-from") && stderr.contains("taskmaster1"),
        "the refusal names the flag and the format: {stderr}"
    );
}
