//! `evaluation.judges`: model judges load with the study, and what is wrong with one is reported
//! at its line and column.

use wozkit_core::evaluation::Dialogue;
use wozkit_core::judges::{CHOICE, ask, parse_reply};
use wozkit_core::load::{StudySource, load_text};

const STUDY: &str = include_str!("../fixtures/judged-compare.yaml");

fn load(text: &str) -> Result<wozkit_core::load::LoadedStudy, Vec<String>> {
    load_text("s.yaml", text, StudySource::Dir(std::env::temp_dir())).map_err(|d| {
        d.0.iter()
            .map(|x| format!("{}:{}: {}", x.line, x.col, x.message))
            .collect()
    })
}

#[test]
fn a_judged_comparison_loads_and_renders_its_prompt() {
    let study = load(STUDY).unwrap_or_else(|p| panic!("{}", p.join("\n")));
    let ev = study.study.evaluation.expect("evaluation");
    let judge = &ev.judges[0];
    assert!(judge.swap);
    let by_id = |id: &str| -> &Dialogue { ev.dialogues.iter().find(|d| d.id == id).unwrap() };
    let asked = ask(&ev, judge, CHOICE, &[by_id("bad-1"), by_id("good-1")]).expect("answerable");
    assert_eq!(asked.options, ["A", "B"]);
    assert!(
        asked.prompt.starts_with(
            "Which assistant was more helpful?\n[A]\nuser: Book a table\nbot: No.\n[B]"
        ),
        "{}",
        asked.prompt
    );
    assert!(asked.prompt.contains("Answer with one of A, B as [[X]]."));
    // The answer stored for a side is the dialogue shown there.
    let picked = parse_reply("B is better: [[B]]", &asked.options).expect("named");
    assert_eq!(asked.values[picked], "good-1");
}

#[test]
fn mistakes_in_a_judge_are_reported_where_written() {
    let text = STUDY
        .replace("questions: [choice]", "questions: [choice, fluent]")
        .replace("{conversation_b}\n", "{conversaton_b}\n")
        .replace("      url: http://127.0.0.1:9/v1\n", "      system: gpt\n");
    let p = load(&text).expect_err("refused");
    assert!(
        p.iter()
            .any(|l| l.starts_with("30:7: unknown system `gpt`")),
        "{p:#?}"
    );
    assert!(
        p.iter()
            .any(|l| l.contains("cannot answer question `fluent`")),
        "{p:#?}"
    );
    assert!(
        p.iter()
            .any(|l| l.contains("unknown placeholder `{conversaton_b}`")),
        "{p:#?}"
    );
    assert!(
        p.iter().any(|l| l.contains("has no `{conversation_b}`")),
        "{p:#?}"
    );
}

#[test]
fn swap_is_only_for_comparisons_and_names_are_unique() {
    let dup = STUDY.to_string()
        + "    - name: rule\n      questions: [choice]\n      prompt: \"{conversation_a} {conversation_b}\"\n";
    let p = load(&dup).expect_err("refused");
    assert!(
        p.iter().any(|l| l.contains("duplicate judge name `rule`")),
        "{p:#?}"
    );
}
