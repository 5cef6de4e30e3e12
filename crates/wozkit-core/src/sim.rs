//! Simulation: plays sessions with random wizard and user policies to find dead ends and measure
//! coverage before any crowdworker is paid. Also the policy of the built-in bots.

use std::collections::{BTreeMap, HashSet};

use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::engine::{self, Command, OfferKind, Session};
use crate::event::{Actor, EndReason, EventKind, MessageSource, Role};
use crate::load::LoadedStudy;
use crate::model::LockKind;

mod variants;
pub use variants::{MAX_PRODUCT, VariantReport, simulate_variants};

/// How the simulated wizard picks among offered options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WizardPolicy {
    /// Weighted by the transitions' hint priors.
    Priors,
    /// Uniformly.
    Uniform,
}

/// A summary of several numbers.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(mut xs: Vec<f64>) -> Summary {
        if xs.is_empty() {
            return Summary::default();
        }
        xs.sort_by(f64::total_cmp);
        let q = |p: f64| xs[((xs.len() - 1) as f64 * p).round() as usize];
        Summary {
            mean: xs.iter().sum::<f64>() / xs.len() as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: xs[xs.len() - 1],
        }
    }
}

/// What `wozkit simulate` reports.
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    pub study: String,
    pub policy: WizardPolicy,
    pub seed: u64,
    pub sessions: usize,
    pub goal_reached: usize,
    pub goal_share: f64,
    pub states_covered: usize,
    pub states_total: usize,
    pub transitions_covered: usize,
    pub transitions_total: usize,
    /// States where a session could go no further (no option, no action, nothing pending).
    pub dead_ends: Vec<String>,
    pub uncovered_states: Vec<String>,
    pub end_reasons: BTreeMap<String, usize>,
    pub steps: Summary,
    pub simulated_seconds: Summary,
}

/// One simulated session.
pub struct Played {
    pub session: Session,
    pub events: Vec<(Actor, EventKind, u64)>,
    pub steps: usize,
    pub dead_end: Option<String>,
}

/// The next command of a random wizard; None when it has nothing to do.
pub fn wizard_move(
    study: &LoadedStudy,
    s: &Session,
    policy: WizardPolicy,
    rng: &mut impl Rng,
) -> Option<Command> {
    let mut choices = offer_choices(study, s, policy);
    if let Some(choice) = select_choice(study, s, choices.is_empty(), rng) {
        choices.push(choice);
    }
    if choices.is_empty() {
        return None;
    }
    if !study.study.fixed_options.is_empty() && rng.random_bool(0.05) {
        let f = &study.study.fixed_options[rng.random_range(0..study.study.fixed_options.len())];
        return Some(Command::Fixed { id: f.id.clone() });
    }
    if engine::finish_allowed(study, s) && rng.random_bool(0.05) {
        return Some(Command::Finish);
    }
    pick_weighted(choices, rng)
}

/// The wizard's offered options and valid actions, each with its weight.
fn offer_choices(study: &LoadedStudy, s: &Session, policy: WizardPolicy) -> Vec<(f64, Command)> {
    let offers = engine::offered(study, s);
    let actions = engine::valid_actions(study, s);
    let mut choices: Vec<(f64, Command)> = offers
        .iter()
        .map(|o| {
            let w = match policy {
                WizardPolicy::Priors => o.prior.max(0.0),
                WizardPolicy::Uniform => 1.0,
            };
            // Status updates are offered everywhere; keep them from drowning the dialogue.
            let w = if o.kind == OfferKind::Global {
                w * 0.15
            } else {
                w
            };
            (
                w,
                Command::Say {
                    state: o.state.clone(),
                },
            )
        })
        .collect();
    let per_action = if actions.is_empty() {
        0.0
    } else {
        1.5 / actions.len() as f64
    };
    choices.extend(actions.into_iter().map(|(action, robot, target)| {
        (
            per_action,
            Command::Act {
                action,
                robot,
                target,
            },
        )
    }));
    choices
}

/// The wizard's database: select a row of one table (of the first rows a search finds). A
/// first selection is always possible; another only next to something else to do (`no_other`
/// says there is nothing else), so a study whose selections lead nowhere still shows its dead
/// end.
fn select_choice(
    study: &LoadedStudy,
    s: &Session,
    no_other: bool,
    rng: &mut impl Rng,
) -> Option<(f64, Command)> {
    let db = study.database.as_ref()?;
    if db.tables().is_empty() {
        return None;
    }
    let t = db
        .tables()
        .keys()
        .nth(rng.random_range(0..db.tables().len()))?;
    if no_other && s.db_selected.contains_key(t) {
        return None;
    }
    let found = db.query(t, &[], crate::database::MAX_RESULTS).ok()?;
    if found.keys.is_empty() {
        return None;
    }
    let key = found.keys[rng.random_range(0..found.keys.len())].clone();
    let w = if s.db_selected.contains_key(t) {
        0.3
    } else {
        2.0
    };
    Some((
        w,
        Command::Select {
            table: t.clone(),
            key,
        },
    ))
}

/// One of `choices` drawn by weight (uniformly when no weight is positive).
fn pick_weighted(mut choices: Vec<(f64, Command)>, rng: &mut impl Rng) -> Option<Command> {
    let total: f64 = choices.iter().map(|c| c.0).sum();
    if total <= 0.0 {
        let i = rng.random_range(0..choices.len());
        return Some(choices.swap_remove(i).1);
    }
    let mut x = rng.random_range(0.0..total);
    let last = choices.len() - 1;
    for (i, (w, _)) in choices.iter().enumerate() {
        x -= w;
        if x < 0.0 || i == last {
            return Some(choices.swap_remove(i).1);
        }
    }
    None
}

/// The next command of a random user.
pub fn user_move(study: &LoadedStudy, s: &Session, rng: &mut impl Rng) -> Option<Command> {
    if study.study.session.user_waits_for_wizard && !s.wizard_spoke {
        return None;
    }
    match s.lock.as_ref().map(|l| l.kind) {
        Some(LockKind::Approval) => Some(if rng.random_bool(0.8) {
            Command::Approve
        } else {
            Command::Deny
        }),
        Some(LockKind::Reply) => Some(Command::Text {
            text: "Okay, go ahead.".into(),
        }),
        None => rng.random_bool(0.2).then(|| Command::Text {
            text: "What is the status?".into(),
        }),
    }
}

/// Plays one session to its end.
pub fn play(study: &LoadedStudy, seed: u64, policy: WizardPolicy) -> Played {
    play_variant(study, seed, policy, &crate::scenario::Values::new())
}

/// Plays one session to its end with some scenario variables fixed (`fixed`, by name; the
/// others are drawn as in a live session).
pub fn play_variant(
    study: &LoadedStudy,
    seed: u64,
    policy: WizardPolicy,
    fixed: &crate::scenario::Values,
) -> Played {
    let mut p = Playing {
        study,
        rng: ChaCha8Rng::seed_from_u64(seed),
        s: Session::new(study, &format!("sim-{seed}")),
        events: vec![],
    };
    let mut now: u64 = 0;
    let mut steps = 0;
    let mut dead_end = None;
    let user = sim_actor(Role::User);
    let wizard = sim_actor(Role::Wizard);
    p.start(seed, fixed, now);
    for (actor, role) in [(&user, Role::User), (&wizard, Role::Wizard)] {
        p.run(actor, Command::Join { role, bot: true }, now);
    }
    while !p.s.is_ended() && steps < 5000 {
        steps += 1;
        now += p.rng.random_range(2000..8000);
        // Timers due during the think time fire first; they do not take a turn.
        while let Some(t) = engine::next_wakeup(study, &p.s).filter(|t| *t <= now) {
            p.run(&Actor::System, Command::Tick, t);
        }
        if p.s.is_ended() {
            break;
        }
        if let Some(cmd) = user_move(study, &p.s, &mut p.rng) {
            p.run(&user, cmd, now);
            if p.s.lock.is_some() || p.rng.random_bool(0.5) {
                continue;
            }
        }
        if let Some(d) = p.wizard_turn(&wizard, policy, now) {
            dead_end = Some(d);
        }
    }
    Played {
        session: p.s,
        events: p.events,
        steps,
        dead_end,
    }
}

/// The simulation's bot playing `role`.
fn sim_actor(role: Role) -> Actor {
    Actor::Bot {
        role,
        name: "sim".into(),
    }
}

/// A session being played: the session so far, its random source and the events logged.
struct Playing<'a> {
    study: &'a LoadedStudy,
    rng: ChaCha8Rng,
    s: Session,
    events: Vec<(Actor, EventKind, u64)>,
}

impl Playing<'_> {
    /// Starts the session, drawing the scenario variables that `fixed` does not give.
    fn start(&mut self, seed: u64, fixed: &crate::scenario::Values, now: u64) {
        if let Ok(step) =
            engine::start_with_scenario(self.study, &self.s, seed, fixed, now, &mut self.rng)
        {
            self.events
                .extend(step.events.into_iter().map(|(a, k)| (a, k, now)));
            self.s = step.session;
        }
    }

    /// Runs one command at `now`; a refused one changes nothing.
    fn run(&mut self, actor: &Actor, cmd: Command, now: u64) {
        if let Ok(step) = engine::step(self.study, &self.s, actor, cmd, now, &mut self.rng) {
            self.events
                .extend(step.events.into_iter().map(|(a, k)| (a, k, now)));
            self.s = step.session;
        }
    }

    /// The wizard's turn: its move, or, when it has none and nothing is pending, an abort; then
    /// the state where the session could go no further.
    fn wizard_turn(&mut self, wizard: &Actor, policy: WizardPolicy, now: u64) -> Option<String> {
        match wizard_move(self.study, &self.s, policy, &mut self.rng) {
            Some(cmd) => {
                self.run(wizard, cmd, now);
                None
            }
            None => {
                let pending = self.s.lock.is_some() || self.s.busy_robots() > 0;
                if pending {
                    return None;
                }
                let dead_end = self.study.study.states[self.s.current].id.clone();
                let abort = Command::Abort {
                    reason: EndReason::Aborted,
                };
                self.run(&Actor::System, abort, now);
                Some(dead_end)
            }
        }
    }
}

/// What one simulated session contributes to the report (kept small: the events are dropped).
struct Outcome {
    states: HashSet<String>,
    transitions: HashSet<(String, String)>,
    dead_end: Option<String>,
    ended: Option<(EndReason, bool)>,
    steps: usize,
    seconds: f64,
}

fn outcome(p: Played) -> Outcome {
    let mut states = HashSet::new();
    let mut transitions = HashSet::new();
    for (_, kind, _) in &p.events {
        match kind {
            EventKind::Message {
                source: MessageSource::State { state, .. },
                ..
            } => {
                states.insert(state.clone());
            }
            EventKind::StateEntered {
                from, to, by_event, ..
            } => {
                if !by_event {
                    transitions.insert((from.clone(), to.clone()));
                }
                states.insert(to.clone());
            }
            _ => {}
        }
    }
    Outcome {
        states,
        transitions,
        dead_end: p.dead_end,
        ended: p.session.ended,
        steps: p.steps,
        seconds: p.session.now_ms.saturating_sub(p.session.started_at_ms) as f64 / 1000.0,
    }
}

/// Plays `n` sessions with seeds derived from `seed` and reports coverage and outcomes.
pub fn simulate(study: &LoadedStudy, n: usize, seed: u64, policy: WizardPolicy) -> SimReport {
    let st = &study.study;
    let mut covered: HashSet<String> = HashSet::new();
    // A study without dialogue states (an evaluation study) has no session to play.
    let n = match st.states.get(study.compiled.initial) {
        Some(initial) => {
            covered.insert(initial.id.clone());
            n
        }
        None => 0,
    };
    let mut covered_t: HashSet<(String, String)> = HashSet::new();
    let all_t = all_transitions(study);
    let mut dead: BTreeMap<String, usize> = BTreeMap::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let (mut goals, mut steps, mut secs) = (0, vec![], vec![]);
    let mut seeder = ChaCha8Rng::seed_from_u64(seed);
    let seeds: Vec<u64> = (0..n).map(|_| seeder.random()).collect();
    for o in play_all(study, &seeds, policy) {
        covered.extend(o.states);
        covered_t.extend(o.transitions);
        if let Some(d) = o.dead_end {
            *dead.entry(d).or_default() += 1;
        }
        if let Some((reason, goal)) = o.ended {
            *reasons.entry(reason.as_str().to_string()).or_default() += 1;
            goals += usize::from(goal);
        }
        steps.push(o.steps as f64);
        secs.push(o.seconds);
    }
    let uncovered: Vec<String> = st
        .states
        .iter()
        .filter(|s| !covered.contains(&s.id))
        .map(|s| s.id.clone())
        .collect();
    SimReport {
        study: st.id.clone(),
        policy,
        seed,
        sessions: n,
        goal_reached: goals,
        goal_share: if n == 0 { 0.0 } else { goals as f64 / n as f64 },
        states_covered: st.states.len() - uncovered.len(),
        states_total: st.states.len(),
        transitions_covered: covered_t.intersection(&all_t).count(),
        transitions_total: all_t.len(),
        dead_ends: dead.into_keys().collect(),
        uncovered_states: uncovered,
        end_reasons: reasons,
        steps: Summary::of(steps),
        simulated_seconds: Summary::of(secs),
    }
}

/// Every transition of the study, as (from, to) state ids.
fn all_transitions(study: &LoadedStudy) -> HashSet<(String, String)> {
    study
        .study
        .states
        .iter()
        .flat_map(|s| {
            s.transitions
                .iter()
                .map(|t| (s.id.clone(), t.to().to_string()))
        })
        .collect()
}

/// Plays a session for each seed and returns their outcomes in seed order. Sessions are
/// independent: they are played on every core, then folded in seed order.
fn play_all(study: &LoadedStudy, seeds: &[u64], policy: WizardPolicy) -> Vec<Outcome> {
    let n = seeds.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(n.max(1));
    let chunk = n.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = seeds
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|s| outcome(play(study, *s, policy)))
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
