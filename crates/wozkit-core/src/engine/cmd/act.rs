//! `act`: the wizard starts a robot action.

use crate::engine::command::{Refusal, need_role};
use crate::engine::offer;
use crate::engine::{Tx, after_secs};
use crate::event::{Actor, EventKind, Role};

/// The wizard starts `action` on `robot` (at `target`): it ends after the action's duration for
/// the robot's kind, or the distance over the robot's speed.
pub(in crate::engine) fn act(
    tx: &mut Tx<'_>,
    actor: &Actor,
    action: String,
    robot: String,
    target: Option<String>,
) -> Result<(), Refusal> {
    let study = tx.study;
    need_role(actor, Role::Wizard)?;
    let (ai, ri) = offer::action_check(study, &tx.s, &action, &robot, target.as_deref())?;
    let a = &study.study.actions[ai];
    let r = &study.study.world.robots[ri];
    let by_distance = a
        .distance
        .as_ref()
        .and_then(|var| tx.s.world.get(var))
        .and_then(serde_json::Value::as_f64)
        .filter(|_| r.speed > 0.0)
        .map(|metres| (metres / r.speed).min(f64::from(crate::model::MAX_SECONDS)));
    let secs = by_distance.unwrap_or_else(|| {
        a.duration
            .by_kind
            .get(&r.kind)
            .copied()
            .unwrap_or(a.duration.default)
    });
    let ends = after_secs(tx.now, secs);
    let mut robots = offer::robot_snapshots(study, &tx.s);
    if let Some(snap) = robots.get_mut(ri) {
        snap.busy = true;
    }
    tx.emit(
        actor.clone(),
        EventKind::ActionStarted {
            action: a.id.clone(),
            label: a.act.clone().unwrap_or_else(|| a.id.clone()),
            robot: r.id.clone(),
            target,
            ends_at_ms: ends,
            world: (*tx.s.world).clone(),
            robots,
        },
    );
    Ok(())
}
