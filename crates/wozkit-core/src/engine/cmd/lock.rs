//! `approve` and `deny`: the user answers the wizard's pending request (an approval lock).

use rand::Rng;

use crate::engine::Tx;
use crate::engine::command::{Refusal, apply_effects, need_role};
use crate::event::{Actor, EventKind, LockRelease, Role};
use crate::model::LockKind;

/// The user approves (`approved`) or denies the pending request: the lock is released and the
/// state's effects for that answer apply.
pub(in crate::engine) fn answer(
    tx: &mut Tx<'_>,
    actor: &Actor,
    approved: bool,
    rng: &mut impl Rng,
) -> Result<(), Refusal> {
    let study = tx.study;
    need_role(actor, Role::User)?;
    let lock = match &tx.s.lock {
        Some(l) if l.kind == LockKind::Approval => l.clone(),
        _ => return Err(Refusal::NoLock),
    };
    tx.emit(
        actor.clone(),
        EventKind::LockReleased {
            how: if approved {
                LockRelease::Approved
            } else {
                LockRelease::Denied
            },
        },
    );
    if let Some(l) = &study.study.states[lock.state].lock {
        let effects = if approved { &l.on_approve } else { &l.on_deny };
        apply_effects(tx, effects, rng);
    }
    Ok(())
}
