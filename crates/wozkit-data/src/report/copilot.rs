//! The copilot's uptake in the report: per system that suggested the wizard's messages
//! (`docs/copilot.md`), how many suggestions were sent as they were, edited, or ignored, and how
//! far the edited ones were changed.
//!
//! - **Acceptance** is the share of suggestions the wizard sent from (as they were or edited);
//!   **as is** the share sent unchanged. Both are ratios of totals over the system's sessions.
//! - **Intervals**: percentile bootstrap over sessions (a resample draws sessions with
//!   replacement and keeps all their suggestions, since one wizard's suggestions are not
//!   independent), with the report's `resamples` and `seed`; none below two sessions.
//! - **Edit distance**: characters inserted, deleted or replaced between the suggestion and the
//!   message sent ([`wozkit_core::copilot::edits`]), over the edited ones; relative, the same
//!   divided by the suggestion's length.

use indexmap::IndexMap;
use serde::Serialize;
use wozkit_core::copilot::{Uptake, uptake};
use wozkit_core::event::Event;

use super::html::{esc, num};
use crate::stats::bootstrap::percentile_interval;
use crate::stats::{mean, median};

/// The interval's level.
const LEVEL: f64 = 0.95;

/// The section: absent from the report when no session had a suggestion.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CopilotUptake {
    /// Sessions with at least one suggestion.
    pub sessions: usize,
    pub resamples: usize,
    pub seed: u64,
    pub systems: Vec<SystemUptake>,
}

/// One copilot system's uptake.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SystemUptake {
    pub system: String,
    pub sessions: usize,
    pub suggested: u32,
    pub sent: u32,
    pub edited: u32,
    pub ignored: u32,
    /// (sent + edited) / suggested.
    pub acceptance: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance_ci95: Option<(f64, f64)>,
    /// sent / suggested.
    pub as_is: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_is_ci95: Option<(f64, f64)>,
    /// Mean and median edit distance of the edited suggestions, in characters.
    pub mean_edits: Option<f64>,
    pub median_edits: Option<f64>,
    /// Mean edit distance divided by the suggestion's length.
    pub mean_relative_edits: Option<f64>,
}

/// Collects each session's uptake, by system.
#[derive(Default)]
pub struct Collector {
    by_system: IndexMap<String, Vec<Uptake>>,
}

impl Collector {
    /// Reads one session that passed the report's filters.
    pub fn add(&mut self, events: &[Event]) {
        if let Some((system, u)) = uptake(events) {
            self.by_system.entry(system).or_default().push(u);
        }
    }

    pub fn report(mut self, resamples: usize, seed: u64) -> Option<CopilotUptake> {
        if self.by_system.is_empty() {
            return None;
        }
        self.by_system.sort_keys();
        let sessions = self.by_system.values().map(Vec::len).sum();
        let systems = self
            .by_system
            .into_iter()
            .enumerate()
            .map(|(i, (system, sessions))| {
                system_uptake(system, &sessions, resamples, seed.wrapping_add(i as u64))
            })
            .collect();
        Some(CopilotUptake {
            sessions,
            resamples,
            seed,
            systems,
        })
    }
}

fn share(sessions: &[&Uptake], part: fn(&Uptake) -> u32) -> Option<f64> {
    let suggested: u32 = sessions.iter().map(|u| u.suggested).sum();
    let part: u32 = sessions.iter().map(|u| part(u)).sum();
    (suggested > 0).then(|| f64::from(part) / f64::from(suggested))
}

fn system_uptake(system: String, sessions: &[Uptake], resamples: usize, seed: u64) -> SystemUptake {
    let mut total = Uptake::default();
    for u in sessions {
        total.add(u);
    }
    let all: Vec<&Uptake> = sessions.iter().collect();
    let accepted = |u: &Uptake| u.sent + u.edited;
    let as_is = |u: &Uptake| u.sent;
    let interval = |part: fn(&Uptake) -> u32| {
        percentile_interval(sessions, resamples, LEVEL, seed, |s| share(s, part))
    };
    let edits: Vec<f64> = total.edit_distances.iter().map(|d| f64::from(*d)).collect();
    let relative: Vec<f64> = total
        .edit_distances
        .iter()
        .zip(&total.edited_lengths)
        .filter(|(_, len)| **len > 0)
        .map(|(d, len)| f64::from(*d) / f64::from(*len))
        .collect();
    SystemUptake {
        system,
        sessions: sessions.len(),
        suggested: total.suggested,
        sent: total.sent,
        edited: total.edited,
        ignored: total.ignored,
        acceptance: share(&all, accepted),
        acceptance_ci95: interval(accepted),
        as_is: share(&all, as_is),
        as_is_ci95: interval(as_is),
        mean_edits: mean(&edits),
        median_edits: median(&edits),
        mean_relative_edits: mean(&relative),
    }
}

/// The section of the HTML page.
pub fn render(page: &mut String, section: &CopilotUptake) {
    use std::fmt::Write as _;
    let _ = write!(
        page,
        "<h2>Copilot</h2><p>{} sessions with suggestions of the wizard's messages; 95 % \
         intervals from {} bootstrap resamples of sessions (seed {}). Rules: \
         <code>docs/copilot.md</code>.</p><table><tr><th>system</th><th>sessions</th>\
         <th>suggested</th><th>sent as is</th><th>edited</th><th>ignored</th>\
         <th>acceptance</th><th>as is</th><th>edit distance (mean, median)</th>\
         <th>relative edit distance</th></tr>",
        section.sessions, section.resamples, section.seed
    );
    for s in &section.systems {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}, {}</td><td>{}</td></tr>",
            esc(&s.system),
            s.sessions,
            s.suggested,
            s.sent,
            s.edited,
            s.ignored,
            with_interval(s.acceptance, s.acceptance_ci95),
            with_interval(s.as_is, s.as_is_ci95),
            num(s.mean_edits),
            num(s.median_edits),
            num(s.mean_relative_edits),
        );
    }
    page.push_str("</table>");
}

fn with_interval(value: Option<f64>, ci: Option<(f64, f64)>) -> String {
    match ci {
        Some((lo, hi)) => format!("{} [{}, {}]", num(value), num(Some(lo)), num(Some(hi))),
        None => num(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(suggested: u32, sent: u32, edits: &[u32]) -> Uptake {
        Uptake {
            suggested,
            sent,
            edited: edits.len() as u32,
            ignored: suggested - sent - edits.len() as u32,
            edit_distances: edits.to_vec(),
            edited_lengths: vec![20; edits.len()],
        }
    }

    #[test]
    fn shares_are_of_all_suggestions_and_intervals_resample_sessions() {
        let mut c = Collector::default();
        c.by_system.insert(
            "helper".into(),
            vec![
                session(4, 2, &[5]),
                session(6, 0, &[2, 4, 6]),
                session(2, 2, &[]),
            ],
        );
        let r = c.report(200, 1).expect("a section");
        assert_eq!(r.sessions, 3);
        let s = &r.systems[0];
        assert_eq!((s.suggested, s.sent, s.edited, s.ignored), (12, 4, 4, 4));
        assert_eq!(s.acceptance, Some(8.0 / 12.0));
        assert_eq!(s.as_is, Some(4.0 / 12.0));
        assert_eq!(s.mean_edits, Some(4.25));
        assert_eq!(s.median_edits, Some(4.5));
        let relative = s.mean_relative_edits.expect("relative distance");
        assert!((relative - 4.25 / 20.0).abs() < 1e-12, "{relative}");
        let (lo, hi) = s.acceptance_ci95.expect("an interval");
        assert!(lo <= 8.0 / 12.0 && 8.0 / 12.0 <= hi, "{lo} {hi}");
        // Reproducible with the seed.
        let mut again = Collector::default();
        again.by_system.insert(
            "helper".into(),
            vec![
                session(4, 2, &[5]),
                session(6, 0, &[2, 4, 6]),
                session(2, 2, &[]),
            ],
        );
        assert_eq!(again.report(200, 1).expect("a section").systems[0], *s);
    }

    #[test]
    fn one_session_has_no_interval_and_none_no_section() {
        assert!(Collector::default().report(100, 0).is_none());
        let mut c = Collector::default();
        c.by_system
            .insert("helper".into(), vec![session(3, 0, &[])]);
        let s = &c.report(100, 0).expect("a section").systems[0];
        assert_eq!(s.acceptance, Some(0.0));
        assert_eq!(s.acceptance_ci95, None);
        assert_eq!(s.mean_edits, None);
    }
}
