//! The dialogue engine's commands, one file each (as mini-redis keeps `src/cmd/`): each checks
//! its command against the session's state and the actor's role, then emits its events into the
//! transaction or refuses it. `command::decide` dispatches to them.

pub(super) mod act;
pub(super) mod copilot;
pub(super) mod database;
pub(super) mod finish;
pub(super) mod fixed;
pub(super) mod hint;
pub(super) mod lock;
pub(super) mod presence;
pub(super) mod say;
pub(super) mod start;
pub(super) mod text;
pub(super) mod tick;
