//! A simulated user in a room: a language model behind an OpenAI-compatible endpoint playing the
//! user's seat (`serve --simulated-user`, `wozkit simulate-users`; `docs/simulated-users.md`).
//!
//! The room never waits on the model: when the user's turn comes, [`ask`] runs as a task of its
//! own that reads the log, asks the endpoint and sends the move back to the room's inbox as
//! [`RoomMsg::SimulatedUser`](super::RoomMsg::SimulatedUser). The room then plays it through the
//! engine like any participant's command, so a move that is no longer valid is refused there.

use std::sync::Arc;

use tokio::sync::mpsc;
use wozkit_core::event::{self, Role};
use wozkit_core::simulated_users::{SimulatedUser, UserMove};
use wozkit_store::Store;
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
    store: Arc<dyn Store>,
    session: String,
    goal: String,
    room: mpsc::WeakSender<RoomMsg>,
) {
    let outcome = next_move(&user, store.as_ref(), &session, &goal).await;
    if let Some(room) = room.upgrade() {
        let _ = room.send(RoomMsg::SimulatedUser { outcome }).await;
    }
}

async fn next_move(user: &ModelUser, store: &dyn Store, session: &str, goal: &str) -> Outcome {
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
    user.spec
        .read_reply(&reply.text, turn)
        .map_err(|e| format!("simulated user `{}`: {e}", user.spec.name))
}
