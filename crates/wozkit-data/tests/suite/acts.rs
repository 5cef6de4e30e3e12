//! Adjudicated dialogue acts: the majority rule and its tie, and the export pass over a
//! MultiWOZ session whose speakers do not alternate (the acts land on the right turn, not on
//! the empty turn the format inserts).

use serde_json::{Value, json};
use wozkit_core::evaluation::{ActLabel, ActPair};
use wozkit_core::event::{Actor, Event, EventKind, MessageSource, Role};
use wozkit_data::acts::{AdjudicatedActs, TurnActs, adjudicate_acts};
use wozkit_data::stored::StoredSession;
use wozkit_data::{Format, export_multiwoz21};

fn label(acts: &[&str], pairs: &[(&str, &str, &str)]) -> ActLabel {
    ActLabel {
        acts: acts.iter().map(|a| a.to_string()).collect(),
        pairs: pairs
            .iter()
            .map(|(act, slot, value)| ActPair {
                act: act.to_string(),
                slot: slot.to_string(),
                value: value.to_string(),
            })
            .collect(),
    }
}

#[test]
fn an_act_is_kept_by_more_than_half_and_exactly_half_is_a_tie() {
    let a = adjudicate_acts(&[
        label(&["inform", "greet"], &[("inform", "food", "thai")]),
        label(
            &["inform"],
            &[("inform", "food", "thai"), ("inform", "area", "north")],
        ),
        label(
            &["inform", "greet", "greet"],
            &[("inform", "food", "thai"), ("greet", "x", "y")],
        ),
        label(&["request"], &[]),
    ]);
    assert_eq!(a.of, 4);
    assert_eq!(
        a.acts,
        ["inform"],
        "inform 3 of 4; greet 2 of 4 (counted once per label)"
    );
    assert_eq!(a.tied, ["greet"]);
    assert_eq!(
        a.pairs,
        [ActPair {
            act: "inform".into(),
            slot: "food".into(),
            value: "thai".into()
        }],
        "food=thai 3 of 4 is kept; area=north 1 of 4 is not"
    );
    let two = adjudicate_acts(&[
        label(&["inform"], &[("inform", "food", "thai")]),
        label(&["inform"], &[("inform", "food", "thai")]),
    ]);
    assert_eq!(two.acts, ["inform"]);
    assert_eq!(two.pairs.len(), 1);
    assert_eq!(adjudicate_acts(&[]), AdjudicatedActs::default());
}

fn message(seq: u64, role: Role, text: &str) -> Event {
    Event {
        v: 1,
        session: "s".into(),
        seq,
        at_ms: 1,
        actor: Actor::Participant {
            role,
            participant: None,
        },
        kind: EventKind::Message {
            role,
            text: text.into(),
            source: MessageSource::Free,
        },
    }
}

#[test]
fn acts_land_on_their_turn_when_the_format_merges_messages() {
    let mut session = StoredSession {
        store_id: "s".into(),
        origin: None,
        first_at_ms: 1,
        events: vec![
            message(1, Role::User, "Hi."),
            message(2, Role::User, "Thai food?"),
            message(3, Role::Wizard, "Sure."),
        ],
    };
    let mut acts = TurnActs::default();
    acts.sessions.entry("s".into()).or_default().insert(
        1,
        adjudicate_acts(&[label(
            &["Restaurant-Inform"],
            &[("Restaurant-Inform", "food", "thai")],
        )]),
    );
    assert!(acts.apply(Format::MultiWoz21, &mut session).expect("apply"));
    let mut out = vec![];
    export_multiwoz21(&[session.dataset_view()], &mut out).expect("export");
    let file: Value = serde_json::from_slice(&out).expect("json");
    let log = file["s"]["log"].as_array().expect("log");
    let texts: Vec<&str> = log
        .iter()
        .map(|t| t["text"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        texts,
        ["Hi. Thai food?", "Sure."],
        "the user's two messages are one turn"
    );
    assert_eq!(
        log[0]["dialog_act"],
        json!({"Restaurant-Inform": [["food", "thai"]]})
    );
    assert_eq!(log[1]["dialog_act"], json!({}));
    assert_eq!(
        log[0]["metadata"],
        json!({}),
        "the other fields as the format writes them"
    );
    assert!(
        !acts
            .apply(Format::Taskmaster1, &mut session)
            .expect("apply"),
        "no acts in Taskmaster-1"
    );
}
