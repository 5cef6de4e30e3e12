//! `evaluation.from_store`: an evaluation whose dialogues are sessions in the store. The loader
//! accepts it without inline dialogues (and lets items name ids it cannot know yet), reports an
//! empty selection at its line, and the pure parts the server uses (a value read from a
//! session's annotation, a session's messages as turns) give what the events hold.

use wozkit_core::evaluation::{Dialogue, FromStore, StoreStatus, StoreValue};
use wozkit_core::event::{Actor, EVENT_SCHEMA_VERSION, Event, EventKind, MessageSource, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};

/// A rating study whose `evaluation` ends with `tail` (indented two spaces).
fn rating_study(tail: &str) -> String {
    format!(
        "id: rate-stored
title: Rate stored dialogues
flow:
  user:
    - {{kind: rate}}
    - {{kind: completion}}
evaluation:
  task: rate
  questions:
    - {{id: fluent, text: Fluent?, kind: likert, points: 5}}
{tail}"
    )
}

fn load(text: &str) -> Result<LoadedStudy, Vec<String>> {
    load_text("s.yaml", text, StudySource::Dir(std::env::temp_dir()))
        .map_err(|d| d.0.iter().map(ToString::to_string).collect())
}

#[test]
fn a_rating_study_may_take_all_its_dialogues_from_the_store() {
    let text = rating_study(
        "  from_store:
    study: import:taskmaster1
    limit: 20
    system: {annotation: taskmaster1.dialogue, field: instruction_id}
",
    );
    let study = load(&text).unwrap_or_else(|p| panic!("{}", p.join("\n")));
    let ev = study.study.evaluation.expect("evaluation");
    assert!(ev.dialogues.is_empty());
    let selections = ev.store_selections();
    assert_eq!(selections.len(), 1);
    assert_eq!(selections[0].study, "import:taskmaster1");
    assert_eq!(selections[0].status, StoreStatus::Ended, "the default");
    assert_eq!(selections[0].limit, Some(20));
    assert_eq!(
        selections[0].system,
        Some(StoreValue::Field {
            annotation: "taskmaster1.dialogue".into(),
            field: "instruction_id".into()
        })
    );
    assert!(ev.items().is_empty(), "no items before the store is read");
}

#[test]
fn a_list_of_selections_and_items_naming_stored_sessions_load() {
    let text = rating_study(
        "  items: [\"crosswoz:7\"]
  from_store:
    - {study: import:crosswoz, system: crosswoz}
    - {study: woz-pilot, status: any, system: wizard, scenario: pilot}
",
    );
    let study = load(&text).unwrap_or_else(|p| panic!("{}", p.join("\n")));
    let ev = study.study.evaluation.expect("evaluation");
    assert!(matches!(ev.from_store, Some(FromStore::Many(_))));
    let s = ev.store_selections();
    assert_eq!(s.len(), 2);
    assert_eq!(s[1].status, StoreStatus::Any);
    assert_eq!(s[1].scenario, Some(StoreValue::Fixed("pilot".into())));
    assert_eq!(ev.unknown_dialogues(), vec!["crosswoz:7".to_string()]);
}

#[test]
fn without_from_store_an_unknown_item_and_no_dialogues_are_still_reported() {
    let problems = load(&rating_study("  items: [\"crosswoz:7\"]\n")).expect_err("must not load");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("unknown dialogue `crosswoz:7`")),
        "{problems:?}"
    );
}

#[test]
fn an_empty_study_or_system_is_reported_at_its_line() {
    let text = rating_study(
        "  from_store:
    study: \"\"
    system: \" \"
",
    );
    let problems = load(&text).expect_err("must not load");
    // The `evaluation` section's tail starts on line 11 of the study file.
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("s.yaml:12:") && p.contains("`study` names the study")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("s.yaml:13:") && p.contains("`system` is empty")),
        "{problems:?}"
    );
}

#[test]
fn a_limit_of_zero_and_an_unknown_field_are_shape_errors() {
    let fine = load(&rating_study("  from_store: {study: x, limit: 1}\n"));
    assert!(fine.is_ok(), "the same study with limit 1 loads: {fine:?}");
    let zero = load(&rating_study("  from_store: {study: x, limit: 0}\n")).expect_err("limit 0");
    assert!(zero.iter().any(|p| p.starts_with("s.yaml:11:")), "{zero:?}");
    let unknown = load(&rating_study("  from_store: {study: x, sytem: A}\n")).expect_err("sytem");
    assert!(
        unknown.iter().any(|p| p.starts_with("s.yaml:11:")),
        "{unknown:?}"
    );
}

fn event(seq: u64, kind: EventKind) -> Event {
    Event {
        v: EVENT_SCHEMA_VERSION,
        session: "s1".into(),
        seq,
        at_ms: 0,
        actor: Actor::System,
        kind,
    }
}

fn message(seq: u64, role: Role, text: &str) -> Event {
    event(
        seq,
        EventKind::Message {
            role,
            text: text.into(),
            source: MessageSource::Free,
        },
    )
}

#[test]
fn a_session_becomes_a_dialogue_of_its_messages_with_values_from_its_annotation() {
    let events = vec![
        event(
            1,
            EventKind::Annotation {
                key: "crsarena.dialogue".into(),
                value: serde_json::json!({"crs": {"name": "barcor"}, "round": 3}),
            },
        ),
        message(2, Role::User, "I want a comedy."),
        message(3, Role::Wizard, "How about Groundhog Day?"),
    ];
    let crs = StoreValue::Field {
        annotation: "crsarena.dialogue".into(),
        field: "crs.name".into(),
    };
    let round = StoreValue::Field {
        annotation: "crsarena.dialogue".into(),
        field: "round".into(),
    };
    let missing = StoreValue::Field {
        annotation: "crsarena.dialogue".into(),
        field: "crs.version".into(),
    };
    assert_eq!(crs.of(&events).as_deref(), Some("barcor"));
    assert_eq!(round.of(&events).as_deref(), Some("3"));
    assert_eq!(missing.of(&events), None);
    assert_eq!(
        StoreValue::Fixed("A".into()).of(&events).as_deref(),
        Some("A")
    );

    let d = Dialogue::from_events("crsarena:1", "barcor".into(), None, &events)
        .expect("the session has messages");
    assert_eq!(d.id, "crsarena:1");
    let turns: Vec<(&str, &str)> = d
        .turns
        .iter()
        .map(|t| (t.speaker.as_str(), t.text.as_str()))
        .collect();
    assert_eq!(
        turns,
        [
            ("user", "I want a comedy."),
            ("wizard", "How about Groundhog Day?")
        ]
    );
    assert!(Dialogue::from_events("x", "A".into(), None, &events[..1]).is_none());
}
