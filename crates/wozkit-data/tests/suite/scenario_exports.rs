//! A live offshore session whose study drew its scenario (fire in the north tower, husky 2 out of
//! service), exported to CrossWOZ, MultiWOZ 2.1 and ConvLab-3: each file shows the draw in the
//! format's own goal text and in the extra `scenario` key, re-import keeps it in the record's
//! annotation, and a session without a draw is written as before.

use crate::common;

use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::event::{
    Actor, EVENT_SCHEMA_VERSION, EndReason, Event, EventKind, MessageSource, Role,
};
use wozkit_data::formats::scenario::{Drawn, drawn};
use wozkit_data::{Format, ImportedSession, Input, formats, lost_events};

const ID: &str = "offshore-drawn-1";

fn object(value: Value) -> IndexMap<String, Value> {
    serde_json::from_value(value).expect("an object")
}

/// The draw of the session, written out by hand.
fn the_draw() -> Drawn {
    Drawn {
        values: object(
            json!({"fire_location": "pu_nt", "robot_out": "hsk2", "travel_distance_m": 70}),
        ),
        world: object(json!({
            "fire_location": "pu_nt",
            "robot_out": "hsk2",
            "travel_distance_m": 70,
            "fire_area": "north tower",
        })),
        out_of_service: vec!["hsk2".into()],
    }
}

fn offshore_session(draw: Option<Drawn>) -> ImportedSession {
    let participant = |role| Actor::Participant {
        role,
        participant: Some(format!("p-{}", role.as_str())),
    };
    let message = |role, text: &str| EventKind::Message {
        role,
        text: text.into(),
        source: MessageSource::Free,
    };
    let mut kinds = vec![(
        Actor::System,
        EventKind::SessionStarted {
            study: "offshore-emergency".into(),
            study_version: "1".into(),
            seed: 11,
            initial_state: "start".into(),
        },
    )];
    if let Some(d) = draw {
        kinds.push((
            Actor::System,
            EventKind::ScenarioDrawn {
                values: d.values,
                world: d.world,
                out_of_service: d.out_of_service,
            },
        ));
    }
    kinds.extend([
        (
            participant(Role::User),
            message(Role::User, "Where is the fire?"),
        ),
        (
            participant(Role::Wizard),
            message(Role::Wizard, "The alarm is in the north tower."),
        ),
        (
            participant(Role::User),
            message(Role::User, "Send husky 2 there"),
        ),
        (
            participant(Role::Wizard),
            message(Role::Wizard, "Husky 2 is out of service."),
        ),
        (
            Actor::System,
            EventKind::SessionEnded {
                reason: EndReason::Finished,
                goal_reached: true,
            },
        ),
    ]);
    let events = kinds
        .into_iter()
        .enumerate()
        .map(|(i, (actor, kind))| Event {
            v: EVENT_SCHEMA_VERSION,
            session: ID.into(),
            seq: i as u64 + 1,
            at_ms: 1_000 + i as u64,
            actor,
            kind,
        })
        .collect();
    ImportedSession {
        id: ID.into(),
        events,
    }
}

const FORMATS: [Format; 3] = [Format::CrossWoz, Format::MultiWoz21, Format::ConvLab3];

fn export(format: Format, session: &ImportedSession) -> Vec<u8> {
    let mut out = Vec::new();
    formats::export(format, std::slice::from_ref(session), &mut out).expect("export");
    out
}

/// The one record of an export (keyed by id or first of a list).
fn the_record(format: Format, file: &Value) -> Value {
    match format {
        Format::ConvLab3 => file[0].clone(),
        _ => file[ID].clone(),
    }
}

fn keys(record: &Value) -> Vec<&str> {
    record
        .as_object()
        .expect("record object")
        .keys()
        .map(String::as_str)
        .collect()
}

fn expected_scenario_key() -> Value {
    json!({
        "values": {"fire_location": "pu_nt", "robot_out": "hsk2", "travel_distance_m": 70},
        "world": {
            "fire_location": "pu_nt",
            "robot_out": "hsk2",
            "travel_distance_m": 70,
            "fire_area": "north tower",
        },
        "out_of_service": ["hsk2"],
    })
}

#[test]
fn crosswoz_shows_the_draw_in_the_task_description_and_a_scenario_key() {
    let file = common::parse(&export(
        Format::CrossWoz,
        &offshore_session(Some(the_draw())),
    ));
    let record = the_record(Format::CrossWoz, &file);
    assert_eq!(
        record["task description"],
        json!([
            "Scenario: fire_location is pu_nt.",
            "Scenario: robot_out is hsk2.",
            "Scenario: travel_distance_m is 70.",
            "Scenario: fire_area is north tower.",
            "Out of service: hsk2.",
        ])
    );
    assert_eq!(record["scenario"], expected_scenario_key());
    // The six keys of the released files keep their order; the extra key comes last.
    assert_eq!(
        keys(&record),
        [
            "sys-usr",
            "goal",
            "messages",
            "final_goal",
            "task description",
            "type",
            "scenario"
        ]
    );
    // The goal tuples stay empty: the draw is no CrossWOZ domain.
    assert_eq!(record["goal"], json!([]));
}

#[test]
fn multiwoz_shows_the_draw_in_goal_messages_and_a_scenario_key() {
    let file = common::parse(&export(
        Format::MultiWoz21,
        &offshore_session(Some(the_draw())),
    ));
    let record = the_record(Format::MultiWoz21, &file);
    assert_eq!(
        record["goal"]["message"],
        json!([
            "Scenario: fire_location is <span class='emphasis'>pu_nt</span>.",
            "Scenario: robot_out is <span class='emphasis'>hsk2</span>.",
            "Scenario: travel_distance_m is <span class='emphasis'>70</span>.",
            "Scenario: fire_area is <span class='emphasis'>north tower</span>.",
            "Out of service: <span class='emphasis'>hsk2</span>.",
        ])
    );
    assert_eq!(record["scenario"], expected_scenario_key());
    assert_eq!(keys(&record), ["goal", "log", "scenario"]);
    // Every domain of the goal is still there and empty.
    for domain in [
        "taxi",
        "police",
        "hospital",
        "hotel",
        "attraction",
        "train",
        "restaurant",
    ] {
        assert_eq!(record["goal"][domain], json!({}), "{domain}");
    }
}

#[test]
fn multiwoz_escapes_markup_in_a_drawn_value() {
    let draw = Drawn {
        values: object(json!({"fire_location": "a<b & c>"})),
        world: IndexMap::new(),
        out_of_service: vec![],
    };
    let file = common::parse(&export(Format::MultiWoz21, &offshore_session(Some(draw))));
    let record = the_record(Format::MultiWoz21, &file);
    // Without world values the drawn values are named; no robot line without robots out.
    assert_eq!(
        record["goal"]["message"],
        json!(["Scenario: fire_location is <span class='emphasis'>a&lt;b &amp; c&gt;</span>."])
    );
}

#[test]
fn convlab3_shows_the_draw_in_the_goal_description_and_a_scenario_key() {
    let file = common::parse(&export(
        Format::ConvLab3,
        &offshore_session(Some(the_draw())),
    ));
    let record = the_record(Format::ConvLab3, &file);
    assert_eq!(
        record["goal"]["description"],
        json!(
            "Scenario: fire_location is pu_nt. Scenario: robot_out is hsk2. \
             Scenario: travel_distance_m is 70. Scenario: fire_area is north tower. \
             Out of service: hsk2."
        )
    );
    assert_eq!(record["goal"]["inform"], json!({}));
    assert_eq!(record["scenario"], expected_scenario_key());
    assert_eq!(
        keys(&record),
        [
            "dataset",
            "data_split",
            "dialogue_id",
            "original_id",
            "domains",
            "goal",
            "scenario",
            "turns"
        ]
    );
}

#[test]
fn reimport_keeps_the_draw_and_exports_the_same_file_again() {
    let session = offshore_session(Some(the_draw()));
    for format in FORMATS {
        let first = export(format, &session);
        let back =
            formats::import(format, &Input::new("drawn.json", first.clone())).expect("reimport");
        assert_eq!(back.len(), 1, "{format:?}");
        // No event holds it any more; the record's annotation does.
        assert!(
            !back[0]
                .events
                .iter()
                .any(|e| matches!(e.kind, EventKind::ScenarioDrawn { .. })),
            "{format:?}"
        );
        let note = back[0]
            .annotations(format.dialogue_key())
            .next()
            .expect("dialogue annotation");
        assert_eq!(note["scenario"], expected_scenario_key(), "{format:?}");
        assert_eq!(drawn(&back[0]), Some(the_draw()), "{format:?}");
        let texts: Vec<(Role, &str)> = back[0].messages().collect();
        assert_eq!(texts, session.messages().collect::<Vec<_>>(), "{format:?}");
        // The re-imported session writes the same file (key order included).
        let second = export(format, &back[0]);
        common::assert_same_file(&first, &second, &format!("{format:?} re-export"));
    }
}

#[test]
fn the_sidecar_still_keeps_the_event() {
    let session = offshore_session(Some(the_draw()));
    for format in FORMATS {
        let lost = lost_events(format, &session);
        assert_eq!(
            lost.iter()
                .filter(|e| matches!(e.kind, EventKind::ScenarioDrawn { .. }))
                .count(),
            1,
            "{format:?}"
        );
    }
}

#[test]
fn drawn_reads_the_event_of_a_live_session() {
    assert_eq!(drawn(&offshore_session(Some(the_draw()))), Some(the_draw()));
    assert_eq!(drawn(&offshore_session(None)), None);
}

#[test]
fn a_session_without_a_draw_is_written_as_before() {
    let session = offshore_session(None);
    for format in FORMATS {
        let file = common::parse(&export(format, &session));
        let record = the_record(format, &file);
        assert!(record.get("scenario").is_none(), "{format:?}");
        match format {
            Format::CrossWoz => assert_eq!(record["task description"], json!([])),
            Format::MultiWoz21 => assert_eq!(record["goal"]["message"], json!([])),
            _ => assert_eq!(record["goal"]["description"], json!("")),
        }
    }
}

#[test]
fn a_record_imported_from_a_corpus_is_not_given_a_draw() {
    // A session read from a CrossWOZ file that also carries a draw event (merged from a sidecar,
    // say) keeps the stored record as it was read.
    let mut session = offshore_session(Some(the_draw()));
    let first = export(Format::CrossWoz, &offshore_session(None));
    let read = formats::import(Format::CrossWoz, &Input::new("plain.json", first.clone()))
        .expect("import");
    let note = read[0]
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Annotation { .. }))
        .expect("dialogue annotation")
        .clone();
    session.events.insert(0, note);
    let again = common::parse(&export(Format::CrossWoz, &session));
    assert!(
        the_record(Format::CrossWoz, &again)
            .get("scenario")
            .is_none()
    );
    assert_eq!(
        the_record(Format::CrossWoz, &again)["task description"],
        json!([])
    );
}

/// The same session played into a store and exported from it: the streamed writer of
/// `wozkit export` puts the draw in the same places.
#[tokio::test]
async fn a_store_export_carries_the_draw_too() {
    use wozkit_data::stored::{ExportFormat, ExportOptions, NoProgress, export_store};
    use wozkit_store::{NewEvent, NewSession};

    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(&dir.path().display().to_string())
        .await
        .expect("open store");
    store
        .create_session(NewSession {
            id: ID.into(),
            study_id: "offshore-emergency".into(),
            study_version: "1".into(),
            seed: 11,
            created_at_ms: 1_000,
        })
        .await
        .expect("create session");
    let events = offshore_session(Some(the_draw()))
        .events
        .into_iter()
        .map(|e| NewEvent {
            actor: e.actor,
            kind: e.kind,
            at_ms: e.at_ms,
        })
        .collect();
    store.append(ID, events).await.expect("append");
    for (name, format) in [
        ("crosswoz", Format::CrossWoz),
        ("multiwoz", Format::MultiWoz21),
        ("convlab3", Format::ConvLab3),
    ] {
        let out = dir.path().join(format!("{name}.json"));
        let options = ExportOptions {
            format: ExportFormat::parse(name).expect("a format"),
            out: out.clone(),
            split: None,
            study: None,
            include_test: false,
        };
        export_store(&*store, &options, &NoProgress)
            .await
            .expect("export");
        let file = common::parse(&std::fs::read(&out).expect("read export"));
        let record = match format {
            Format::ConvLab3 => file[0].clone(),
            _ => file
                .as_object()
                .and_then(|o| o.values().next().cloned())
                .expect("a record"),
        };
        assert_eq!(record["scenario"], expected_scenario_key(), "{name}");
        let text = record.to_string();
        assert!(
            text.contains("Scenario: fire_location is"),
            "{name}: {text}"
        );
    }
}
