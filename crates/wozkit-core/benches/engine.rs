//! Benchmark of the engine: latency of one `step` on the demo study (median, p99) and the
//! throughput of `simulate` (sessions/s, steps/s). Prints figures; asserts nothing.
//! Run: `cargo bench -p wozkit-core --bench engine [-- PART]`, PART one of `step`, `offered`,
//! `view`, `simulate` (all by default).

use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wozkit_core::engine::{self, Command, Session, step};
use wozkit_core::event::{Actor, Role};
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_core::sim::{self, WizardPolicy};

fn percentile(sorted: &[u128], p: f64) -> u128 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A session of the demo study some way in: started, a dozen wizard moves made, options offered.
fn mid_session(study: &LoadedStudy, rng: &mut ChaCha8Rng) -> Session {
    let wizard = Actor::Participant {
        role: Role::Wizard,
        participant: None,
    };
    for seed in 0.. {
        let mut s = step(
            study,
            &Session::new(study, "m"),
            &Actor::System,
            Command::Start { seed },
            0,
            rng,
        )
        .expect("start")
        .session;
        let mut now = 0;
        for _ in 0..12 {
            now += 3000;
            let Some(cmd) = sim::wizard_move(study, &s, WizardPolicy::Priors, rng) else {
                break;
            };
            if let Ok(st) = step(study, &s, &wizard, cmd, now, rng) {
                s = st.session;
            }
        }
        if !s.is_ended() && s.lock.is_none() && engine::offered(study, &s).len() > 3 {
            return s;
        }
    }
    unreachable!("some session reaches a mid-session state")
}

/// What the server derives from the engine for one wizard view, without serialising it.
fn view_basis(study: &LoadedStudy, s: &Session) -> usize {
    let vars = engine::vars(study, s);
    let mut n = usize::from(engine::finish_allowed_with(study, s, &vars));
    n += usize::from(s.goal_met_with(study, &vars));
    let st = &study.study;
    for o in engine::offered_with(study, s, &vars) {
        let parts = study
            .state_idx(&o.state)
            .and_then(|i| st.states[i].templates.get(o.template))
            .and_then(|t| engine::render_clock_parts(study, s, t));
        n += o.text.len() + parts.map_or(0, |p| p.len());
    }
    for f in &st.fixed_options {
        n += engine::render(study, s, &f.text).len();
        n += engine::render_clock_parts(study, s, &f.text).map_or(0, |p| p.len());
    }
    n + usize::from(engine::alarm_with(study, s, &vars).is_some_and(|(_, c)| c))
}

fn main() {
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let run = |part: &str| only.is_empty() || only.iter().any(|o| o == part);
    let study = load_builtin("offshore-emergency").expect("demo study loads");
    let wizard = Actor::Participant {
        role: Role::Wizard,
        participant: None,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(1);

    // Step latency: the wizard's decision step (offered options + say) along simulated sessions.
    let mut nanos = vec![];
    for seed in 0..if run("step") { 300 } else { 0 } {
        let mut s = Session::new(&study, "b");
        s = step(
            &study,
            &s,
            &Actor::System,
            Command::Start { seed },
            0,
            &mut rng,
        )
        .expect("start")
        .session;
        let mut now = 0;
        for _ in 0..40 {
            now += 3000;
            let Some(cmd) = sim::wizard_move(&study, &s, WizardPolicy::Priors, &mut rng) else {
                break;
            };
            let t = Instant::now();
            let r = step(&study, &s, &wizard, cmd, now, &mut rng);
            nanos.push(t.elapsed().as_nanos());
            if let Ok(st) = r {
                s = st.session;
            }
            if s.is_ended() {
                break;
            }
        }
    }
    nanos.sort_unstable();
    if !nanos.is_empty() {
        println!(
            "step: {} samples, median {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            nanos.len(),
            percentile(&nanos, 0.5) as f64 / 1000.0,
            percentile(&nanos, 0.99) as f64 / 1000.0,
            *nanos.last().unwrap_or(&0) as f64 / 1000.0
        );
    }

    // Offered options alone (what the server computes for every view).
    let s = step(
        &study,
        &Session::new(&study, "b"),
        &Actor::System,
        Command::Start { seed: 1 },
        0,
        &mut rng,
    )
    .expect("start")
    .session;
    let t = Instant::now();
    let n = 20_000;
    if run("offered") {
        for _ in 0..n {
            std::hint::black_box(wozkit_core::engine::offered(&study, &s));
        }
        println!(
            "offered: {:.1} µs per call",
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
    }

    // What a view of a mid-session state builds: the condition variables, finishing, the goal,
    // the offered options (with their clock parts), the fixed options and the alarm.
    if run("view") {
        let mid = mid_session(&study, &mut rng);
        let n = 20_000;
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(view_basis(&study, &mid));
        }
        let per_view = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(engine::vars(&study, &mid));
        }
        println!(
            "view basis (mid-session, {} offers): {per_view:.1} µs per view, of which vars {:.1} µs",
            engine::offered(&study, &mid).len(),
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
    }

    // Simulation throughput.
    if !run("simulate") {
        return;
    }
    let t = Instant::now();
    let sessions = 2000;
    let r = sim::simulate(&study, sessions, 7, WizardPolicy::Priors);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "simulate: {sessions} sessions in {secs:.2} s = {:.0} sessions/s, {:.0} steps/s (mean {:.1} steps/session)",
        sessions as f64 / secs,
        r.steps.mean * sessions as f64 / secs,
        r.steps.mean
    );
}
