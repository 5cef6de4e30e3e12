//! Dialogue-act annotation of turns in the core: which turns become items, how a submitted
//! label is checked (and what the problems say), and the loader's checks of the `acts` section.

use serde_json::json;
use wozkit_core::evaluation::{
    ActAnnotation, ActPair, ActProblem, Dialogue, EvalTask, Evaluation, PairRow, check_act_label,
    parse_turn_item, turn_item_id,
};
use wozkit_core::event::{Actor, Event, EventKind, MessageSource, Role};
use wozkit_core::load::{StudySource, load_text};

fn spec() -> ActAnnotation {
    serde_json::from_value(json!({
        "acts": ["inform", "request", "greet"],
        "slots": ["food", "area"],
    }))
    .expect("spec")
}

fn row(act: &str, slot: &str, value: &str) -> PairRow {
    PairRow {
        act: act.into(),
        slot: slot.into(),
        value: value.into(),
    }
}

fn evaluation(which: &str) -> Evaluation {
    serde_json::from_value(json!({
        "task": "turn_acts",
        "acts": {"acts": ["inform"], "which": which},
        "dialogues": [
            {"id": "d1", "system": "s", "turns": [
                {"speaker": "user", "text": "hi"},
                {"speaker": "wizard", "text": "hello", "free_text": true},
                {"speaker": "user", "text": "cheap food"},
                {"speaker": "wizard", "text": "Which area?", "free_text": false},
            ]},
            {"id": "d2", "system": "s", "turns": [{"speaker": "wizard", "text": "written"}]},
        ],
    }))
    .expect("evaluation")
}

fn ids(ev: &Evaluation) -> Vec<String> {
    ev.items().into_iter().map(|i| i.id).collect()
}

#[test]
fn each_selected_turn_is_an_item_of_its_dialogue() {
    assert_eq!(ids(&evaluation("user")), ["d1#0", "d1#2"]);
    assert_eq!(
        ids(&evaluation("wizard_free_text")),
        ["d1#1", "d2#0"],
        "a template turn is left out; a written turn of unknown source is taken"
    );
    assert_eq!(ids(&evaluation("all")).len(), 5);
    let ev = evaluation("user");
    assert_eq!(ev.task, EvalTask::TurnActs);
    for item in ev.items() {
        let (d, i) = parse_turn_item(&item.id).expect("a turn item id");
        assert_eq!(
            item.dialogues,
            std::slice::from_ref(&item.id),
            "the turn is what a worker sees once"
        );
        assert!(ev.dialogue(d).is_some());
        assert_eq!(ev.system_of(&item.id), "s");
        assert_eq!(turn_item_id(d, i), item.id);
    }
    assert_eq!(parse_turn_item("sess#x#3"), Some(("sess#x", 3)));
    assert_eq!(parse_turn_item("no-turn"), None);
}

#[test]
fn a_stored_session_knows_which_turns_were_free_text() {
    let msg = |role: Role, text: &str, source: MessageSource| Event {
        v: 1,
        session: "s1".into(),
        seq: 1,
        at_ms: 0,
        actor: Actor::Participant {
            role,
            participant: None,
        },
        kind: EventKind::Message {
            role,
            text: text.into(),
            source,
        },
    };
    let events = vec![
        msg(Role::User, "hi", MessageSource::Free),
        msg(
            Role::Wizard,
            "Hello",
            MessageSource::Fixed {
                id: "hello".into(),
                label: "greet".into(),
                act_type: wozkit_core::model::ActType::Interaction,
            },
        ),
        msg(Role::Wizard, "typed", MessageSource::Free),
    ];
    let d = Dialogue::from_events("s1", "w".into(), None, &events).expect("dialogue");
    let free: Vec<Option<bool>> = d.turns.iter().map(|t| t.free_text).collect();
    assert_eq!(free, [Some(true), Some(false), Some(true)]);
}

#[test]
fn a_label_is_checked_against_the_act_set_and_slots() {
    let spec = spec();
    let label = check_act_label(
        &spec,
        &["inform".into(), "greet".into()],
        &[row("inform", "food", " cheap "), row("", "", "")],
    )
    .expect("a good label");
    assert_eq!(label.acts, ["inform", "greet"]);
    assert_eq!(
        label.pairs,
        [ActPair {
            act: "inform".into(),
            slot: "food".into(),
            value: "cheap".into()
        }],
        "values are trimmed and empty rows left out"
    );

    let problems = check_act_label(&spec, &[], &[]).unwrap_err();
    assert_eq!(problems, [ActProblem::NoAct]);
    assert!(
        problems[0]
            .to_string()
            .contains("at least one dialogue act"),
        "{problems:?}"
    );

    let problems = check_act_label(
        &spec,
        &["inform".into(), "thank".into()],
        &[
            row("request", "food", "x"),
            row("inform", "price", "cheap"),
            row("inform", "area", ""),
        ],
    )
    .unwrap_err();
    let all = problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    for expected in [
        "act `thank` is not in the study's act set (inform, request, greet)",
        "pair 1: its act `request` is not one of the ticked acts (inform)",
        "pair 2: slot `price` is not one of the study's slots (food, area)",
        "pair 3: give the value of slot `area`",
    ] {
        assert!(all.contains(expected), "{expected:?} not in:\n{all}");
    }
}

#[test]
fn the_loader_explains_a_wrong_acts_section() {
    let study = |evaluation: &str| {
        format!("id: t\ntitle: T\nflow:\n  user:\n    - {{kind: rate}}\nevaluation:\n{evaluation}")
    };
    let dialogues = "  dialogues: [{id: d, system: s, turns: [{speaker: user, text: hi}]}]\n";
    let cases = [
        ("  task: turn_acts\n", "needs an `acts` section"),
        (
            "  task: turn_acts\n  acts: {acts: []}\n",
            "list at least one act",
        ),
        (
            "  task: turn_acts\n  acts: {acts: [inform, inform]}\n",
            "`inform` is empty or listed twice",
        ),
    ];
    for (evaluation, message) in cases {
        let text = study(&format!("{evaluation}{dialogues}"));
        match load_text("t.yaml", &text, StudySource::Dir(".".into())) {
            Ok(_) => panic!("loaded:\n{text}"),
            Err(d) => assert!(d.to_string().contains(message), "{message:?} not in:\n{d}"),
        }
    }
    let good = study(&format!(
        "  task: turn_acts\n  acts: {{acts: [inform], slots: [food]}}\n{dialogues}"
    ));
    let loaded = load_text("t.yaml", &good, StudySource::Dir(".".into())).expect("loads");
    let ev = loaded.study.evaluation.as_ref().expect("evaluation");
    assert_eq!(ids(ev), ["d#0"]);
}

#[test]
fn the_builtin_study_labels_each_guest_turn_three_times() {
    let study = wozkit_core::load::load_builtin("annotate-acts")
        .unwrap_or_else(|d| panic!("annotate-acts does not load:\n{d}"));
    let ev = study.study.evaluation.as_ref().expect("evaluation");
    assert_eq!(ev.task, EvalTask::TurnActs);
    assert_eq!(ev.judgments_per_item, 3);
    let user_turns: usize = ev
        .dialogues
        .iter()
        .map(|d| d.turns.iter().filter(|t| t.speaker == "user").count())
        .sum();
    let items = ev.items();
    assert_eq!(items.len(), user_turns);
    for item in &items {
        let (d, i) = parse_turn_item(&item.id).expect("turn item");
        let turn = &ev.dialogue(d).expect("dialogue").turns[i];
        assert_eq!(turn.speaker, "user", "{}", item.id);
    }
    let acts = ev.acts.as_ref().expect("acts");
    assert!(
        acts.acts.iter().all(|a| a.contains('-')),
        "MultiWOZ-style names"
    );
    assert!(wozkit_core::load::builtin_names().contains(&"annotate-acts".to_string()));
}
