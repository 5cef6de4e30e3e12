//! Models in a room's seats. A simulated user: a language model behind an OpenAI-compatible
//! endpoint playing the user's seat (`serve --simulated-user`, `wozkit simulate-users`;
//! `docs/simulated-users.md`). A system wizard: a system under test (any kind a study declares)
//! playing the wizard's seat in a dry run (`wozkit simulate-users --system`), answering in free
//! text, as it would talk to people.
//!
//! The room never waits on a model: when its turn comes, [`ask`] (or [`ask_system`]) runs as a
//! task of its own that reads the log, asks the endpoint and sends the move back to the room's
//! inbox as [`RoomMsg::SimulatedUser`](super::RoomMsg::SimulatedUser) (or
//! [`RoomMsg::SystemWizard`](super::RoomMsg::SystemWizard)). The room then plays it through the
//! engine like any participant's command, so a move that is no longer valid is refused there.

use std::sync::Arc;

use tokio::sync::mpsc;
use wozkit_core::event::{self, Role};
use wozkit_core::simulated_users::{SimulatedUser, UserMove};
use wozkit_store::EventStore;
use wozkit_systems::Turn;
use wozkit_systems::client::Client;
use wozkit_systems::judge::JudgeEndpoint;

use super::RoomMsg;

/// A simulated user and the endpoint it is asked through.
pub struct ModelUser {
    pub spec: SimulatedUser,
    pub endpoint: JudgeEndpoint,
}

impl std::fmt::Debug for ModelUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelUser")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

/// What the simulated user's turn came to: its move, or why there is none.
pub type Outcome = Result<UserMove, String>;

/// Asks the simulated user for its next move in session `session`, whose goal reads `goal`, and
/// sends it to the room. Nothing is sent when the room is gone.
pub async fn ask(
    user: Arc<ModelUser>,
    store: Arc<dyn EventStore>,
    session: String,
    goal: String,
    room: mpsc::WeakSender<RoomMsg>,
) {
    let outcome = next_move(&user, store.as_ref(), &session, &goal).await;
    if let Some(room) = room.upgrade() {
        let _ = room.send(RoomMsg::SimulatedUser { outcome }).await;
    }
}

async fn next_move(user: &ModelUser, store: &dyn EventStore, session: &str, goal: &str) -> Outcome {
    let events = store
        .events(session, 0)
        .await
        .map_err(|e| format!("cannot read the session's log: {e}"))?;
    let dialogue: Vec<(Role, String)> = event::messages(&events)
        .map(|(role, text)| (role, text.to_string()))
        .collect();
    let said = dialogue.iter().filter(|(r, _)| *r == Role::User).count();
    let turn = u32::try_from(said).unwrap_or(u32::MAX).saturating_add(1);
    if turn > user.spec.max_turns {
        return Ok(UserMove {
            text: None,
            finish: true,
        });
    }
    let prompt = user.spec.prompt(goal, &dialogue, turn);
    let reply = user
        .endpoint
        .ask(&prompt)
        .await
        .map_err(|e| e.to_string())?;
    let mut next = user
        .spec
        .read_reply(&reply.text, turn)
        .map_err(|e| format!("simulated user `{}`: {e}", user.spec.name))?;
    next.text = next.text.map(|t| fit(t, &user.spec.actor_name(), session));
    Ok(next)
}

/// A model's message cut to the most characters a message may have (the engine refuses a longer
/// one, which would leave the dialogue waiting for a move that never comes), with `…` at the
/// cut and a warning that names `who`.
fn fit(text: String, who: &str, session: &str) -> String {
    let max = wozkit_core::engine::MAX_TEXT_CHARS;
    let len = text.chars().count();
    if len <= max {
        return text;
    }
    tracing::warn!(
        session,
        "{who} wrote {len} characters; the message is cut to the {max} a message may have"
    );
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// A system under test in the wizard's seat.
pub struct SystemWizard {
    /// The system's name (the wizard bot's name in the log is `system:NAME`).
    pub name: String,
    pub client: Client,
}

impl SystemWizard {
    /// The wizard bot's name in the log.
    pub fn actor_name(&self) -> String {
        format!("system:{}", self.name)
    }
}

impl std::fmt::Debug for SystemWizard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemWizard")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What the system wizard's turn came to: its reply, or why there is none.
pub type WizardOutcome = Result<String, String>;

/// Asks the system wizard for its reply to the dialogue of `session` so far and sends it to
/// the room. Nothing is sent when the room is gone.
pub async fn ask_system(
    wizard: Arc<SystemWizard>,
    store: Arc<dyn EventStore>,
    session: String,
    room: mpsc::WeakSender<RoomMsg>,
) {
    let who = wizard.actor_name();
    let outcome = system_reply(&wizard.client, &who, store.as_ref(), &session).await;
    if let Some(room) = room.upgrade() {
        let _ = room.send(RoomMsg::SystemWizard { outcome }).await;
    }
}

/// Asks the copilot's system (`client`) for the wizard's next message in `session`, asked when
/// the session had `asked_at` messages, and sends it to the room as a suggestion. Nothing is
/// sent when the room is gone.
pub async fn ask_copilot(
    client: Arc<Client>,
    store: Arc<dyn EventStore>,
    session: String,
    asked_at: u32,
    room: mpsc::WeakSender<RoomMsg>,
) {
    let who = format!("copilot:{}", client.name());
    let outcome = system_reply(&client, &who, store.as_ref(), &session).await;
    if let Some(room) = room.upgrade() {
        let _ = room.send(RoomMsg::Copilot { outcome, asked_at }).await;
    }
}

/// The reply of a system (`who` in warnings) to the dialogue of `session` so far: the user's
/// messages as the user's turns, the wizard's as the system's own.
async fn system_reply(
    client: &Client,
    who: &str,
    store: &dyn EventStore,
    session: &str,
) -> WizardOutcome {
    let events = store
        .events(session, 0)
        .await
        .map_err(|e| format!("cannot read the session's log: {e}"))?;
    let history: Vec<Turn> = event::messages(&events)
        .map(|(role, text)| match role {
            Role::User => Turn::user(text),
            Role::Wizard => Turn::assistant(text),
        })
        .collect();
    match client.reply(session, &history).await {
        Ok(reply) if reply.text.trim().is_empty() => Err(format!("{who} answered with nothing")),
        Ok(reply) => Ok(fit(reply.text, who, session)),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_message_is_cut_to_what_the_engine_takes() {
        let max = wozkit_core::engine::MAX_TEXT_CHARS;
        let short = "ok".to_string();
        assert_eq!(fit(short.clone(), "system:x", "s"), short);
        let exact = "é".repeat(max);
        assert_eq!(fit(exact.clone(), "system:x", "s"), exact);
        let long = "é".repeat(max + 5);
        let cut = fit(long, "system:x", "s");
        assert_eq!(cut.chars().count(), max);
        assert!(cut.ends_with('…'));
    }
}
