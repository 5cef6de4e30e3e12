//! `suggest` and `send_suggestion`: the wizard's copilot (`docs/copilot.md`).

use crate::engine::Tx;
use crate::engine::command::{Refusal, need_role};
use crate::event::{Actor, EventKind, Role};

/// The copilot's suggestion: logged for the wizard, numbered after the last one. An empty one
/// is refused (there is nothing to show).
pub(in crate::engine) fn suggest(
    tx: &mut Tx<'_>,
    system: String,
    text: String,
) -> Result<(), Refusal> {
    if tx.study.study.copilot.is_none() {
        return Err(Refusal::NoCopilot);
    }
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(Refusal::EmptyText);
    }
    let n = tx.s.suggested + 1;
    tx.system(EventKind::Suggested { n, system, text });
    Ok(())
}

/// The wizard's free text sent from suggestion `n`: the message as any free text (the same
/// checks), then what it came from and how far it was edited.
pub(in crate::engine) fn send(
    tx: &mut Tx<'_>,
    actor: &Actor,
    n: u32,
    text: String,
) -> Result<(), Refusal> {
    need_role(actor, Role::Wizard)?;
    let Some(suggested) =
        tx.s.suggestions
            .iter()
            .find(|(m, _)| *m == n)
            .map(|(_, t)| t.clone())
    else {
        return Err(Refusal::SuggestionClosed { n });
    };
    let edits = crate::copilot::edits(&suggested, &text);
    super::text::text(tx, actor, text)?;
    tx.emit(actor.clone(), EventKind::SuggestionUsed { n, edits });
    Ok(())
}
