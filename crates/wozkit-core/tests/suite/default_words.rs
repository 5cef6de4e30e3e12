//! Participant-facing words a study leaves to defaults, warned about by `validate`: the role
//! names of a Wizard-of-Oz study without `roles:`, and English defaults in a study written in
//! another language.

use crate::common::{MINI, all_warnings};
use wozkit_core::load::{builtin_names, load_builtin};

/// The study's warnings, but the missing MTurk preview (its own test).
fn others(text: &str) -> Vec<String> {
    all_warnings(text)
        .into_iter()
        .filter(|w| !w.contains("no `preview`"))
        .collect()
}

/// Words a participant reads that the study left to defaults: a Wizard-of-Oz study without
/// roles tells the user their partner is the "Wizard"; a study in another language shows the
/// English default approval buttons and alarm labels. Each is warned about at its place; the
/// built-in studies have none.
#[test]
fn default_role_names_and_english_defaults_in_another_language_are_warned_about() {
    assert!(others(MINI).is_empty(), "{:#?}", others(MINI));

    // No roles: the defaults `Participant` and `Wizard`.
    let start = MINI.find("roles:").expect("mini has roles");
    let end = MINI[start..].find("world:").expect("roles end") + start;
    let no_roles = format!("{}{}", &MINI[..start], &MINI[end..]);
    let w = others(&no_roles);
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(
        w[0].ends_with(
            "the study names no roles: participants read the defaults `Participant` and \
             `Wizard`, so the user is told that the partner is a wizard"
        ),
        "{w:#?}"
    );

    // In Chinese, the approval lock's default buttons are English: two warnings at the lock;
    // worded buttons are not warned about.
    let zh = MINI.replacen("\n", "\nlanguage: zh-Hans\n", 1);
    let w = others(&zh);
    assert_eq!(
        w,
        [
            "26:5: the user's approval button reads `Approve` (the English default) in a study \
             in `zh-Hans`",
            "26:5: the user's approval button reads `Deny` (the English default) in a study in \
             `zh-Hans`",
        ]
    );
    let worded = zh.replacen(
        "lock: {kind: approval,",
        "lock: {kind: approval, approve_label: 同意, deny_label: 拒绝,",
        1,
    );
    assert!(others(&worded).is_empty(), "{:#?}", others(&worded));

    for name in builtin_names() {
        let study = load_builtin(&name).expect("a built-in study loads");
        let warned: Vec<String> = study
            .compiled
            .warnings
            .iter()
            .map(|d| d.to_string())
            .filter(|w| w.contains("roles") || w.contains("English default"))
            .collect();
        assert!(warned.is_empty(), "{name}: {warned:#?}");
    }
}
