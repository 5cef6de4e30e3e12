//! The loader reports each kind of mistake with its line and column, all at once.

mod common;
use common::{MINI, problems};

fn replace(from: &str, to: &str) -> String {
    assert!(MINI.contains(from), "fixture has no `{from}`");
    MINI.replacen(from, to, 1)
}

fn has(problems: &[String], expected: &str) {
    assert!(
        problems.iter().any(|p| p == expected),
        "expected `{expected}` among {problems:#?}"
    );
}

#[test]
fn the_fixture_is_valid() {
    assert!(problems(MINI).is_empty(), "{:?}", problems(MINI));
}

#[test]
fn unknown_key_is_reported_at_the_key() {
    let p = problems(&replace(
        "    type: request\n",
        "    type: request\n    colour: red\n",
    ));
    has(&p, "24:5: unknown key `colour`");
}

#[test]
fn wrong_type_is_reported() {
    let p = problems(&replace("progress: 100", "progress: lots"));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("15:27: \"lots\" is not of type \"integer\""),
        "{p:?}"
    );
}

#[test]
fn shape_errors_are_all_reported_together() {
    let text = replace("progress: 100", "progress: lots").replace(
        "    type: request\n",
        "    type: request\n    colour: red\n",
    );
    assert_eq!(problems(&text).len(), 2);
}

#[test]
fn invalid_yaml_and_duplicate_keys() {
    let p = problems(&replace("title: Mini", "title: [unclosed"));
    assert!(p[0].contains("invalid YAML"), "{p:?}");
    let p = problems(&replace("title: Mini", "title: Mini\ntitle: Again"));
    assert!(
        p[0].starts_with("3:1: invalid YAML") || p[0].starts_with("2:1: invalid YAML"),
        "{p:?}"
    );
}

#[test]
fn transition_to_missing_state() {
    let p = problems(&replace(
        "[{to: ask, prior: 2}, bye]",
        "[{to: ask, prior: 2}, byee]",
    ));
    has(&p, "21:40: transition to missing state `byee`");
}

#[test]
fn unreachable_state() {
    let p = problems(&replace("unlock: [moving]", "unlock: []"));
    has(&p, "27:5: state `moving` is unreachable");
}

#[test]
fn state_without_way_out() {
    let text = replace("  - {id: time, type: update, global: true, templates: [\"{time_left} left.\"]}\n", "")
        .replace("{id: moving, type: action, templates: [\"Sending the robot to {target.name}.\"], transitions: [bye]}", "{id: moving, type: action, templates: [\"Sending.\"]}")
        .replace("unlock: [arrived]", "unlock: [arrived], enter: null");
    // Actions that unlock states count as a way out; remove that too.
    let text = text.replace(
        "on_complete: {set: {fire_out: true}, milestone: fix, unlock: [arrived], enter: null}",
        "on_complete: {set: {fire_out: true}, milestone: fix}",
    );
    let text = text.replace("lock: {kind: approval, prompt: \"Send a robot?\", on_approve: {unlock: [moving]}}", "lock: {kind: approval, prompt: \"Send a robot?\", on_approve: {unlock: [moving, arrived]}}");
    let p = problems(&text);
    assert!(
        p.iter()
            .any(|x| x.ends_with("state `moving` has no way out and is not terminal")),
        "{p:#?}"
    );
}

#[test]
fn guard_that_does_not_parse() {
    let p = problems(&replace(
        "guard: \"target != robot.location\"",
        "guard: \"target != (robot.location\"",
    ));
    assert!(
        p.iter()
            .any(|x| x.starts_with("38:5: condition `target != (robot.location` does not parse")),
        "{p:#?}"
    );
}

#[test]
fn guard_naming_unknown_variable() {
    let p = problems(&replace("goal: \"fire_out\"", "goal: \"fire_outt\""));
    has(&p, "42:1: condition names unknown variable `fire_outt`");
}

#[test]
fn slot_without_source() {
    let p = problems(&replace("{robot.name} arrived", "{robbot.name} arrived"));
    has(&p, "28:45: slot `{robbot.name}` has no source");
}

#[test]
fn duplicate_ids() {
    let p = problems(&replace(
        "{id: bye, type: interaction",
        "{id: time, type: interaction",
    ));
    assert!(
        p.iter().any(|x| x.ends_with("duplicate state id `time`")),
        "{p:#?}"
    );
}

#[test]
fn missing_media_file() {
    let p = problems(&replace(
        "goal: \"fire_out\"",
        "goal: \"fire_out\"\nmedia:\n  fire: {file: media/nope.gif}",
    ));
    has(&p, "44:10: media file `media/nope.gif` not found");
}

#[test]
fn meaning_errors_are_all_reported_together() {
    let text = replace("[{to: ask, prior: 2}, bye]", "[{to: ask, prior: 2}, byee]")
        .replace("{robot.name} arrived", "{robbot.name} arrived")
        .replace("goal: \"fire_out\"", "goal: \"fire_outt\"");
    assert_eq!(problems(&text).len(), 3, "{:#?}", problems(&text));
}

#[test]
fn schema_is_a_json_schema_of_the_format() {
    let s = wozkit_core::load::json_schema();
    assert_eq!(s["title"], "Study");
    assert!(s["properties"]["states"].is_object());
}

#[test]
fn guard_reading_unknown_robot_field() {
    let p = problems(&replace(
        "guard: \"target != robot.location\"",
        "guard: \"target != robot.locaton && 'robot.x' != ''\"",
    ));
    has(
        &p,
        "38:5: condition reads unknown robot field `robot.locaton`",
    );
    assert_eq!(p.len(), 1, "{p:#?}");
}

#[test]
fn comprehension_variables_are_not_unknown_but_free_ones_are() {
    let p = problems(&replace(
        "goal: \"fire_out\"",
        "goal: \"robots.exists(r, robots[r].busy) && [1].all(x, x > 0)\"",
    ));
    assert!(p.is_empty(), "{p:#?}");
    let p = problems(&replace(
        "goal: \"fire_out\"",
        "goal: \"robots.exists(r, robots[q].busy)\"",
    ));
    has(&p, "42:1: condition names unknown variable `q`");
}

#[test]
fn approval_prompt_slots_are_checked() {
    let p = problems(&replace(
        "prompt: \"Send a robot?\"",
        "prompt: \"Send {robbot.name}?\"",
    ));
    assert!(
        p.iter()
            .any(|x| x.ends_with("slot `{robbot.name}` has no source")),
        "{p:#?}"
    );
}
