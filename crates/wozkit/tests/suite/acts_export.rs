//! `wozkit export --format multiwoz21 --acts-from STUDY`: a collected session's turns get the
//! adjudicated dialogue acts of an act-annotation study's counted judgments (an act ticked by
//! both of two annotators is kept, by one of them it is not; an uncounted judgment adds
//! nothing); without the flag the turns keep the format's defaults; the flag with a format
//! without acts is refused with a message naming both.

use crate::annotated;

use std::path::Path;

use serde_json::{Value, json};
use wozkit_core::event::{Actor, EndReason, EventKind, Judgment, MessageSource, Role};
use wozkit_store::{NewEvent, NewSession};

use annotated::{assert_refused, export_json, log_judgments};

const SOURCE: &str = "pilot";
const ACTS: &str = "pilot-acts";

fn judgment(lease: &str, item: &str, counted: bool, acts: &[&str], pairs: Value) -> Judgment {
    annotated::judgment(
        lease,
        item,
        counted,
        "pilot",
        json!({"acts": acts, "pairs": pairs}),
    )
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
    log_judgments(store.as_ref(), ACTS, labels.into()).await;
    store.close().await;
}

fn export(data: &Path, out: &Path, extra: &[&str]) -> Value {
    export_json("multiwoz21", data, out, SOURCE, extra)
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

    assert_refused(
        &data,
        &dir.path().join("x.json"),
        "taskmaster1",
        ("--acts-from", ACTS),
        "taskmaster1",
    );
}
