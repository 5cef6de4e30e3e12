//! Simulation per scenario variant: every value of every choice variable is played (the
//! cartesian product when it is small), so a variant that cannot be completed shows up before a
//! crowdworker meets it.

use std::collections::BTreeMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::{Summary, WizardPolicy, play_variant};
use crate::load::LoadedStudy;
use crate::scenario::{self, Values};

/// Largest cartesian product of choice values played in full; above it, each value of each
/// variable is played on its own (the other variables drawn).
pub const MAX_PRODUCT: usize = 24;

/// The outcome of the sessions of one variant.
#[derive(Clone, Debug, Serialize)]
pub struct VariantReport {
    /// `name=value` pairs of the fixed variables, e.g. `fire_location=pu_nt, robot_out=none`.
    pub label: String,
    /// The fixed values (the variables not listed were drawn per session).
    pub fixed: Values,
    pub sessions: usize,
    pub goal_reached: usize,
    /// Share of sessions that reached the goal (the completion rate).
    pub goal_share: f64,
    /// States where a session of this variant could go no further.
    pub dead_ends: Vec<String>,
    pub end_reasons: BTreeMap<String, usize>,
    /// Chat messages per session (turns of both sides).
    pub turns: Summary,
    pub simulated_seconds: Summary,
}

/// Plays `per_variant` sessions of every variant of the study's scenario (see
/// [`scenario::variants`]); seeds come from `seed`. A study without choice variables gives one
/// row with nothing fixed.
pub fn simulate_variants(
    study: &LoadedStudy,
    per_variant: usize,
    seed: u64,
    policy: WizardPolicy,
) -> Vec<VariantReport> {
    if study.study.states.get(study.compiled.initial).is_none() {
        return vec![];
    }
    let mut seeder = ChaCha8Rng::seed_from_u64(seed ^ 0x5ce9_a410);
    scenario::variants(&study.study, MAX_PRODUCT)
        .into_iter()
        .map(|fixed| {
            let seeds: Vec<u64> = (0..per_variant).map(|_| seeder.random()).collect();
            let played = play_all(study, &seeds, policy, &fixed);
            let mut dead: BTreeMap<String, usize> = BTreeMap::new();
            let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
            let (mut goals, mut turns, mut secs) = (0, vec![], vec![]);
            for p in played {
                if let Some(d) = p.dead_end {
                    *dead.entry(d).or_default() += 1;
                }
                if let Some((reason, goal)) = p.ended {
                    *reasons.entry(reason.as_str().to_string()).or_default() += 1;
                    goals += usize::from(goal);
                }
                turns.push(f64::from(p.messages));
                secs.push(p.seconds);
            }
            VariantReport {
                label: scenario::variant_label(&fixed),
                fixed,
                sessions: per_variant,
                goal_reached: goals,
                goal_share: if per_variant == 0 {
                    0.0
                } else {
                    goals as f64 / per_variant as f64
                },
                dead_ends: dead.into_keys().collect(),
                end_reasons: reasons,
                turns: Summary::of(turns),
                simulated_seconds: Summary::of(secs),
            }
        })
        .collect()
}

/// What one session of a variant contributes.
struct Small {
    dead_end: Option<String>,
    ended: Option<(crate::event::EndReason, bool)>,
    messages: u32,
    seconds: f64,
}

/// Plays the sessions on every core; results in seed order.
fn play_all(
    study: &LoadedStudy,
    seeds: &[u64],
    policy: WizardPolicy,
    fixed: &Values,
) -> Vec<Small> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(seeds.len().max(1));
    let chunk = seeds.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = seeds
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|s| {
                            let p = play_variant(study, *s, policy, fixed);
                            Small {
                                dead_end: p.dead_end,
                                ended: p.session.ended,
                                messages: p.session.messages,
                                seconds: p.session.now_ms.saturating_sub(p.session.started_at_ms)
                                    as f64
                                    / 1000.0,
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}
