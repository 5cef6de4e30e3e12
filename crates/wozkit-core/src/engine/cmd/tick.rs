//! `tick` (system): the timers that are due fire: robot actions end or report progress, a
//! disconnect's grace runs out, the time limit is reached.

use rand::Rng;

use crate::engine::Tx;
use crate::engine::command::apply_effects_with_media;
use crate::event::{EndReason, EventKind};

/// Fires every timer due at `tx.now`, earliest first.
pub(in crate::engine) fn tick(tx: &mut Tx<'_>, rng: &mut impl Rng) {
    let study = tx.study;
    // Robot actions, in order of their end time.
    let mut due: Vec<(u64, usize)> =
        tx.s.robots
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.activity.as_ref().map(|a| (a.ends_ms, i)))
            .filter(|(t, _)| *t <= tx.now)
            .collect();
    due.sort();
    for (_, ri) in due {
        if tx.s.ended.is_some() {
            return;
        }
        let Some(a) = tx.s.robots[ri].activity.clone() else {
            continue;
        };
        let def = &study.study.actions[a.action];
        let robot = &study.study.world.robots[ri];
        let battery = (tx.s.robots[ri].battery - def.battery_cost).max(0.0);
        tx.system(EventKind::ActionCompleted {
            action: def.id.clone(),
            robot: robot.id.clone(),
            target: a.target.clone(),
            battery,
        });
        let media = def
            .media_by_kind
            .get(&robot.kind)
            .map(String::as_str)
            .or(def.on_complete.media.as_deref());
        apply_effects_with_media(tx, &def.on_complete, media, rng);
    }
    // Progress of actions still running.
    let progress: Vec<usize> =
        tx.s.robots
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.activity
                    .as_ref()
                    .and_then(|a| a.next_progress_ms)
                    .is_some_and(|p| p <= tx.now)
            })
            .map(|(i, _)| i)
            .collect();
    for ri in progress {
        if let Some(a) = tx.s.robots[ri].activity.clone() {
            // In u128: `done * 100` overflows u64 for spans beyond ~5 million years.
            let span = u128::from(a.ends_ms.saturating_sub(a.started_ms).max(1));
            let done = u128::from(tx.now.saturating_sub(a.started_ms)).min(span);
            let eta_s = a.ends_ms.saturating_sub(tx.now).div_ceil(1000);
            tx.system(EventKind::ActionProgress {
                action: study.study.actions[a.action].id.clone(),
                robot: study.study.world.robots[ri].id.clone(),
                percent: u32::try_from(done * 100 / span).unwrap_or(100),
                eta_s: u32::try_from(eta_s).unwrap_or(u32::MAX),
            });
        }
    }
    if tx.s.away.iter().any(|(_, until)| *until <= tx.now) {
        tx.end(EndReason::Disconnect);
    }
    if tx.s.deadline_ms.is_some_and(|d| d <= tx.now) {
        tx.end(EndReason::TimeLimit);
    }
}
