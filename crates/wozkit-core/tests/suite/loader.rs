//! The loader reports each kind of mistake with its line and column, all at once.

use crate::common;
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
    let text = text.replace("lock: {kind: approval, prompt: \"Send a robot to {area}?\", on_approve: {unlock: [moving]}}", "lock: {kind: approval, prompt: \"Send a robot to {area}?\", on_approve: {unlock: [moving, arrived]}}");
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
        "prompt: \"Send a robot to {area}?\"",
        "prompt: \"Send {robbot.name}?\"",
    ));
    assert!(
        p.iter()
            .any(|x| x.ends_with("slot `{robbot.name}` has no source")),
        "{p:#?}"
    );
}

/// The fixture with a questionnaire: `items` are its questions, written from line 45.
fn survey(items: &str) -> Vec<String> {
    problems(&format!("{MINI}survey:\n  questions:\n{items}"))
}

#[test]
fn every_kind_of_question_loads_and_old_questionnaires_load_as_before() {
    let p = survey(
        "    - {id: mood, text: Mood?, kind: likert, points: 5, low: Bad, mid: So-so, high: Good}
    - {id: grade, text: Grade?, kind: likert, points: 3, labels: [Low, Middle, High], reverse: true}
    - {id: colour, text: Colour?, kind: choice, options: [red, green], shuffle: true}
    - {id: tools, text: Tools?, kind: multiple, options: [a, b, c], min_choices: 1, max_choices: 2}
    - {id: why, text: Why?, kind: text, min_words: 2, max_words: 50}
    - {id: age, text: Age?, kind: number, min: 18, max: 99, integer: true}
    - id: sus
      text: About the system
      kind: matrix
      points: 5
      shuffle: true
      rows: [{id: easy, text: Easy}, {id: hard, text: Hard, reverse: true}]
    - {id: rank, text: Rank, kind: ranking, options: [walk, bus, car]}
    - {id: note, text: Anything else?, kind: comment, max_words: 200}
    - {id: old, text: Old style, kind: likert, points: 7, low: a, high: b, reverse: true, required: true}
    - {id: old_text, text: Old text, kind: text, required: false}
",
    );
    assert!(p.is_empty(), "{p:#?}");
}

#[test]
fn question_bounds_options_and_ids_are_checked_where_written() {
    let p = survey(
        "    - id: tools
      text: Tools?
      kind: multiple
      options: [map, map]
      min_choices: 3
      max_choices: 2
    - id: tools
      text: Again
      kind: number
      min: 10
      max: 5
",
    );
    has(&p, "48:22: duplicate option `map`");
    has(&p, "49:7: `min_choices` (3) is more than `max_choices` (2)");
    has(&p, "49:7: `min_choices` is 3 but there are only 2 options");
    has(&p, "51:7: duplicate question id `tools`");
    has(&p, "54:7: `min` (10) is more than `max` (5)");
    assert_eq!(p.len(), 5, "{p:#?}");
}

#[test]
fn scales_need_two_to_eleven_points_and_fitting_labels() {
    let p = survey(
        "    - {id: a, text: A, kind: likert, points: 12}
    - {id: b, text: B, kind: likert, points: 1}
    - {id: c, text: C, kind: likert, points: 4, mid: Neither}
    - {id: d, text: D, kind: likert, points: 3, labels: [one, two]}
    - {id: e, text: E, kind: matrix, points: 0, rows: [{id: r, text: R}]}
",
    );
    has(&p, "45:38: a scale needs 2 to 11 points, not 12");
    has(&p, "46:38: a scale needs 2 to 11 points, not 1");
    has(
        &p,
        "47:49: a `mid` label needs an odd number of points, not 4",
    );
    has(&p, "48:49: 2 labels for a scale of 3 points");
    has(&p, "49:38: a scale needs 2 to 11 points, not 0");
    assert_eq!(p.len(), 5, "{p:#?}");
}

#[test]
fn keys_of_another_kind_are_refused_and_reverse_only_on_scales() {
    let p = survey(
        "    - {id: a, text: A, kind: text, reverse: true}
    - {id: b, text: B, kind: likert, min_words: 3}
    - {id: c, text: C, kind: comment, min_words: 3}
    - {id: d, text: D, kind: comment, required: true}
",
    );
    has(
        &p,
        "45:36: `reverse` applies only to scale questions, not to a `text` question",
    );
    has(
        &p,
        "46:38: `min_words` does not apply to a `likert` question",
    );
    has(
        &p,
        "47:39: `min_words` does not apply to a `comment` question",
    );
    has(&p, "48:39: a comment box is always optional");
    assert_eq!(p.len(), 4, "{p:#?}");
}

#[test]
fn choice_kinds_need_options_and_matrices_rows() {
    let p = survey(
        "    - {id: a, text: A, kind: choice}
    - {id: b, text: B, kind: ranking, options: [only]}
    - {id: c, text: C, kind: matrix}
    - {id: d, text: D, kind: matrix, rows: [{id: r, text: R}, {id: r, text: S}]}
    - {id: e, text: E, kind: multiple, options: [a, \"  \"]}
",
    );
    has(&p, "45:7: a `choice` question needs at least 1 options");
    has(&p, "46:39: a `ranking` question needs at least 2 options");
    has(&p, "47:7: a matrix question needs rows");
    has(&p, "48:64: duplicate row id `r`");
    has(&p, "49:53: an option needs a text");
    assert_eq!(p.len(), 5, "{p:#?}");
}

#[test]
fn question_ids_are_plain_names_and_step_is_the_form_s_own() {
    let p = survey(
        "    - {id: \"my q\", text: A, kind: text}
    - {id: step, text: B, kind: text}
",
    );
    has(
        &p,
        "45:8: question id `my q` may use only letters, digits, `_` and `-`",
    );
    has(
        &p,
        "46:8: question id `step` is reserved for the form itself",
    );
}

#[test]
fn numbers_out_of_range_are_reported_at_their_value() {
    // A duration in milliseconds by mistake, and a negative one.
    let p = problems(&replace(
        "duration: {default: 20, by_kind: {ground: 30}}",
        "duration: {default: 20000000, by_kind: {ground: -3}}",
    ));
    has(
        &p,
        "39:16: `duration.default` is 20000000, but must be at most 86400 seconds (24 hours)",
    );
    has(&p, "39:45: `by_kind.ground` is -3, but must be at least 0");
    assert_eq!(p.len(), 2, "{p:#?}");
}

#[test]
fn session_limits_progress_and_payments_are_bounded() {
    let p = problems(&replace(
        "title: Mini",
        "title: Mini\nsession: {time_limit_s: 100000, disconnect_grace_s: 4294967295}",
    ));
    has(
        &p,
        "3:11: `session.time_limit_s` is 100000, but must be at most 86400 seconds (24 hours)",
    );
    has(
        &p,
        "3:33: `session.disconnect_grace_s` is 4294967295, but must be at most 86400 seconds (24 hours)",
    );
    let p = problems(&replace("progress: 100", "progress: 101"));
    has(&p, "15:27: `progress` is 101, but must be at most 100");
    let p = problems(&replace(
        "goal: \"fire_out\"",
        "goal: \"fire_out\"\npayment: {base: 2, max_minutes: 1e9, bonus: {amount: 1e300, when: fire_out}}",
    ));
    has(
        &p,
        "43:20: `payment.max_minutes` is 1000000000.0, but must be at most 1440",
    );
    has(
        &p,
        "43:46: `bonus.amount` is 1e+300, but must be at most 10000",
    );
    assert_eq!(p.len(), 2, "{p:#?}");
}

#[test]
fn a_moving_action_must_take_a_target() {
    let p = problems(&replace(
        "    target: true\n    moves: true\n",
        "    moves: true\n",
    ));
    has(
        &p,
        "34:5: action `send` moves the robot but takes no target",
    );
}

#[test]
fn a_misspelt_question_kind_is_not_one_of_the_kinds() {
    let p = survey("    - {id: a, text: A, kind: likret}\n");
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(
        p[0].starts_with("45:24: \"likret\" is not one of \"likert\", \"choice\", "),
        "{p:#?}"
    );
}

#[test]
fn a_map_alarm_must_name_a_place_and_a_valid_condition() {
    let with = |alarm: &str| {
        problems(&replace(
            "  locations:\n",
            &format!("  alarm: {alarm}\n  locations:\n"),
        ))
    };
    // A location id, or a world variable holding one (`area` holds a name, not an id).
    assert!(with("{at: east, cleared_when: fire_out}").is_empty());
    let p = with("{at: area}");
    assert!(
        p.iter()
            .any(|x| x.contains("`area` is neither a location nor a world variable holding one")),
        "{p:?}"
    );
    let p = with("{at: east, cleared_when: fire_gone}");
    assert!(p.iter().any(|x| x.contains("fire_gone")), "{p:?}");
}

#[test]
fn language_is_a_supported_tag_or_a_problem_naming_the_supported_ones() {
    assert!(problems(&replace("title:", "language: zh-Hans\ntitle:")).is_empty());
    assert!(problems(&replace("title:", "language: zh-CN\ntitle:")).is_empty());
    let p = problems(&replace("title:", "language: fr\ntitle:"));
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(
        p[0],
        "2:1: \"fr\" is not one of \"en\", \"en-US\", \"en-GB\", \"zh-Hans\", \"zh-CN\", \"zh\""
    );
}
