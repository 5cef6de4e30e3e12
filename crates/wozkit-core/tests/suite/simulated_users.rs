//! `simulated_users:` in a study file: what loads, and each mistake at its line and column.

use crate::common;
use common::{MINI, problems};

fn with_users(yaml: &str) -> String {
    format!("{MINI}\nsimulated_users:\n{yaml}")
}

/// The line of the first `simulated_users` entry in `with_users`.
fn first_line() -> usize {
    MINI.lines().count() + 3
}

#[test]
fn a_declared_simulated_user_loads_with_its_defaults() {
    let text = with_users("  - name: polite\n    url: http://127.0.0.1:9/v1\n    model: m\n");
    let study = wozkit_core::load::load_text(
        "s.yaml",
        &text,
        wozkit_core::load::StudySource::Dir(std::env::temp_dir()),
    )
    .expect("the study loads");
    let user = &study.study.simulated_users[0];
    assert_eq!(user.name, "polite");
    assert_eq!(user.max_turns, 10);
    assert_eq!(user.stop, "[END]");
    assert_eq!(user.actor_name(), "simulated:polite");
    assert!(user.prompt.contains("{conversation}"));
}

#[test]
fn mistakes_are_reported_where_they_are() {
    let l = first_line();
    let p = problems(&with_users(
        "  - name: a b\n    url: ftp://x\n    prompt: \"{goal} {conversaton}\"\n    \
         max_turns: 0\n    stop: \"\"\n  - name: a b\n    system: nope\n",
    ));
    let at = |line: usize, message: &str| format!("{}:5: {message}", l + line);
    let expected = vec![
        at(0, "simulated user name `a b` is not a name"),
        at(1, "`ftp://x` is not an http(s) URL"),
        at(1, "a simulated user with a `url` needs a `model`"),
        at(2, "unknown placeholder `{conversaton}` in the prompt"),
        at(
            2,
            "the prompt does not show the dialogue: it has no `{conversation}`",
        ),
        at(3, "`max_turns` must be at least 1"),
        at(4, "the stop phrase is empty"),
        at(5, "simulated user name `a b` is not a name"),
        at(5, "duplicate simulated user name `a b`"),
        at(6, "unknown system `nope`"),
    ];
    assert_eq!(p, expected);
}

#[test]
fn an_answer_prompt_must_show_the_question_and_its_choices() {
    let l = first_line();
    let p = problems(&with_users(
        "  - name: asker\n    url: http://127.0.0.1:9/v1\n    model: m\n    \
         answer_prompt: \"{goal} {questoin}\"\n",
    ));
    let at = |message: &str| format!("{}:5: {message}", l + 3);
    assert_eq!(
        p,
        [
            at("unknown placeholder `{questoin}` in the answer prompt"),
            at(
                "the answer prompt does not show the question: it needs `{question}` and `{choices}`"
            ),
        ]
    );
}
