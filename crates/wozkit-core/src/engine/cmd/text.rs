//! `text`: free text from either side.

use crate::engine::command::{Refusal, actor_role, wizard_spoke};
use crate::engine::{MAX_TEXT_CHARS, Tx};
use crate::event::{Actor, EventKind, LockRelease, MessageSource, Role};
use crate::model::LockKind;

/// Free text: trimmed, not empty, not too long; a user waits for the wizard's first words when
/// the study says so; a user's reply releases a reply lock.
pub(in crate::engine) fn text(tx: &mut Tx<'_>, actor: &Actor, text: String) -> Result<(), Refusal> {
    let study = tx.study;
    let role = actor_role(actor)?;
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(Refusal::EmptyText);
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(Refusal::TextTooLong {
            max: MAX_TEXT_CHARS,
        });
    }
    if role == Role::User && study.study.session.user_waits_for_wizard && !tx.s.wizard_spoke {
        return Err(Refusal::MutedUntilWizard);
    }
    if role == Role::Wizard {
        wizard_spoke(tx);
    }
    tx.emit(
        actor.clone(),
        EventKind::Message {
            role,
            text,
            source: MessageSource::Free,
        },
    );
    if role == Role::User
        && tx
            .s
            .lock
            .as_ref()
            .is_some_and(|l| l.kind == LockKind::Reply)
    {
        tx.system(EventKind::LockReleased {
            how: LockRelease::Reply,
        });
    }
    Ok(())
}
