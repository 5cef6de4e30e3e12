//! Annotation judgments in a store and `wozkit export` of them, for the tests of the exports
//! that take in an annotation study's judgments (`acts_export.rs`, `self_dialog_export.rs`).

#![allow(dead_code)]

use std::path::Path;

use serde_json::{Value, json};
use wozkit_core::event::{Actor, EventKind, Judgment, Role};
use wozkit_store::{NewEvent, NewSession, Store};

use crate::common::wozkit;

/// A judgment on a `rate` page of the item `item` (a dialogue of `system`) under `lease`,
/// counted or not, with `answers`.
pub fn judgment(lease: &str, item: &str, counted: bool, system: &str, answers: Value) -> Judgment {
    serde_json::from_value(json!({
        "page": "1:rate",
        "item": item,
        "lease": lease,
        "pool": "item",
        "dialogues": [item],
        "systems": [system],
        "answers": answers,
        "counted": counted,
        "claimed_at_ms": 1_000,
    }))
    .expect("a judgment")
}

/// Writes a participant log `log-<annotator>` in study `study` for each annotator: the log's
/// start, then the annotator's judgment.
pub async fn log_judgments(store: &dyn Store, study: &str, annotators: Vec<(&str, Judgment)>) {
    for (who, j) in annotators {
        let log = format!("log-{who}");
        store
            .open_participant_log(NewSession {
                id: log.clone(),
                study_id: study.into(),
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
                    study: study.into(),
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
}

/// Runs `wozkit export --format FORMAT` of study `study` in `data` to `out`, with `extra`
/// arguments; checks that it succeeds and returns the JSON written.
pub fn export_json(format: &str, data: &Path, out: &Path, study: &str, extra: &[&str]) -> Value {
    let (data, out) = (data.display().to_string(), out.display().to_string());
    let mut args = vec![
        "export", "--format", format, "--data", &data, "--out", &out, "--study", study,
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = wozkit(&args);
    assert_eq!(code, 0, "export failed: {stdout}\n{stderr}");
    let text = std::fs::read_to_string(&out).expect("export written");
    serde_json::from_str(&text).expect("export is JSON")
}

/// Checks that `wozkit export --format FORMAT … FLAG VALUE` is refused with a message naming
/// the flag and `named` (the format the flag goes with).
pub fn assert_refused(
    data: &Path,
    out: &Path,
    format: &str,
    (flag, value): (&str, &str),
    named: &str,
) {
    let (code, _, stderr) = wozkit(&[
        "export",
        "--format",
        format,
        "--data",
        &data.display().to_string(),
        "--out",
        &out.display().to_string(),
        flag,
        value,
    ]);
    assert_ne!(code, 0, "{flag} with {format} is refused");
    assert!(
        stderr.contains(flag) && stderr.contains(named),
        "the refusal names the flag and the format: {stderr}"
    );
}
