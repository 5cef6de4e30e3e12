//! Shared fixtures: a small study that exercises every engine feature.
#![allow(dead_code)]

use wozkit_core::load::{LoadedStudy, StudySource, load_text};

pub const MINI: &str = include_str!("mini.yaml");

pub fn mini() -> LoadedStudy {
    load_text("mini.yaml", MINI, StudySource::Dir(".".into())).expect("the fixture study loads")
}

/// The fixture plus an action that takes no target (`look`). Appended here rather than written
/// in mini.yaml so that the loader tests' line numbers stay where they are.
pub fn mini_with_targetless_action() -> LoadedStudy {
    let text = MINI.replacen(
        "goal:",
        "  - {id: look, label: Look around, act: look.around, duration: {default: 4}}\ngoal:",
        1,
    );
    load_text("mini.yaml", &text, StudySource::Dir(".".into())).expect("the fixture study loads")
}

/// Loads a variant of the fixture; returns the diagnostics as printed lines.
pub fn problems(text: &str) -> Vec<String> {
    match load_text("s.yaml", text, StudySource::Dir(std::env::temp_dir())) {
        Ok(_) => vec![],
        Err(d) => {
            d.0.iter()
                .map(|x| format!("{}:{}: {}", x.line, x.col, x.message))
                .collect()
        }
    }
}

/// Every warning of a study text, as `LINE:COL: message`.
pub fn all_warnings(text: &str) -> Vec<String> {
    let study =
        load_text("s.yaml", text, StudySource::Dir(std::env::temp_dir())).expect("the study loads");
    study
        .compiled
        .warnings
        .iter()
        .map(|w| format!("{}:{}: {}", w.line, w.col, w.message))
        .collect()
}
