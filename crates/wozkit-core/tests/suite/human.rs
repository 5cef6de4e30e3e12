//! `human` systems in the study file: a person's default limits, and the loader's checks that a
//! human system and the wizards' `desk` page go together.

use crate::common;
use common::problems;
use wozkit_core::load::{StudySource, load_text};
use wozkit_core::model::PageKind;
use wozkit_core::systems::{Limits, SystemSpec};

/// An arena of a builtin system and a human one, wizards at the desk.
const ARENA: &str = r#"id: people
title: People and models
flow:
  user:
    - kind: arena
    - kind: completion
  wizard:
    - kind: instructions
    - kind: desk
    - kind: completion
systems:
  bot: {kind: builtin, fallback: ["hello"]}
  person: {kind: human}
evaluation:
  task: arena
  judgments_per_item: 2
"#;

fn has(problems: &[String], expected: &str) {
    assert!(
        problems.iter().any(|p| p.contains(expected)),
        "expected `{expected}` among {problems:#?}"
    );
}

#[test]
fn a_human_system_with_a_desk_loads_with_a_persons_limits() {
    let study = load_text("s.yaml", ARENA, StudySource::Dir(std::env::temp_dir()))
        .unwrap_or_else(|e| panic!("{e}"));
    let spec = &study.study.systems["person"];
    assert_eq!(spec.kind(), "human");
    assert_eq!(spec.limits(), &Limits::human());
    assert_ne!(Limits::human(), Limits::default());
    assert!(Limits::human().validate().is_ok());
    assert_eq!(
        spec.limits().retries,
        0,
        "a person's turn is not asked twice"
    );
    assert!(spec.limits().timeout_s > Limits::default().timeout_s);
    let kinds: Vec<PageKind> = study.study.flow.wizard.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [PageKind::Instructions, PageKind::Desk, PageKind::Completion]
    );
    let ev = study.study.evaluation.as_ref().unwrap();
    assert_eq!(ev.item_systems("bot~person"), ["bot", "person"]);
}

#[test]
fn written_limits_replace_the_persons_defaults() {
    let text = ARENA.replace("{kind: human}", "{kind: human, limits: {timeout_s: 300}}");
    let study = load_text("s.yaml", &text, StudySource::Dir(std::env::temp_dir()))
        .unwrap_or_else(|e| panic!("{e}"));
    match &study.study.systems["person"] {
        SystemSpec::Human(h) => assert_eq!(h.limits.timeout_s, 300.0),
        other => panic!("not a human system: {other:?}"),
    }
    let too_long = ARENA.replace("{kind: human}", "{kind: human, limits: {timeout_s: 900}}");
    has(&problems(&too_long), "`limits.timeout_s` is 900");
    let unknown = ARENA.replace("{kind: human}", "{kind: human, url: http://x}");
    assert!(!problems(&unknown).is_empty(), "a human system has no url");
}

#[test]
fn a_human_system_needs_a_desk_in_the_wizard_flow() {
    let text = ARENA.replace("    - kind: desk\n", "");
    has(
        &problems(&text),
        "`human` system `person` has no `desk` page to be answered at",
    );
}

#[test]
fn a_desk_needs_a_human_system() {
    let text = ARENA.replace("{kind: human}", "{kind: builtin, fallback: [\"hi\"]}");
    has(
        &problems(&text),
        "a `desk` page needs a system of `kind: human`",
    );
}

#[test]
fn a_desk_belongs_to_wizards_of_a_live_evaluation() {
    let text = ARENA.replace(
        "    - kind: arena\n",
        "    - kind: arena\n    - kind: desk\n",
    );
    has(&problems(&text), "a `desk` page belongs in the wizard flow");

    let rate = r#"id: rated
title: Rated
flow:
  user:
    - kind: rate
    - kind: completion
  wizard:
    - kind: desk
systems:
  person: {kind: human}
evaluation:
  task: rate
  judgments_per_item: 1
  dialogues:
    - id: d1
      system: s1
      turns:
        - {speaker: user, text: hi}
        - {speaker: system, text: hello}
"#;
    has(
        &problems(rate),
        "a `desk` page needs an `evaluation` section with `task: chat` or `task: arena`",
    );
}
