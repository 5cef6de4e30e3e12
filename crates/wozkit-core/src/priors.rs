//! Transition priors learned from collected sessions (`wozkit priors learn`).
//!
//! The hint the wizard sees is drawn among the offered options in proportion to their priors
//! (`docs/engine-semantics.md`). Hand priors are the author's guess; this module counts what the
//! wizards actually chose next in each state and turns the counts into priors with additive
//! (Laplace / Dirichlet) smoothing, over the transitions the study declares and no others.
//!
//! A choice is a `StateEntered { from, to }` event that a wizard's message caused (`by_event`
//! false): the same notion of "next state" the hint predicts. A choice whose `to` is not one of
//! `from`'s declared transitions (a global state, an unlocked one) is counted as *other*: it says
//! nothing about the transition priors.
//!
//! For a state with `K` declared targets, counts `c_1..c_K` (total `n`) and smoothing `α`:
//! `p_j = (c_j + α) / (n + α K)`. The prior written is `p_j · S`, where `S` is the sum of the
//! state's hand priors (1 if that is 0), so the transitions keep the weight they had against
//! global and unlocked options (prior 1 each) in the hint draw. A state with no choice counted
//! keeps its hand priors and is left out of the overlay.
//!
//! The result is written as a priors overlay file, which [`crate::load::apply_priors_file`]
//! loads on top of the study.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use indexmap::IndexMap;
use serde::Serialize;

use crate::event::{Event, EventKind};
use crate::load::LoadedStudy;
use crate::model::MAX_PRIOR;

/// What the wizards chose next in one state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateCounts {
    /// Choices per declared target state.
    pub choices: BTreeMap<String, u64>,
    /// Choices of states that are not declared transitions of this one (global, unlocked).
    pub other: u64,
    /// Sessions with at least one counted choice in this state.
    pub sessions: u64,
}

impl StateCounts {
    /// Choices counted towards the declared transitions.
    pub fn total(&self) -> u64 {
        self.choices.values().sum()
    }
}

/// Counts over a set of sessions, by state id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TransitionCounts {
    /// Sessions read.
    pub sessions: u64,
    /// Counts by the state the choice was made in.
    pub states: BTreeMap<String, StateCounts>,
    /// Choices made in states the study does not have (a log of another version of the study).
    pub unknown_states: u64,
}

impl TransitionCounts {
    /// Adds one session's choices.
    pub fn add_session(&mut self, study: &LoadedStudy, events: &[Event]) {
        self.sessions += 1;
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for e in events {
            let EventKind::StateEntered {
                from, to, by_event, ..
            } = &e.kind
            else {
                continue;
            };
            if *by_event {
                continue;
            }
            let Some(i) = study.state_idx(from) else {
                self.unknown_states += 1;
                continue;
            };
            let def = &study.study.states[i];
            let entry = self.states.entry(from.clone()).or_default();
            if def.transitions.iter().any(|t| t.to() == to) {
                *entry.choices.entry(to.clone()).or_default() += 1;
                if seen.insert(from.clone()) {
                    entry.sessions += 1;
                }
            } else {
                entry.other += 1;
            }
        }
    }
}

/// The learned priors of one state.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnedState {
    pub state: String,
    /// Target state → prior, in the order the study declares the transitions.
    pub priors: IndexMap<String, f64>,
    /// Choices counted (declared transitions only).
    pub counted: u64,
    pub sessions: u64,
    /// Choices of other (global, unlocked) states, not counted.
    pub other: u64,
}

/// Priors estimated for a study, and the states left as they were.
#[derive(Clone, Debug, PartialEq)]
pub struct Learned {
    pub study: String,
    pub smoothing: f64,
    pub sessions: u64,
    /// States with at least one counted choice, in study order.
    pub states: Vec<LearnedState>,
    /// States with transitions but no counted choice: their hand priors are kept.
    pub no_data: Vec<String>,
}

/// Estimates priors from `counts` with additive smoothing `alpha` (≥ 0), over each state's
/// declared transitions (see the module documentation for the formula).
pub fn estimate(study: &LoadedStudy, counts: &TransitionCounts, alpha: f64) -> Learned {
    let alpha = if alpha.is_finite() {
        alpha.max(0.0)
    } else {
        0.0
    };
    let mut states = vec![];
    let mut no_data = vec![];
    for def in &study.study.states {
        // Distinct declared targets, in declaration order.
        let mut targets: Vec<&str> = vec![];
        for t in &def.transitions {
            if !targets.contains(&t.to()) {
                targets.push(t.to());
            }
        }
        if targets.is_empty() {
            continue;
        }
        let c = counts.states.get(&def.id);
        let n = c.map_or(0, StateCounts::total);
        if n == 0 {
            no_data.push(def.id.clone());
            continue;
        }
        let c = c.expect("a state with choices has counts");
        let hand: f64 = def.transitions.iter().map(|t| t.prior().max(0.0)).sum();
        let scale = if hand > 0.0 { hand } else { 1.0 };
        let k = targets.len() as f64;
        let priors = targets
            .iter()
            .map(|to| {
                let cj = c.choices.get(*to).copied().unwrap_or(0) as f64;
                let p = (cj + alpha) / (n as f64 + alpha * k);
                (to.to_string(), (p * scale).min(f64::from(MAX_PRIOR)))
            })
            .collect();
        states.push(LearnedState {
            state: def.id.clone(),
            priors,
            counted: n,
            sessions: c.sessions,
            other: c.other,
        });
    }
    Learned {
        study: study.study.id.clone(),
        smoothing: alpha,
        sessions: counts.sessions,
        states,
        no_data,
    }
}

/// A YAML double-quoted scalar (JSON string syntax is valid YAML).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

impl Learned {
    /// The priors overlay file: `study`, `smoothing`, and `priors: {state: {target: prior}}`,
    /// with the counts behind each state as comments.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# Transition priors learned from {} session(s) by `wozkit priors learn`.",
            self.sessions
        );
        let _ = writeln!(
            out,
            "# Load with `--priors FILE` (serve, simulate, validate); states not listed keep \
             their priors."
        );
        if !self.no_data.is_empty() {
            let _ = writeln!(out, "# No data (priors kept): {}", self.no_data.join(", "));
        }
        let _ = writeln!(out, "study: {}", quoted(&self.study));
        let _ = writeln!(out, "smoothing: {}", self.smoothing);
        if self.states.is_empty() {
            let _ = writeln!(out, "priors: {{}}");
            return out;
        }
        let _ = writeln!(out, "priors:");
        for s in &self.states {
            let _ = writeln!(
                out,
                "  # {} choice(s) in {} session(s){}",
                s.counted,
                s.sessions,
                if s.other > 0 {
                    format!(
                        "; {} of other (global or unlocked) states not counted",
                        s.other
                    )
                } else {
                    String::new()
                }
            );
            let _ = writeln!(out, "  {}:", quoted(&s.state));
            for (to, p) in &s.priors {
                // Shortest text that reads back as the same f64.
                let _ = writeln!(out, "    {}: {}", quoted(to), serde_json::json!(p));
            }
        }
        out
    }
}

/// Hint agreement, completion and turns of simulated sessions played by one simulated wizard.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WizardRun {
    /// Which priors the simulated wizard chose by: `hand` or `learned`.
    pub wizard: String,
    pub sessions: usize,
    /// Sessions that reached the study's goal.
    pub goal_reached: usize,
    pub goal_share: f64,
    /// Wizard messages per session (mean).
    pub wizard_turns: f64,
    /// Wizard choices among offered dialogue options that the agreement is measured over.
    pub choices: u64,
    /// Mean probability that a hint drawn with the hand priors names the option the wizard chose.
    pub hint_hand: f64,
    /// The same with the learned priors.
    pub hint_learned: f64,
    /// Share of choices that were the hand priors' most likely hint (ties share the credit).
    pub top_hand: f64,
    /// The same with the learned priors.
    pub top_learned: f64,
}

/// `wozkit simulate --compare-priors`: the same sessions (seeds) played by a wizard following the
/// hand priors and by one following the learned priors; in both, at every dialogue choice, how
/// well each set of priors' hint predicts the choice.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub study: String,
    pub seed: u64,
    pub runs: Vec<WizardRun>,
}

/// The probability a hint drawn over `offers` names `chosen`, and the share of the top hint's
/// credit it gets (1 / number of tied top options, or 0). Mirrors the engine's hint draw: weights
/// are the offers' priors, all equal when they sum to 0.
fn hint_scores(offers: &[crate::engine::Offer], chosen: &str) -> (f64, f64) {
    let w: Vec<f64> = offers.iter().map(|o| o.prior.max(0.0)).collect();
    let total: f64 = w.iter().sum();
    let w: Vec<f64> = if total > 0.0 {
        w.iter().map(|x| x / total).collect()
    } else {
        vec![1.0 / offers.len() as f64; offers.len()]
    };
    let Some(i) = offers.iter().position(|o| o.state == chosen) else {
        return (0.0, 0.0);
    };
    let top = w.iter().copied().fold(f64::MIN, f64::max);
    let ties = w.iter().filter(|x| **x == top).count();
    let top_credit = if w[i] == top { 1.0 / ties as f64 } else { 0.0 };
    (w[i], top_credit)
}

/// Plays `n` sessions (seeds derived from `seed`) with a wizard following `hand`'s priors, then the
/// same seeds with one following `learned`'s, and scores both priors' hints at every choice.
/// `hand` and `learned` must be the same study with different priors (an overlay applied).
pub fn compare(hand: &LoadedStudy, learned: &LoadedStudy, n: usize, seed: u64) -> Comparison {
    use rand::{RngExt, SeedableRng};
    let mut seeder = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let seeds: Vec<u64> = (0..n).map(|_| seeder.random()).collect();
    let runs = [("hand", hand), ("learned", learned)]
        .into_iter()
        .map(|(name, wizard)| {
            let mut run = WizardRun {
                wizard: name.to_string(),
                sessions: n,
                ..WizardRun::default()
            };
            let (mut turns, mut sums) = (0u64, [0.0f64; 4]);
            for s in &seeds {
                let played = crate::sim::play(wizard, *s, crate::sim::WizardPolicy::Priors);
                if played.session.ended.is_some_and(|(_, goal)| goal) {
                    run.goal_reached += 1;
                }
                let mut session = crate::engine::Session::new(wizard, &played.session.id);
                for (actor, kind, at) in &played.events {
                    if let EventKind::Message {
                        role: crate::event::Role::Wizard,
                        source: crate::event::MessageSource::State { state, .. },
                        ..
                    } = kind
                    {
                        turns += 1;
                        let offers_h = crate::engine::offered(hand, &session);
                        let offers_l = crate::engine::offered(learned, &session);
                        if offers_h.iter().any(|o| &o.state == state) {
                            let (ph, th) = hint_scores(&offers_h, state);
                            let (pl, tl) = hint_scores(&offers_l, state);
                            run.choices += 1;
                            for (acc, x) in sums.iter_mut().zip([ph, pl, th, tl]) {
                                *acc += x;
                            }
                        }
                    } else if let EventKind::Message {
                        role: crate::event::Role::Wizard,
                        ..
                    } = kind
                    {
                        turns += 1;
                    }
                    crate::engine::apply(wizard, &mut session, actor, kind, *at);
                }
            }
            let per = |x: f64| {
                if run.choices == 0 {
                    0.0
                } else {
                    x / run.choices as f64
                }
            };
            run.hint_hand = per(sums[0]);
            run.hint_learned = per(sums[1]);
            run.top_hand = per(sums[2]);
            run.top_learned = per(sums[3]);
            run.goal_share = if n == 0 {
                0.0
            } else {
                run.goal_reached as f64 / n as f64
            };
            run.wizard_turns = if n == 0 { 0.0 } else { turns as f64 / n as f64 };
            run
        })
        .collect();
    Comparison {
        study: hand.study.id.clone(),
        seed,
        runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Actor;
    use crate::load::{StudySource, load_text};

    const STUDY: &str = r#"
id: tiny
title: Tiny
states:
  - { id: start, type: request, initial: true, templates: ["Hi"], transitions: [{ to: a, prior: 3 }, { to: b, prior: 1 }] }
  - { id: a, type: request, templates: ["A"], transitions: [c, b] }
  - { id: b, type: request, templates: ["B"], transitions: [c] }
  - { id: c, type: request, templates: ["C"], transitions: [a] }
"#;

    fn study() -> LoadedStudy {
        load_text("tiny.yaml", STUDY, StudySource::Dir(".".into()))
            .unwrap_or_else(|d| panic!("{d}"))
    }

    fn entered(from: &str, to: &str, by_event: bool) -> Event {
        Event {
            v: 1,
            session: "s".into(),
            seq: 1,
            at_ms: 0,
            actor: Actor::System,
            kind: EventKind::StateEntered {
                from: from.into(),
                to: to.into(),
                template_seed: 0,
                by_event,
            },
        }
    }

    #[test]
    fn counts_three_sessions_and_smooths_exactly() {
        let study = study();
        let sessions = [
            vec![entered("start", "b", false), entered("b", "c", false)],
            vec![
                entered("start", "b", false),
                entered("b", "c", false),
                entered("c", "a", false),
                entered("a", "c", false),
            ],
            vec![
                entered("start", "a", false),
                entered("a", "c", true),    // a world event, not a choice
                entered("c", "zzz", false), // not a declared transition: other
            ],
        ];
        let mut counts = TransitionCounts::default();
        for s in &sessions {
            counts.add_session(&study, s);
        }
        assert_eq!(counts.sessions, 3);
        let start = &counts.states["start"];
        assert_eq!(start.choices.get("b"), Some(&2));
        assert_eq!(start.choices.get("a"), Some(&1));
        assert_eq!(start.sessions, 3);
        assert_eq!(counts.states["a"].total(), 1);
        assert_eq!(counts.states["c"].other, 1);
        assert_eq!(counts.states["c"].sessions, 1);

        let alpha = 0.5;
        let learned = estimate(&study, &counts, alpha);
        let start = learned.states.iter().find(|s| s.state == "start").unwrap();
        // Hand priors of `start` sum to 4; counts a=1, b=2; K=2, n=3.
        let pa = (1.0 + alpha) / (3.0 + 2.0 * alpha) * 4.0;
        let pb = (2.0 + alpha) / (3.0 + 2.0 * alpha) * 4.0;
        assert!((start.priors["a"] - pa).abs() < 1e-12);
        assert!((start.priors["b"] - pb).abs() < 1e-12);
        // `a` declares c and b (hand priors 1 + 1); one choice of c.
        let a = learned.states.iter().find(|s| s.state == "a").unwrap();
        assert!((a.priors["c"] - (1.0 + alpha) / (1.0 + 2.0 * alpha) * 2.0).abs() < 1e-12);
        assert!((a.priors["b"] - alpha / (1.0 + 2.0 * alpha) * 2.0).abs() < 1e-12);
        // `c` chose a once (declared, K=1): prior = hand sum 1.
        let c = learned.states.iter().find(|s| s.state == "c").unwrap();
        assert_eq!(c.priors.len(), 1);
        assert!((c.priors["a"] - 1.0).abs() < 1e-12);
        assert_eq!(c.other, 1);
        assert!(learned.no_data.is_empty());
        // Nothing invented: every learned target is declared.
        for s in &learned.states {
            let def = &study.study.states[study.state_idx(&s.state).unwrap()];
            for to in s.priors.keys() {
                assert!(def.transitions.iter().any(|t| t.to() == to));
            }
        }
    }

    #[test]
    fn a_state_without_choices_keeps_its_priors() {
        let study = study();
        let mut counts = TransitionCounts::default();
        counts.add_session(&study, &[entered("start", "a", false)]);
        let learned = estimate(&study, &counts, 1.0);
        assert_eq!(learned.no_data, vec!["a", "b", "c"]);
        assert_eq!(learned.states.len(), 1);
    }

    #[test]
    fn the_overlay_round_trips_learn_write_load() {
        let study = study();
        let mut counts = TransitionCounts::default();
        counts.add_session(
            &study,
            &[
                entered("start", "b", false),
                entered("b", "c", false),
                entered("c", "a", false),
                entered("a", "b", false),
            ],
        );
        let learned = estimate(&study, &counts, 1.0 / 3.0);
        let text = learned.to_yaml();
        let mut loaded = study.clone();
        crate::load::apply_priors_text(&mut loaded, "learned.yaml", &text)
            .unwrap_or_else(|d| panic!("{d}\n{text}"));
        for s in &learned.states {
            let def = &loaded.study.states[loaded.state_idx(&s.state).unwrap()];
            for t in &def.transitions {
                assert_eq!(t.prior(), s.priors[t.to()], "{} -> {}", s.state, t.to());
            }
        }
        // `a` chose b: its learned priors now favour b, where the hand priors were even.
        let a = &loaded.study.states[loaded.state_idx("a").unwrap()];
        assert!(a.transitions[1].prior() > a.transitions[0].prior());
    }

    #[test]
    fn the_overlay_is_checked_with_file_line_and_id() {
        let study = study();
        let text = "study: tiny\npriors:\n  start:\n    a: 2\n  nowhere:\n    a: 1\n  b:\n    a: 1\n    c: -1\n";
        let mut loaded = study.clone();
        let err = crate::load::apply_priors_text(&mut loaded, "p.yaml", text).unwrap_err();
        let lines: Vec<String> = err.0.iter().map(ToString::to_string).collect();
        assert_eq!(err.0.len(), 3, "{lines:?}");
        assert!(
            lines[0].starts_with("p.yaml:5:3: unknown state `nowhere`"),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("p.yaml:8:5: state `b` has no transition to `a`"),
            "{lines:?}"
        );
        assert!(
            lines[2].starts_with("p.yaml:9:5: the prior of `b` → `c` is -1"),
            "{lines:?}"
        );
        // Nothing was applied, not even the valid line.
        let start = &loaded.study.states[loaded.state_idx("start").unwrap()];
        assert_eq!(start.transitions[0].prior(), 3.0);

        let err =
            crate::load::apply_priors_text(&mut loaded, "q.yaml", "study: other\npriors: {}\n")
                .unwrap_err();
        assert!(
            err.0[0]
                .to_string()
                .starts_with("q.yaml:1:1: the priors are for study `other`")
        );
        let err = crate::load::apply_priors_text(&mut loaded, "r.yaml", "study: tiny\nprior: {}\n")
            .unwrap_err();
        assert!(err.0[0].to_string().starts_with("r.yaml:2:"), "{err}");
    }

    #[test]
    fn compare_scores_each_priors_hint_against_each_wizard() {
        let hand = study();
        let mut learned = hand.clone();
        crate::load::apply_priors_text(
            &mut learned,
            "l.yaml",
            "study: tiny\npriors:\n  start:\n    a: 0\n    b: 4\n",
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let c = compare(&hand, &learned, 40, 7);
        let [h, l] = &c.runs[..] else {
            panic!("two runs")
        };
        assert_eq!((h.wizard.as_str(), l.wizard.as_str()), ("hand", "learned"));
        assert!(h.choices > 0 && l.choices > 0);
        // The wizard that follows the learned priors always says b first: the learned hint
        // names it for sure there, the hand hint one time in four; elsewhere they are equal.
        assert!(l.hint_learned > l.hint_hand, "{l:?}");
        // The wizard of the hand priors mostly says a first, which the learned hint never names.
        assert!(h.hint_hand > h.hint_learned, "{h:?}");
        for r in &c.runs {
            for x in [r.hint_hand, r.hint_learned, r.top_hand, r.top_learned] {
                assert!((0.0..=1.0).contains(&x));
            }
            assert!(r.wizard_turns >= 1.0);
        }
    }
}
