//! Priors overlays: a YAML file that sets the hint priors of a study's transitions, loaded on
//! top of the study with `--priors FILE` (`wozkit serve`, `simulate`, `validate`). Written by
//! `wozkit priors learn`; it can be written by hand too.
//!
//! ```yaml
//! study: offshore-emergency      # must be the id of the study it is loaded with
//! smoothing: 1                   # informative only
//! priors:
//!   inform_alarm:                # a state of the study
//!     ask_status: 3.5            # a declared transition of that state → its new prior
//! ```
//!
//! The overlay is checked like a study: an unknown state, a target that is not a declared
//! transition of its state, a prior out of `0..=1000000`, an unknown key or another study's id
//! is reported as `FILE:LINE:COL` with the id, and nothing is applied. Transitions the overlay
//! does not name keep their priors.

use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;

use super::{Diagnostic, Diagnostics, LoadedStudy, Positions, pointer_escape};
use crate::model::{MAX_PRIOR, State, Transition, TransitionFull};

/// The contents of a priors overlay file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorsOverlay {
    /// Id of the study the priors are for.
    pub study: String,
    /// The smoothing they were estimated with (not used when loading).
    #[serde(default)]
    pub smoothing: Option<f64>,
    /// State id → (target state id → prior).
    #[serde(default)]
    pub priors: IndexMap<String, IndexMap<String, f64>>,
}

/// Reads a priors overlay file and applies it to `study` (see the module documentation).
pub fn apply_priors_file(study: &mut LoadedStudy, path: &Path) -> Result<(), Diagnostics> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Diagnostics(vec![Diagnostic {
            file: label.clone(),
            line: 1,
            col: 1,
            message: format!("cannot read the priors file: {e}"),
            hint: Some("pass a file written by `wozkit priors learn`".into()),
        }])
    })?;
    apply_priors_text(study, &label, &text)
}

/// Applies a priors overlay given as text; `file` labels the diagnostics.
pub fn apply_priors_text(
    study: &mut LoadedStudy,
    file: &str,
    text: &str,
) -> Result<(), Diagnostics> {
    let positions = Positions::of(text);
    let diag = |pointer: &str, message: String, hint: Option<String>| {
        let pos = positions.find(pointer);
        Diagnostic {
            file: file.to_string(),
            line: pos.line,
            col: pos.col,
            message,
            hint,
        }
    };
    let overlay = parse_priors_overlay(file, text)?;
    let mut problems = vec![];
    if overlay.study != study.study.id {
        problems.push(diag(
            "/study",
            format!(
                "the priors are for study `{}`, not `{}`",
                overlay.study, study.study.id
            ),
            Some("learn priors for this study with `wozkit priors learn`".into()),
        ));
    }
    let mut changes: Vec<(usize, usize, f64)> = vec![];
    for (state, targets) in &overlay.priors {
        let at = format!("/priors/{}", pointer_escape(state));
        let Some(i) = study.state_idx(state) else {
            problems.push(diag(
                &at,
                format!("unknown state `{state}`"),
                Some(format!(
                    "states of `{}` with transitions: {}",
                    study.study.id,
                    study
                        .study
                        .states
                        .iter()
                        .filter(|s| !s.transitions.is_empty())
                        .map(|s| s.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            ));
            continue;
        };
        for (to, prior) in targets {
            let at = format!("{at}/{}", pointer_escape(to));
            match prior_targets(state, &study.study.states[i], to, *prior) {
                Ok(matching) => changes.extend(matching.into_iter().map(|j| (i, j, *prior))),
                Err((message, hint)) => problems.push(diag(&at, message, hint)),
            }
        }
    }
    if !problems.is_empty() {
        return Err(Diagnostics(problems));
    }
    set_priors(study, changes);
    Ok(())
}

/// The transitions of `def` (the state `state`) to `to` that take `prior`; else what is wrong
/// (the message and a hint): no such transition, or a prior out of range.
fn prior_targets(
    state: &str,
    def: &State,
    to: &str,
    prior: f64,
) -> Result<Vec<usize>, (String, Option<String>)> {
    let matching: Vec<usize> = def
        .transitions
        .iter()
        .enumerate()
        .filter(|(_, t)| t.to() == to)
        .map(|(j, _)| j)
        .collect();
    if matching.is_empty() {
        return Err((
            format!("state `{state}` has no transition to `{to}`"),
            Some(format!(
                "its transitions: {}",
                def.transitions
                    .iter()
                    .map(Transition::to)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ));
    }
    if !prior.is_finite() || prior < 0.0 || prior > f64::from(MAX_PRIOR) {
        return Err((
            format!("the prior of `{state}` → `{to}` is {prior}, but must be 0 – {MAX_PRIOR}"),
            None,
        ));
    }
    Ok(matching)
}

/// Sets the priors of the transitions `(state, transition, prior)`; a bare target becomes a
/// full transition.
fn set_priors(study: &mut LoadedStudy, changes: Vec<(usize, usize, f64)>) {
    for (i, j, prior) in changes {
        let t = &mut study.study.states[i].transitions[j];
        match t {
            Transition::Full(f) => f.prior = prior,
            Transition::To(to) => {
                *t = Transition::Full(TransitionFull {
                    to: to.clone(),
                    prior,
                    when: None,
                });
            }
        }
    }
}

/// Parses a priors overlay without checking it against a study (e.g. to find which study it is
/// for); syntax and shape errors name the file, line and column.
pub fn parse_priors_overlay(file: &str, text: &str) -> Result<PriorsOverlay, Diagnostics> {
    serde_saphyr::from_str(text).map_err(|e| {
        let (line, col) = e
            .location()
            .map(|l| (l.line() as usize, l.column() as usize))
            .unwrap_or((1, 1));
        let message = e.without_snippet().to_string();
        Diagnostics(vec![Diagnostic {
            file: file.to_string(),
            line,
            col,
            message: format!(
                "priors file: {}",
                message.lines().next().unwrap_or("invalid YAML")
            ),
            hint: Some(
                "expected `study: ID` and `priors: {STATE: {TARGET: PRIOR}}` (keys study, \
                 smoothing, priors)"
                    .into(),
            ),
        }])
    })
}

/// Loads a study (as [`super::resolve`]) and, when given, a priors overlay on top of it.
pub fn resolve_with_priors(arg: &str, priors: Option<&Path>) -> Result<LoadedStudy, Diagnostics> {
    let mut study = super::resolve(arg)?;
    if let Some(p) = priors {
        apply_priors_file(&mut study, p)?;
    }
    Ok(study)
}
