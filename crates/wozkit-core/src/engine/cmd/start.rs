//! `start` (system): the session begins.

use rand::{Rng, RngExt};

use crate::engine::Tx;
use crate::engine::command::start_clock;
use crate::event::EventKind;
use crate::model::ClockStart;

/// Starts the session: `session_started`, then the scenario's draw (values in `fixed` taken as
/// they are), then the clock if it starts now.
pub(in crate::engine) fn start(
    tx: &mut Tx<'_>,
    seed: u64,
    fixed: &crate::scenario::Values,
    rng: &mut impl Rng,
) {
    let study = tx.study;
    let initial = study.study.states[study.compiled.initial].id.clone();
    tx.system(EventKind::SessionStarted {
        study: study.study.id.clone(),
        study_version: study.study.version.clone(),
        seed,
        initial_state: initial,
    });
    if !study.study.scenario.is_empty() {
        let d = crate::scenario::draw(&study.study, &study.study.world.variables, fixed, rng);
        tx.system(EventKind::ScenarioDrawn {
            values: d.values,
            world: d.world,
            out_of_service: d.out_of_service,
        });
    }
    if let Some(rules) = &study.study.goals
        && let Some(db) = &study.database
    {
        let goal_seed: u64 = rng.random();
        // A study that passed its checks fails here only on an empty table: it then runs
        // without a goal rather than not at all.
        if let Ok(goal) = crate::goals::generate(rules, db, goal_seed) {
            let description = crate::goals::describe(&goal, rules.text.as_ref());
            tx.system(EventKind::GoalGenerated {
                seed: goal_seed,
                goal,
                description,
            });
        }
    }
    if study.study.session.clock_starts == ClockStart::Start {
        start_clock(tx);
    }
}
