//! `say`: the wizard says one of the dialogue states offered now.

use rand::Rng;

use crate::engine::Tx;
use crate::engine::command::{Refusal, apply_effects, free_wizard, wizard_spoke};
use crate::engine::fresh_seed;
use crate::engine::offer::{self, OfferKind};
use crate::event::{Actor, EndReason, EventKind, MessageSource, Role};

/// The wizard says the offered state `state`: its message, the move to it (unless a global
/// option), its subtask, effects and lock, and the end at a terminal state.
pub(in crate::engine) fn say(
    tx: &mut Tx<'_>,
    actor: &Actor,
    state: String,
    rng: &mut impl Rng,
) -> Result<(), Refusal> {
    let study = tx.study;
    free_wizard(tx, actor)?;
    let Some(o) = offer::offer_of(study, &tx.s, &state) else {
        return Err(Refusal::NotOffered { state });
    };
    let idx = study
        .state_idx(&o.state)
        .ok_or(Refusal::NotOffered { state })?;
    let def = &study.study.states[idx];
    wizard_spoke(tx);
    tx.emit(
        actor.clone(),
        EventKind::Message {
            role: Role::Wizard,
            text: o.text,
            source: MessageSource::State {
                state: def.id.clone(),
                label: def.label().to_string(),
                act_type: def.act_type,
                template: o.template,
            },
        },
    );
    if o.kind != OfferKind::Global {
        let from = study.study.states[tx.s.current].id.clone();
        tx.system(EventKind::StateEntered {
            from,
            to: def.id.clone(),
            template_seed: fresh_seed(rng),
            by_event: false,
        });
    }
    if let Some(st) = &def.subtask
        && tx.s.subtask.as_ref() != Some(st)
    {
        tx.system(EventKind::SubtaskEntered {
            subtask: st.clone(),
        });
    }
    apply_effects(tx, &def.effects, rng);
    if let Some(lock) = &def.lock {
        tx.system(EventKind::LockStarted {
            state: def.id.clone(),
            lock: lock.kind,
            prompt: lock.prompt.as_ref().map(|p| offer::render(study, &tx.s, p)),
        });
    }
    if def.terminal {
        tx.end(EndReason::Terminal);
    }
    Ok(())
}
