//! `finish`: either side ends the dialogue, when the study allows it now.

use crate::engine::Tx;
use crate::engine::command::{Refusal, actor_role};
use crate::engine::offer;
use crate::event::{Actor, EndReason};

/// Ends the dialogue as finished.
pub(in crate::engine) fn finish(tx: &mut Tx<'_>, actor: &Actor) -> Result<(), Refusal> {
    let study = tx.study;
    actor_role(actor)?;
    if !offer::finish_allowed(study, &tx.s) {
        return Err(Refusal::FinishNotAllowed);
    }
    tx.end(EndReason::Finished);
    Ok(())
}
