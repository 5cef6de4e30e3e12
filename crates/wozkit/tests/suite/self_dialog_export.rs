//! `wozkit export --format taskmaster1 --spans STUDY`: the self-dialogs of a study, as the
//! server stores them (`dlg-<lease>`, each utterance a message followed by its
//! `taskmaster1.turn` annotation), get the spans that the workers of a span-annotation study
//! marked as Taskmaster-1 `segments`, as the server's download does: spans of two annotators
//! with the same offsets are one segment naming both slots, a judgment that is not counted adds
//! nothing. Without `--spans` no utterance has segments; `--spans` with another format is
//! refused with a message naming it.

use crate::annotated;

use std::path::Path;

use serde_json::{Value, json};
use wozkit_core::event::{Actor, EndReason, EventKind, Judgment, MessageSource, Role};
use wozkit_store::{NewEvent, NewSession};

use annotated::{assert_refused, export_json, log_judgments};

/// The self-dialog study and the span study that annotates it.
const DIALOGUES: &str = "hotel-self";
const SPANS: &str = "hotel-spans";

/// The two self-dialogs: (session id, scenario, utterances, USER first).
fn dialogues() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        (
            "dlg-L1",
            "hotel-1",
            vec![
                "I need a room in Leeds for two nights.",
                "Which dates would you like?",
                "From 3 May, for two adults.",
                "The Corn Hotel has a double room for 180 pounds.",
            ],
        ),
        (
            "dlg-L2",
            "hotel-2",
            vec!["Book me a room in York.", "For how many people?"],
        ),
    ]
}

/// A counted (or not) span judgment of `dialogue` with `spans` ([turn, start, end, text, slot]).
fn judgment(
    lease: &str,
    dialogue: &str,
    counted: bool,
    spans: &[(u32, u32, u32, &str, &str)],
) -> Judgment {
    let spans: Vec<Value> = spans
        .iter()
        .map(|(turn, start, end, text, slot)| {
            json!({"turn": turn, "start_index": start, "end_index": end, "text": text, "slot": slot})
        })
        .collect();
    annotated::judgment(lease, dialogue, counted, "self", json!({ "spans": spans }))
}

/// The store: the self-dialogs laid out as the server writes them, and the participant logs of
/// three span annotators.
async fn fill(data: &Path) {
    let store = wozkit_store::open(&data.display().to_string())
        .await
        .expect("open store");
    for (id, scenario, turns) in dialogues() {
        store
            .create_session(NewSession {
                id: id.into(),
                study_id: DIALOGUES.into(),
                study_version: "1".into(),
                seed: 0,
                created_at_ms: 1_000,
            })
            .await
            .expect("create dialogue");
        let writer = Actor::Participant {
            role: Role::User,
            participant: Some("writer".into()),
        };
        let mut events = vec![NewEvent {
            actor: writer.clone(),
            kind: EventKind::Annotation {
                key: "taskmaster1.dialogue".into(),
                value: json!({"conversation_id": id, "instruction_id": scenario, "utterances": null}),
            },
            at_ms: 1_000,
        }];
        for (i, text) in turns.iter().enumerate() {
            let role = if i % 2 == 0 { Role::User } else { Role::Wizard };
            events.push(NewEvent {
                actor: Actor::Participant {
                    role,
                    participant: Some("writer".into()),
                },
                kind: EventKind::Message {
                    role,
                    text: text.to_string(),
                    source: MessageSource::Free,
                },
                at_ms: 1_000,
            });
            events.push(NewEvent {
                actor: writer.clone(),
                kind: EventKind::Annotation {
                    key: "taskmaster1.turn".into(),
                    value: json!({ "index": i }),
                },
                at_ms: 1_000,
            });
        }
        store.append(id, events).await.expect("append dialogue");
        store
            .end_session(id, EndReason::Finished, 2_000)
            .await
            .expect("end dialogue");
    }
    let annotators = [
        (
            "a1",
            judgment(
                "L-a1",
                "dlg-L1",
                true,
                &[
                    (0, 17, 22, "Leeds", "location"),
                    (2, 5, 10, "3 May", "date"),
                ],
            ),
        ),
        (
            "a2",
            judgment(
                "L-a2",
                "dlg-L1",
                true,
                &[
                    (0, 17, 22, "Leeds", "city"),
                    (3, 4, 14, "Corn Hotel", "name"),
                ],
            ),
        ),
        // Submitted after its lease had gone to another worker: not counted, so not exported.
        (
            "a3",
            judgment("L-a3", "dlg-L2", false, &[(0, 18, 22, "York", "location")]),
        ),
    ];
    log_judgments(store.as_ref(), SPANS, annotators.into()).await;
    store.close().await;
}

/// Runs `wozkit export --format taskmaster1` of the self-dialog study with `extra` arguments;
/// the exported conversations by their utterances' first text.
fn export(data: &Path, out: &Path, extra: &[&str]) -> Vec<Value> {
    let value = export_json("taskmaster1", data, out, DIALOGUES, extra);
    value.as_array().expect("a list of conversations").clone()
}

/// The `segments` of each utterance of the conversation whose first utterance is `first`
/// (`Value::Null` where the utterance has none).
fn segments(conversations: &[Value], first: &str) -> Vec<Value> {
    let conversation = conversations
        .iter()
        .find(|c| c["utterances"][0]["text"] == first)
        .unwrap_or_else(|| panic!("no conversation starting {first:?} in {conversations:?}"));
    conversation["utterances"]
        .as_array()
        .expect("utterances")
        .iter()
        .map(|u| u.get("segments").cloned().unwrap_or(Value::Null))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_become_segments_with_the_flag_and_none_without() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    fill(&data).await;
    let (l1, l2) = (dialogues()[0].2[0], dialogues()[1].2[0]);

    let with = export(&data, &dir.path().join("with.json"), &["--spans", SPANS]);
    assert_eq!(with.len(), 2, "both self-dialogs exported: {with:?}");
    let seg = |start: u32, end: u32, text: &str, names: &[&str]| {
        let names: Vec<Value> = names.iter().map(|n| json!({ "name": n })).collect();
        json!({"start_index": start, "end_index": end, "text": text, "annotations": names})
    };
    assert_eq!(
        segments(&with, l1),
        vec![
            json!([seg(17, 22, "Leeds", &["location", "city"])]),
            Value::Null,
            json!([seg(5, 10, "3 May", &["date"])]),
            json!([seg(4, 14, "Corn Hotel", &["name"])]),
        ],
        "the annotators' spans of dlg-L1, the same offsets merged"
    );
    // Each segment's text is the utterance's characters at its offsets.
    let conversation = with
        .iter()
        .find(|c| c["utterances"][0]["text"] == l1)
        .expect("dlg-L1");
    for u in conversation["utterances"].as_array().expect("utterances") {
        let text: Vec<char> = u["text"].as_str().expect("text").chars().collect();
        for s in u["segments"].as_array().into_iter().flatten() {
            let (a, b) = (
                s["start_index"].as_u64().expect("start") as usize,
                s["end_index"].as_u64().expect("end") as usize,
            );
            assert_eq!(
                s["text"].as_str(),
                Some(text[a..b].iter().collect::<String>().as_str())
            );
        }
    }
    assert_eq!(
        segments(&with, l2),
        vec![Value::Null, Value::Null],
        "an uncounted judgment adds no segment"
    );

    let without = export(&data, &dir.path().join("without.json"), &[]);
    assert_eq!(without.len(), 2);
    for c in &without {
        for u in c["utterances"].as_array().expect("utterances") {
            assert!(
                u.get("segments").is_none(),
                "no segments without --spans: {u}"
            );
        }
    }
    // Apart from the segments, the two exports are the same conversations.
    let strip = |cs: &[Value]| -> Vec<Value> {
        cs.iter()
            .map(|c| {
                let mut c = c.clone();
                for u in c["utterances"].as_array_mut().expect("utterances") {
                    u.as_object_mut().expect("utterance").remove("segments");
                }
                c
            })
            .collect()
    };
    assert_eq!(strip(&with), strip(&without));

    assert_refused(
        &data,
        &dir.path().join("x.json"),
        "crosswoz",
        ("--spans", SPANS),
        "taskmaster1",
    );
}

/// The span study's file: the built-in span study as `hotel-spans` with the slots these
/// workers used, `name` and `date` mapped onto Taskmaster-1 annotation names.
fn mapped_span_study(dir: &Path) -> std::path::PathBuf {
    let builtin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wozkit-core/studies/self-dialog-spans/study.yaml");
    let text = std::fs::read_to_string(builtin).expect("the built-in span study");
    let slots_start = text.find("    slots:\n").expect("slots");
    let slots_end = slots_start + text[slots_start..].find("  no_items:").expect("no_items");
    let text = format!(
        "{}    slots: [location, city, date, name]\n{}\
         datasets:\n  taskmaster1:\n    domain: restaurant-table\n    segments:\n      \
         name: restaurant_reservation.name.restaurant\n      \
         date: restaurant_reservation.time.reservation\n",
        &text[..slots_start],
        &text[slots_end..]
    )
    .replacen("id: self-dialog-spans", &format!("id: {SPANS}"), 1);
    let file = dir.join("hotel-spans.yaml");
    std::fs::write(&file, text).expect("study written");
    file
}

#[tokio::test(flavor = "multi_thread")]
async fn a_span_study_mapping_gives_the_segments_taskmaster1_names() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    fill(&data).await;
    let l1 = dialogues()[0].2[0];
    let study = mapped_span_study(dir.path());
    let study = study.to_str().expect("utf-8 path");
    let with = export(
        &data,
        &dir.path().join("mapped.json"),
        &["--spans", SPANS, "--mapping", study],
    );
    let names = |u: &Value| -> Vec<String> {
        u.as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["annotations"].as_array().cloned().unwrap_or_default())
            .filter_map(|a| a["name"].as_str().map(str::to_string))
            .collect()
    };
    let got: Vec<Vec<String>> = segments(&with, l1).iter().map(names).collect();
    assert_eq!(
        got,
        vec![
            vec!["location".to_string(), "city".into()],
            vec![],
            vec!["restaurant_reservation.time.reservation".into()],
            vec!["restaurant_reservation.name.restaurant".into()],
        ],
        "mapped slots renamed, the others as marked"
    );
}
