//! `fixed`: the wizard says one of the study's fixed options.

use crate::engine::Tx;
use crate::engine::command::{Refusal, need_role, wizard_spoke};
use crate::engine::offer;
use crate::event::{Actor, EventKind, MessageSource, Role};

/// The wizard says the fixed option `id`.
pub(in crate::engine) fn fixed(tx: &mut Tx<'_>, actor: &Actor, id: String) -> Result<(), Refusal> {
    let study = tx.study;
    need_role(actor, Role::Wizard)?;
    let f = study
        .study
        .fixed_options
        .iter()
        .find(|f| f.id == id)
        .ok_or(Refusal::UnknownFixed { id })?;
    let text = offer::render(study, &tx.s, &f.text);
    wizard_spoke(tx);
    tx.emit(
        actor.clone(),
        EventKind::Message {
            role: Role::Wizard,
            text,
            source: MessageSource::Fixed {
                id: f.id.clone(),
                label: f.id.clone(),
                act_type: f.act_type,
            },
        },
    );
    Ok(())
}
