//! The WebSocket frames (see docs/protocol.md): what a client may send, what the server sends,
//! and the error codes. Parsing never fails loudly: every bad frame becomes an error frame.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wozkit_core::engine::{Command, Refusal};
use wozkit_core::event::Role;

/// Largest text frame accepted, in bytes.
pub const MAX_FRAME_BYTES: usize = 16 * 1024;
/// Longest command id echoed back.
const MAX_ID_CHARS: usize = 64;

/// A frame from a client.
#[derive(Debug, PartialEq)]
pub enum ClientFrame {
    Hello { last_seq: u64 },
    Cmd { id: String, cmd: Command },
    Typing,
    Ping,
}

/// The intents a participant may send: the engine's commands minus the system ones (start,
/// join, disconnect, tick…), which only the server issues.
#[derive(Debug, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
enum ParticipantCommand {
    Say {
        state: String,
    },
    Fixed {
        id: String,
    },
    Text {
        text: String,
        /// The copilot's suggestion the text was made from (`docs/copilot.md`).
        #[serde(default)]
        suggestion: Option<u32>,
    },
    Act {
        action: String,
        robot: String,
        #[serde(default)]
        target: Option<String>,
    },
    Approve,
    Deny,
    Hint,
    Finish,
    Query {
        table: String,
        #[serde(default)]
        filters: Vec<wozkit_core::database::Filter>,
    },
    Select {
        table: String,
        key: String,
    },
}

impl From<ParticipantCommand> for Command {
    fn from(c: ParticipantCommand) -> Command {
        match c {
            ParticipantCommand::Say { state } => Command::Say { state },
            ParticipantCommand::Fixed { id } => Command::Fixed { id },
            ParticipantCommand::Text {
                text,
                suggestion: None,
            } => Command::Text { text },
            ParticipantCommand::Text {
                text,
                suggestion: Some(n),
            } => Command::SendSuggestion { n, text },
            ParticipantCommand::Act {
                action,
                robot,
                target,
            } => Command::Act {
                action,
                robot,
                target,
            },
            ParticipantCommand::Approve => Command::Approve,
            ParticipantCommand::Deny => Command::Deny,
            ParticipantCommand::Hint => Command::Hint,
            ParticipantCommand::Finish => Command::Finish,
            ParticipantCommand::Query { table, filters } => Command::Query { table, filters },
            ParticipantCommand::Select { table, key } => Command::Select { table, key },
        }
    }
}

/// A frame the server could not accept, as the error frame to send back.
#[derive(Debug, PartialEq)]
pub struct FrameError {
    pub id: Option<String>,
    pub code: &'static str,
    pub message: String,
}

impl FrameError {
    fn new(id: Option<String>, code: &'static str, message: impl Into<String>) -> FrameError {
        FrameError {
            id,
            code,
            message: message.into(),
        }
    }
}

/// Parses one text frame.
pub fn parse(text: &str) -> Result<ClientFrame, FrameError> {
    if text.len() > MAX_FRAME_BYTES {
        return Err(FrameError::new(
            None,
            "too_large",
            format!("frames are limited to {MAX_FRAME_BYTES} bytes"),
        ));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| FrameError::new(None, "bad_json", format!("not JSON: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(FrameError::new(
            None,
            "bad_json",
            "a frame is a JSON object with a `type`",
        ));
    };
    let id = obj
        .get("id")
        .and_then(Value::as_str)
        .map(|s| s.chars().take(MAX_ID_CHARS).collect::<String>());
    match obj.get("type").and_then(Value::as_str) {
        Some("hello") => {
            let last_seq = match obj.get("last_seq") {
                None | Some(Value::Null) => 0,
                Some(v) => v.as_u64().ok_or_else(|| {
                    FrameError::new(None, "bad_json", "`last_seq` must be a whole number ≥ 0")
                })?,
            };
            Ok(ClientFrame::Hello { last_seq })
        }
        Some("cmd") => {
            let id = id.ok_or_else(|| {
                FrameError::new(None, "bad_json", "a `cmd` frame needs a string `id`")
            })?;
            let raw = obj.get("cmd").cloned().ok_or_else(|| {
                FrameError::new(
                    Some(id.clone()),
                    "bad_command",
                    "a `cmd` frame needs a `cmd` object",
                )
            })?;
            let cmd: ParticipantCommand = serde_json::from_value(raw).map_err(|e| {
                FrameError::new(
                    Some(id.clone()),
                    "bad_command",
                    format!("{e} (commands: say, fixed, text, act, approve, deny, hint, finish)"),
                )
            })?;
            Ok(ClientFrame::Cmd {
                id,
                cmd: cmd.into(),
            })
        }
        Some("typing") => Ok(ClientFrame::Typing),
        Some("ping") => Ok(ClientFrame::Ping),
        Some(other) => Err(FrameError::new(
            id,
            "unknown_type",
            format!(
                "unknown frame type `{}` (hello, cmd, typing, ping)",
                other.chars().take(40).collect::<String>()
            ),
        )),
        None => Err(FrameError::new(
            id,
            "bad_json",
            "a frame needs a string `type`",
        )),
    }
}

/// A frame to a client. Serialised once per role and shared by that role's connections.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame<'a> {
    Welcome {
        role: Role,
        session: &'a str,
        participant: &'a str,
        study: Value,
    },
    Waiting {
        position: usize,
        waited_s: u64,
        limit_s: u32,
    },
    Paired {
        session: &'a str,
        role: Role,
        partner: &'static str,
        next: &'a str,
    },
    /// The lobby moved the waiter to the other role: read its instructions at `next`, then
    /// wait again.
    Reassigned {
        role: Role,
        message: &'a str,
        next: &'a str,
    },
    Event {
        event: &'a wozkit_core::event::Event,
    },
    View {
        view: &'a crate::room::view::View<'a>,
    },
    Ack {
        id: &'a str,
        seq: u64,
    },
    Error {
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a str>,
        code: &'static str,
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<Value>,
    },
    Partner {
        status: &'static str,
    },
    Ended {
        reason: &'a str,
        next: &'a str,
    },
    Pong,
}

impl ServerFrame<'_> {
    /// The JSON text of the frame.
    pub fn text(&self) -> String {
        // Serialising these plain structures cannot fail; an empty object keeps the client alive
        // if it ever did.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

/// The error code of an engine refusal.
pub fn refusal_code(r: &Refusal) -> &'static str {
    match r {
        Refusal::WrongRole { .. } => "wrong_role",
        Refusal::NotOffered { .. } => "not_offered",
        Refusal::Ended => "ended",
        _ => "refused",
    }
}

/// An error frame for a refusal: the engine's message plus the refusal itself as `detail`.
pub fn refusal_frame(id: &str, r: &Refusal) -> String {
    ServerFrame::Error {
        id: Some(id),
        code: refusal_code(r),
        message: &r.to_string(),
        detail: serde_json::to_value(r).ok(),
    }
    .text()
}

/// An error frame with no detail.
pub fn error_frame(id: Option<&str>, code: &'static str, message: &str) -> String {
    ServerFrame::Error {
        id,
        code,
        message,
        detail: None,
    }
    .text()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_client_frames() {
        assert_eq!(
            parse(r#"{"type":"hello","last_seq":4}"#),
            Ok(ClientFrame::Hello { last_seq: 4 })
        );
        assert_eq!(parse(r#"{"type":"ping"}"#), Ok(ClientFrame::Ping));
        assert_eq!(
            parse(r#"{"type":"cmd","id":"c1","cmd":{"cmd":"say","state":"greet"}}"#),
            Ok(ClientFrame::Cmd {
                id: "c1".into(),
                cmd: Command::Say {
                    state: "greet".into()
                }
            })
        );
    }

    #[test]
    fn bad_frames_get_codes() {
        let code = |t: &str| parse(t).err().map(|e| e.code);
        assert_eq!(code("{not json"), Some("bad_json"));
        assert_eq!(code("[1,2]"), Some("bad_json"));
        assert_eq!(code(r#"{"type":"dance"}"#), Some("unknown_type"));
        assert_eq!(
            code(r#"{"type":"cmd","id":"x","cmd":{"cmd":"tick"}}"#),
            Some("bad_command")
        );
        assert_eq!(
            code(r#"{"type":"cmd","id":"x","cmd":{"cmd":"join","role":"wizard"}}"#),
            Some("bad_command")
        );
        assert_eq!(code(r#"{"type":"hello","last_seq":-1}"#), Some("bad_json"));
        assert_eq!(code(&"x".repeat(MAX_FRAME_BYTES + 1)), Some("too_large"));
    }
}
