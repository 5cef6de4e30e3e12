//! `hint`: the wizard asks which offered state to say, drawn by the states' priors.

use rand::{Rng, RngExt};

use crate::engine::Tx;
use crate::engine::command::{Refusal, free_wizard};
use crate::engine::offer;
use crate::event::{Actor, EventKind};

/// A hint: one offered state, drawn in proportion to its prior (uniformly when every prior
/// is 0).
pub(in crate::engine) fn hint(
    tx: &mut Tx<'_>,
    actor: &Actor,
    rng: &mut impl Rng,
) -> Result<(), Refusal> {
    let study = tx.study;
    free_wizard(tx, actor)?;
    // Only the picked state is needed, not the offers' texts.
    let offers = offer::offered_states_with(study, &tx.s, &offer::vars(study, &tx.s));
    let total: f64 = offers.iter().map(|o| o.prior.max(0.0)).sum();
    if offers.is_empty() {
        return Err(Refusal::NoHint);
    }
    let pick = if total > 0.0 {
        let mut x = rng.random_range(0.0..total);
        offers
            .iter()
            .find(|o| {
                x -= o.prior.max(0.0);
                x < 0.0
            })
            .unwrap_or(&offers[offers.len() - 1])
    } else {
        &offers[rng.random_range(0..offers.len())]
    };
    tx.emit(
        actor.clone(),
        EventKind::HintGiven {
            state: study.study.states[pick.state].id.clone(),
        },
    );
    Ok(())
}
