//! `platforms.prolific.completion_codes`: checked where written, warned about when an ending a
//! participant can reach has no code, and turned into the redirect of each ending.

use crate::common;
use common::{MINI, all_warnings, problems};
use wozkit_core::load::{StudySource, builtin_names, load_builtin, load_text};
use wozkit_core::platforms::EndingKind;

fn with_codes(codes: &str) -> String {
    format!("{MINI}platforms:\n  prolific:\n    completion_codes:\n{codes}")
}

/// The warnings about platforms (the missing MTurk preview has its own test).
fn warnings(text: &str) -> Vec<String> {
    all_warnings(text)
        .into_iter()
        .filter(|w| !w.contains("no `preview`"))
        .collect()
}

#[test]
fn a_study_without_a_preview_is_warned_that_workers_see_only_its_title() {
    let w = all_warnings(MINI);
    assert_eq!(
        w,
        [
            "2:1: the study has no `preview`: MTurk's preview of the task shows workers only the \
          title (the researcher's `description` is not shown to participants)"
        ]
    );
    let with = MINI.replacen("\n", "\npreview: Work with an assistant by chat.\n", 1);
    assert!(all_warnings(&with).is_empty(), "{:#?}", all_warnings(&with));
}

#[test]
fn a_code_prolific_cannot_hold_is_reported_where_written() {
    let p = problems(&with_codes(
        "      completed: c1k8q2zd\n      no_partner: NP-12345\n      no_items: ABC\n",
    ));
    assert_eq!(p.len(), 3, "{p:#?}");
    assert!(p[0].starts_with("46:7: `c1k8q2zd` has `c`"), "{p:#?}");
    assert!(p[1].starts_with("47:7: `NP-12345` has `-`"), "{p:#?}");
    assert!(p[2].starts_with("48:7: `ABC` has 3 characters"), "{p:#?}");
}

#[test]
fn an_unknown_ending_is_an_unknown_key() {
    let p = problems(&with_codes("      complete: C1K8Q2ZD\n"));
    assert_eq!(p, ["46:7: unknown key `complete`"]);
}

#[test]
fn a_fixed_completion_url_with_codes_is_refused() {
    let text = with_codes("      completed: C1K8Q2ZD\n      no_partner: NP123456\n")
        .replace(
            "goal: \"fire_out\"\n",
            "goal: \"fire_out\"\nflow:\n  completion_url: \"https://app.prolific.com/submissions/complete?cc=C1K8Q2ZD\"\n",
        );
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(
        p[0].starts_with("44:3: `flow.completion_url` has no `{code}`"),
        "{p:#?}"
    );
}

#[test]
fn an_ending_without_a_code_is_a_warning_not_an_error() {
    // A dialogue study: participants complete, or leave without a partner.
    let w = warnings(&with_codes("      completed: C1K8Q2ZD\n"));
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(
        w[0].starts_with("45:5: no Prolific completion code for no_partner"),
        "{w:#?}"
    );
    let all = with_codes("      completed: C1K8Q2ZD\n      no_partner: NP123456\n");
    assert!(warnings(&all).is_empty(), "{:#?}", warnings(&all));
    // Sending Prolific participants back without any code.
    let url = MINI.replace(
        "goal: \"fire_out\"\n",
        "goal: \"fire_out\"\nflow:\n  completion_url: \"https://app.prolific.com/submissions/complete?cc={code}\"\n",
    );
    let w = warnings(&url);
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(
        w[0].contains("declares no Prolific completion codes"),
        "{w:#?}"
    );
    // A study that says nothing about Prolific is not warned about it.
    assert!(warnings(MINI).is_empty());
}

#[test]
fn each_ending_redirects_with_its_code() {
    let text = with_codes("      completed: C1K8Q2ZD\n");
    let study = load_text("s.yaml", &text, StudySource::Dir(std::env::temp_dir()))
        .expect("loads")
        .study;
    assert_eq!(
        study.prolific_redirect(EndingKind::Completed).as_deref(),
        Some("https://app.prolific.com/submissions/complete?cc=C1K8Q2ZD")
    );
    assert_eq!(study.prolific_redirect(EndingKind::NoPartner), None);
    assert_eq!(study.prolific_code(EndingKind::Completed), Some("C1K8Q2ZD"));
}

#[test]
fn built_in_studies_declare_a_code_for_every_ending_they_reach() {
    let mut warned = vec![];
    for name in builtin_names() {
        let study = load_builtin(&name).expect("built-in study loads");
        warned.extend(study.compiled.warnings.iter().map(|d| d.to_string()));
        assert!(
            study
                .study
                .prolific_redirect(EndingKind::Completed)
                .is_some(),
            "{name}"
        );
    }
    assert!(warned.is_empty(), "{warned:#?}");
}

#[test]
fn the_schema_has_the_codes() {
    let s = wozkit_core::load::json_schema();
    let text = s.to_string();
    assert!(
        s["properties"]["platforms"].is_object(),
        "{}",
        s["properties"]["platforms"]
    );
    for key in [
        "completed",
        "no_partner",
        "no_items",
        "screened_onboarding",
        "screened_gold",
    ] {
        assert!(text.contains(&format!("\"{key}\"")), "{key}");
    }
}
