//! Chat and arena evaluations in the study file: the systems they test, the items they make
//! (one per system, one per pair), and the loader's checks, each reported at its place.

use crate::common;
use common::problems;
use wozkit_core::evaluation::{EvalTask, Schedule, pair_uncertainty};
use wozkit_core::event::ItemPool;
use wozkit_core::load::{self, StudySource, load_text};

/// An arena of three builtin systems; `{EXTRA}` is spliced into the evaluation section.
const ARENA: &str = r#"id: arena
title: Arena
flow:
  user:
    - kind: arena
    - kind: completion
  wizard: []
systems:
  alpha: {kind: builtin, fallback: ["a"]}
  beta: {kind: builtin, fallback: ["b"]}
  gamma: {kind: builtin, fallback: ["c"]}
evaluation:
  task: arena
  judgments_per_item: 4
"#;

fn with(extra: &str) -> String {
    format!("{ARENA}{extra}")
}

fn has(problems: &[String], expected: &str) {
    assert!(
        problems.iter().any(|p| p.contains(expected)),
        "expected `{expected}` among {problems:#?}"
    );
}

#[test]
fn an_arena_makes_one_item_per_pair_of_its_systems() {
    let study = load_text("s.yaml", ARENA, StudySource::Dir(std::env::temp_dir())).unwrap();
    let ev = study.study.evaluation.as_ref().unwrap();
    assert_eq!(ev.task, EvalTask::Arena);
    assert_eq!(
        ev.systems,
        ["alpha", "beta", "gamma"],
        "every declared system, in order"
    );
    let ids: Vec<String> = ev.items().into_iter().map(|i| i.id).collect();
    assert_eq!(ids, ["alpha~beta", "alpha~gamma", "beta~gamma"]);
    assert!(ev.items().iter().all(|i| i.pool == ItemPool::Item));
    assert_eq!(ev.item_systems("alpha~gamma"), ["alpha", "gamma"]);
    assert_eq!(ev.schedule, Schedule::Balanced);
}

#[test]
fn listed_systems_narrow_the_arena() {
    let study = load_text(
        "s.yaml",
        &with("  systems: [gamma, alpha]\n"),
        StudySource::Dir(std::env::temp_dir()),
    )
    .unwrap();
    let ev = study.study.evaluation.as_ref().unwrap();
    let ids: Vec<String> = ev.items().into_iter().map(|i| i.id).collect();
    assert_eq!(ids, ["gamma~alpha"]);
}

#[test]
fn a_chat_makes_one_item_per_system() {
    let text = ARENA
        .replace("kind: arena", "kind: chat")
        .replace("task: arena", "task: chat");
    let study = load_text("s.yaml", &text, StudySource::Dir(std::env::temp_dir())).unwrap();
    let ev = study.study.evaluation.as_ref().unwrap();
    let ids: Vec<String> = ev.items().into_iter().map(|i| i.id).collect();
    assert_eq!(ids, ["alpha", "beta", "gamma"]);
    assert_eq!(ev.item_systems("beta"), ["beta"]);
}

#[test]
fn systems_added_at_start_join_an_arena_that_lists_none() {
    let mut study = load_text("s.yaml", ARENA, StudySource::Dir(std::env::temp_dir())).unwrap();
    study.study.systems.insert(
        "delta".into(),
        wozkit_core::systems::SystemSpec::openai("http://127.0.0.1:9/v1", "delta"),
    );
    load::default_systems(&mut study.study);
    let ev = study.study.evaluation.as_ref().unwrap();
    assert_eq!(ev.systems, ["alpha", "beta", "gamma", "delta"]);
    assert_eq!(ev.items().len(), 6);
}

#[test]
fn the_built_in_studies_load() {
    let arena = load::load_builtin("arena-demo").unwrap();
    let ev = arena.study.evaluation.as_ref().unwrap();
    assert_eq!(ev.task, EvalTask::Arena);
    assert_eq!(ev.items().len(), 1);
    let chat = load::load_builtin("bot-chat-demo").unwrap();
    let ev = chat.study.evaluation.as_ref().unwrap();
    assert_eq!(ev.task, EvalTask::Chat);
    assert!(ev.annotate.is_some());
}

#[test]
fn unknown_system_is_named_with_a_suggestion() {
    let p = problems(&with("  systems: [alpha, betta]\n"));
    has(&p, "unknown system `betta`");
}

#[test]
fn an_arena_needs_two_systems() {
    let p = problems(&with("  systems: [alpha]\n"));
    has(&p, "needs at least 2 systems; it has 1");
}

#[test]
fn turn_limits_must_fit() {
    let p = problems(&with("  conversation: {min_turns: 5, max_turns: 2}\n"));
    has(&p, "`min_turns` (5) is more than `max_turns` (2)");
    let p = problems(&with("  conversation: {max_turns: 0}\n"));
    assert!(!p.is_empty(), "a conversation of no turns is refused");
}

#[test]
fn written_dialogue_fields_are_refused() {
    let p = problems(&with(
        "  dialogues: [{id: d, system: alpha, turns: [{speaker: user, text: hi}]}]\n",
    ));
    has(
        &p,
        "`dialogues` is for rating or comparing written dialogues, not a `arena`",
    );
}

#[test]
fn annotation_is_of_the_systems_replies() {
    let p = problems(&with(
        "  annotate: {speaker: bot, kind: checkboxes, options: [Good]}\n",
    ));
    has(&p, "`speaker: system`");
    let ok = problems(&with(
        "  annotate: {speaker: system, kind: checkboxes, options: [Good]}\n",
    ));
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn schedule_is_for_arenas() {
    let chat = ARENA
        .replace("kind: arena", "kind: chat")
        .replace("task: arena", "task: chat");
    let p = problems(&format!("{chat}  schedule: uncertain\n"));
    has(&p, "`schedule` chooses between pairs of systems");
    assert!(problems(&with("  schedule: uncertain\n")).is_empty());
}

#[test]
fn bad_system_specs_are_reported_at_the_system() {
    let p = problems(&ARENA.replace(
        "gamma: {kind: builtin, fallback: [\"c\"]}",
        "gamma: {kind: builtin, fallback: []}",
    ));
    has(&p, "`fallback` needs at least one reply");
    let line = p.iter().find(|x| x.contains("fallback")).unwrap();
    assert!(line.starts_with("11:"), "reported on gamma's line: {line}");
    let p = problems(&ARENA.replace("gamma:", "ga~mma:"));
    has(&p, "without `~`");
    let p = problems(&ARENA.replace(
        "gamma: {kind: builtin, fallback: [\"c\"]}",
        "gamma: {kind: websocket, url: http://x}",
    ));
    has(&p, "must start with ws:// or wss://");
}

#[test]
fn a_page_needs_its_task() {
    let p = problems(&ARENA.replace("kind: arena", "kind: chat"));
    has(
        &p,
        "a `chat` page needs an `evaluation` section with `task: chat`",
    );
}

#[test]
fn uncertainty_falls_with_battles_and_with_a_clear_winner() {
    let fresh = pair_uncertainty(0, 0, 0);
    assert!((fresh - (0.25f64 / 2.0).sqrt()).abs() < 1e-12);
    // Ten even battles are less uncertain than none, and a clear winner less than an even split.
    let even = pair_uncertainty(5, 5, 0);
    let clear = pair_uncertainty(10, 0, 0);
    assert!(even < fresh);
    assert!(clear < even);
    // By hand: p = (10 + 1) / 12, se = sqrt(p (1 - p) / 12).
    let p: f64 = 11.0 / 12.0;
    assert!((clear - (p * (1.0 - p) / 12.0).sqrt()).abs() < 1e-12);
    // A tie counts half a win for each side.
    assert_eq!(pair_uncertainty(0, 0, 2), pair_uncertainty(1, 1, 0));
}
