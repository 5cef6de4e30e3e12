//! Self-dialogs (written on a `self_dialog` page, stored as `dlg-…` sessions) with the spans of
//! a `spans` study: exported to Taskmaster-1 in the published self-dialog layout, and imported
//! back unchanged, field by field.

use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::event::{
    Actor, EVENT_SCHEMA_VERSION, Event, EventKind, ItemPool, Judgment, MessageSource, Role,
};
use wozkit_data::{ImportedSession, Input, add_segments, export_taskmaster1, import_taskmaster1};

const UTTERANCES: [&str; 4] = [
    "A table for 4 at Luigi's, please.",
    "At what time?",
    "7 pm tonight.",
    "Booked: Luigi's, 4 people, 7 pm.",
];

/// A session as the server stores a submitted self-dialog.
fn stored_dialogue(id: &str, scenario: &str) -> ImportedSession {
    let mut kinds = vec![EventKind::Annotation {
        key: "taskmaster1.dialogue".into(),
        value: json!({"conversation_id": id, "instruction_id": scenario, "utterances": null}),
    }];
    for (i, text) in UTTERANCES.iter().enumerate() {
        let role = if i % 2 == 0 { Role::User } else { Role::Wizard };
        kinds.push(EventKind::Message {
            role,
            text: text.to_string(),
            source: MessageSource::Free,
        });
        kinds.push(EventKind::Annotation {
            key: "taskmaster1.turn".into(),
            value: json!({ "index": i }),
        });
    }
    let events = kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Event {
            v: EVENT_SCHEMA_VERSION,
            session: id.to_string(),
            seq: i as u64 + 1,
            at_ms: 1_000,
            actor: Actor::System,
            kind,
        })
        .collect();
    ImportedSession {
        id: id.to_string(),
        events,
    }
}

fn span_judgment(dialogue: &str, counted: bool, spans: Value) -> Judgment {
    let mut answers = IndexMap::new();
    answers.insert("spans".to_string(), spans);
    Judgment {
        page: "rate-2".into(),
        item: dialogue.into(),
        lease: format!("lease-{counted}"),
        pool: ItemPool::Item,
        dialogues: vec![dialogue.into()],
        systems: vec!["self-dialog-demo".into()],
        choice: None,
        justification: None,
        answers,
        turns: vec![],
        counted,
        surplus: !counted,
        gold_correct: None,
        claimed_at_ms: 0,
        void: false,
    }
}

fn span(turn: u32, start: u32, end: u32, text: &str, slot: &str) -> Value {
    json!({"turn": turn, "start_index": start, "end_index": end, "text": text, "slot": slot})
}

#[test]
fn self_dialog_with_spans_exports_in_the_published_layout_and_round_trips() {
    let mut sessions = vec![
        stored_dialogue("dlg-a1", "restaurant-table-1"),
        stored_dialogue("dlg-b2", "pizza-ordering-1"),
    ];
    let first = span_judgment(
        "dlg-a1",
        true,
        json!([
            span(0, 12, 13, "4", "restaurant_reservation.num.guests"),
            span(
                0,
                17,
                24,
                "Luigi's",
                "restaurant_reservation.name.restaurant"
            ),
            span(2, 0, 4, "7 pm", "restaurant_reservation.time.reservation"),
        ]),
    );
    let second = span_judgment(
        "dlg-a1",
        true,
        json!([span(
            2,
            0,
            4,
            "7 pm",
            "restaurant_reservation.time.reservation"
        )]),
    );
    // Not counted (submitted after the item had its annotations): left out.
    let surplus = span_judgment(
        "dlg-a1",
        false,
        json!([span(
            1,
            3,
            7,
            "what",
            "restaurant_reservation.time.reservation"
        )]),
    );
    let elsewhere = span_judgment("dlg-zz", true, json!([]));
    let unmatched = add_segments(&mut sessions, &[first, second, surplus, elsewhere]);
    assert_eq!(
        unmatched, 1,
        "the judgment of an unknown dialogue is reported"
    );

    let mut out = Vec::new();
    export_taskmaster1(&sessions, &mut out).expect("export");
    let exported: Value = serde_json::from_slice(&out).expect("JSON");
    let expected = json!([
        {
            "conversation_id": "dlg-a1",
            "instruction_id": "restaurant-table-1",
            "utterances": [
                {"index": 0, "speaker": "USER", "text": UTTERANCES[0], "segments": [
                    {"start_index": 12, "end_index": 13, "text": "4",
                     "annotations": [{"name": "restaurant_reservation.num.guests"}]},
                    {"start_index": 17, "end_index": 24, "text": "Luigi's",
                     "annotations": [{"name": "restaurant_reservation.name.restaurant"}]}
                ]},
                {"index": 1, "speaker": "ASSISTANT", "text": UTTERANCES[1]},
                {"index": 2, "speaker": "USER", "text": UTTERANCES[2], "segments": [
                    {"start_index": 0, "end_index": 4, "text": "7 pm", "annotations": [
                        {"name": "restaurant_reservation.time.reservation"},
                        {"name": "restaurant_reservation.time.reservation"}
                    ]}
                ]},
                {"index": 3, "speaker": "ASSISTANT", "text": UTTERANCES[3]}
            ]
        },
        {
            "conversation_id": "dlg-b2",
            "instruction_id": "pizza-ordering-1",
            "utterances": [
                {"index": 0, "speaker": "USER", "text": UTTERANCES[0]},
                {"index": 1, "speaker": "ASSISTANT", "text": UTTERANCES[1]},
                {"index": 2, "speaker": "USER", "text": UTTERANCES[2]},
                {"index": 3, "speaker": "ASSISTANT", "text": UTTERANCES[3]}
            ]
        }
    ]);
    assert_eq!(exported, expected);
    // Key order as in the published files.
    let record = exported[0].as_object().expect("object");
    assert_eq!(
        record.keys().collect::<Vec<_>>(),
        ["conversation_id", "instruction_id", "utterances"]
    );
    let utterance = exported[0]["utterances"][0].as_object().expect("object");
    assert_eq!(
        utterance.keys().collect::<Vec<_>>(),
        ["index", "speaker", "text", "segments"]
    );
    // Every segment's text is the utterance's characters between its offsets (end excluded).
    for u in exported[0]["utterances"].as_array().expect("array") {
        let chars: Vec<char> = u["text"].as_str().expect("text").chars().collect();
        for seg in u["segments"].as_array().into_iter().flatten() {
            let (s, e) = (
                seg["start_index"].as_u64().expect("start") as usize,
                seg["end_index"].as_u64().expect("end") as usize,
            );
            assert_eq!(chars[s..e].iter().collect::<String>(), seg["text"]);
        }
    }

    // Importing the export gives the same dialogues, field by field.
    let imported =
        import_taskmaster1(&Input::new("self-dialogs.json", out.clone())).expect("import");
    assert_eq!(imported.len(), sessions.len());
    for (back, original) in imported.iter().zip(&sessions) {
        assert_eq!(back.id, original.id);
        let a: Vec<(Role, &str)> = back.messages().collect();
        let b: Vec<(Role, &str)> = original.messages().collect();
        assert_eq!(a, b, "{}: speakers and texts", back.id);
        let notes = |s: &ImportedSession| -> Vec<Value> {
            s.annotations("taskmaster1.turn").cloned().collect()
        };
        assert_eq!(
            notes(back),
            notes(original),
            "{}: index and segments",
            back.id
        );
        assert_eq!(
            back.annotations("taskmaster1.dialogue").next(),
            original.annotations("taskmaster1.dialogue").next(),
            "{}: conversation_id and instruction_id",
            back.id
        );
    }
    let mut again = Vec::new();
    export_taskmaster1(&imported, &mut again).expect("export again");
    assert_eq!(again, out, "the second export is byte for byte the first");
}
