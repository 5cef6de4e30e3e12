//! Self-dialogs and spans in the core: turns alternate and only the last may be fixed, spans
//! count characters as Taskmaster-1 does (not bytes), segments merge annotators' equal spans,
//! and the loader explains a wrong `self_dialog` or `spans` section.

use serde_json::json;
use wozkit_core::evaluation::{
    SelfDialogs, Span, SpanProblem, TurnProblem, check_span, segments_of, write_turn,
};
use wozkit_core::load::{StudySource, load_text};

fn spec(min: u32, max: u32) -> SelfDialogs {
    serde_json::from_value(json!({
        "scenarios": [{"id": "s", "instructions": "x"}],
        "min_turns": min, "max_turns": max, "max_chars": 10
    }))
    .expect("spec")
}

#[test]
fn turns_alternate_and_only_the_last_can_be_fixed() {
    let spec = spec(1, 3);
    let mut turns = vec![];
    assert_eq!(
        write_turn(&spec, &mut turns, 0, Some("ASSISTANT"), "hi"),
        Err(TurnProblem::WrongSpeaker {
            index: 0,
            expected: "USER"
        })
    );
    assert_eq!(
        write_turn(&spec, &mut turns, 0, Some("user"), " hi "),
        Ok("hi".into())
    );
    assert_eq!(
        write_turn(&spec, &mut turns, 2, None, "skip"),
        Err(TurnProblem::OutOfOrder {
            index: 2,
            expected: 1
        })
    );
    write_turn(&spec, &mut turns, 1, Some("ASSISTANT"), "hello").expect("turn 1");
    write_turn(&spec, &mut turns, 1, None, "hello!").expect("fix of turn 1");
    assert_eq!(
        write_turn(&spec, &mut turns, 0, None, "changed"),
        Err(TurnProblem::OutOfOrder {
            index: 0,
            expected: 2
        })
    );
    assert_eq!(
        write_turn(&spec, &mut turns, 2, None, "ünïcödé ok"),
        Ok("ünïcödé ok".into()),
        "ten characters fit max_chars 10, though more bytes"
    );
    assert_eq!(
        write_turn(&spec, &mut turns, 3, None, "more"),
        Err(TurnProblem::Full { max: 3 })
    );
    assert_eq!(
        write_turn(&spec, &mut turns, 2, None, "eleven char"),
        Err(TurnProblem::TooLong { max: 10 })
    );
    assert_eq!(turns, ["hi", "hello!", "ünïcödé ok"]);
}

#[test]
fn spans_count_characters_and_are_checked() {
    let utterances = ["Un café crème, s'il vous plaît", "D'accord"];
    let slots = vec!["coffee.name".to_string()];
    // "crème" starts at character 8 (byte 9: "é" is two bytes).
    let span = check_span(&utterances, &slots, 0, 8, 13, "coffee.name", None).expect("span");
    assert_eq!(span.text, "crème");
    assert_eq!(
        check_span(&utterances, &slots, 0, 8, 13, "coffee.name", Some("creme")),
        Err(SpanProblem::TextMismatch {
            found: "crème".into(),
            given: "creme".into()
        })
    );
    assert_eq!(
        check_span(&utterances, &slots, 0, 25, 31, "coffee.name", None),
        Err(SpanProblem::PastEnd { end: 31, len: 30 })
    );
    assert_eq!(
        check_span(&utterances, &slots, 2, 0, 1, "coffee.name", None),
        Err(SpanProblem::NoTurn { turn: 2, turns: 2 })
    );
    assert_eq!(
        check_span(&utterances, &slots, 1, 3, 3, "coffee.name", None),
        Err(SpanProblem::Empty { start: 3, end: 3 })
    );
    assert!(matches!(
        check_span(&utterances, &slots, 1, 0, 2, "coffee.size", None),
        Err(SpanProblem::UnknownSlot { .. })
    ));
}

#[test]
fn equal_spans_of_two_annotators_are_one_segment_with_two_names() {
    let s = |start, end, text: &str, slot: &str| Span {
        turn: 0,
        start_index: start,
        end_index: end,
        text: text.into(),
        slot: slot.into(),
    };
    let spans = [
        s(8, 13, "crème", "coffee.name"),
        s(3, 7, "café", "coffee.type"),
        s(8, 13, "crème", "coffee.name"),
    ];
    assert_eq!(
        segments_of(&spans, 0),
        vec![
            json!({"start_index": 3, "end_index": 7, "text": "café",
                   "annotations": [{"name": "coffee.type"}]}),
            json!({"start_index": 8, "end_index": 13, "text": "crème",
                   "annotations": [{"name": "coffee.name"}, {"name": "coffee.name"}]}),
        ]
    );
    assert!(segments_of(&spans, 1).is_empty());
}

#[test]
fn the_loader_explains_a_wrong_section() {
    let study = |evaluation: &str| {
        format!("id: t\ntitle: T\nflow:\n  user:\n    - {{kind: rate}}\nevaluation:\n{evaluation}")
    };
    let cases = [
        ("  task: self_dialog\n", "needs a `self_dialog` section"),
        (
            "  task: self_dialog\n  self_dialog: {min_turns: 5, max_turns: 2, scenarios: [{id: a, instructions: x}]}\n",
            "min_turns (5) <= max_turns (2)",
        ),
        (
            "  task: self_dialog\n  self_dialog: {scenarios: [{id: a, instructions: x}, {id: a, instructions: other}]}\n",
            "used twice",
        ),
        (
            "  task: spans\n  spans: {slots: []}\n  dialogues: [{id: d, system: s, turns: [{speaker: user, text: hi}]}]\n",
            "at least one slot name",
        ),
        (
            "  task: spans\n  dialogues: [{id: d, system: s, turns: [{speaker: user, text: hi}]}]\n",
            "needs a `spans` section",
        ),
    ];
    for (evaluation, message) in cases {
        let text = study(evaluation);
        match load_text("t.yaml", &text, StudySource::Dir(".".into())) {
            Ok(_) => panic!("loaded:\n{text}"),
            Err(d) => assert!(d.to_string().contains(message), "{message:?} not in:\n{d}"),
        }
    }
    let good =
        study("  task: self_dialog\n  self_dialog: {scenarios: [{id: a, instructions: x}]}\n");
    assert!(load_text("t.yaml", &good, StudySource::Dir(".".into())).is_ok());
}
