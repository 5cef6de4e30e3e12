//! The WebSocket frames of docs/protocol.md as the load generator reads them: only the fields it
//! uses, so a frame is skimmed rather than fully parsed (a wizard's `view` is several KiB and
//! arrives after every batch of events; it is parsed only when the wizard decides a move).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::policy::{Role, ViewHead};

/// The `type` of a server frame. The server writes it first, so it is read without parsing
/// the frame; any other layout falls back to a parse.
pub fn frame_type(text: &str) -> Option<String> {
    if let Some(rest) = text.strip_prefix("{\"type\":\"")
        && let Some(end) = rest.find('"')
    {
        return Some(rest[..end].to_string());
    }
    #[derive(Deserialize)]
    struct TypeOnly {
        #[serde(rename = "type")]
        kind: String,
    }
    serde_json::from_str::<TypeOnly>(text).ok().map(|t| t.kind)
}

#[derive(Debug, Deserialize)]
pub struct EventFrame {
    pub event: EventHead,
}

#[derive(Debug, Deserialize)]
pub struct EventHead {
    pub seq: u64,
    pub actor: ActorHead,
}

#[derive(Debug, Deserialize)]
pub struct ActorHead {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub role: Option<Role>,
}

impl ActorHead {
    /// The participant role that caused the event (not bots, not the system).
    pub fn participant_role(&self) -> Option<Role> {
        self.role.filter(|_| self.kind == "participant")
    }
}

#[derive(Debug, Deserialize)]
pub struct ViewFrame {
    pub view: ViewHead,
}

#[derive(Debug, Deserialize)]
pub struct AckFrame {
    pub id: String,
    pub seq: u64,
}

#[derive(Debug, Deserialize)]
pub struct ErrorFrame {
    #[serde(default)]
    pub id: Option<String>,
    pub code: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Deserialize)]
pub struct EndedFrame {
    pub reason: String,
}

#[derive(Debug, Deserialize)]
pub struct SessionFrame {
    pub session: String,
}

/// The first frame of every connection.
pub fn hello() -> String {
    json!({ "type": "hello", "last_seq": 0 }).to_string()
}

/// A command frame.
pub fn command(id: &str, cmd: Value) -> String {
    json!({ "type": "cmd", "id": id, "cmd": cmd }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_type_is_read_first_or_parsed() {
        assert_eq!(
            frame_type(r#"{"type":"view","view":{}}"#).as_deref(),
            Some("view")
        );
        assert_eq!(
            frame_type(r#"{"seq":1, "type":"ack","id":"c1"}"#).as_deref(),
            Some("ack")
        );
        assert_eq!(frame_type("not json"), None);
    }

    #[test]
    fn events_name_their_actor() {
        let text = r#"{"type":"event","event":{"v":1,"session":"s","seq":7,"at_ms":1,
            "actor":{"type":"participant","role":"user","participant":"p"},
            "kind":"message","role":"user","text":"hi","source":"free"}}"#;
        let e: EventFrame = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.event.seq, 7);
        assert_eq!(e.event.actor.participant_role(), Some(Role::User));
        let sys = r#"{"event":{"seq":2,"actor":{"type":"system"}}}"#;
        let e: EventFrame = serde_json::from_str(sys).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.event.actor.participant_role(), None);
    }

    #[test]
    fn commands_are_framed() {
        let f = command("c3", json!({"cmd":"text","text":"hi"}));
        let v: Value = serde_json::from_str(&f).unwrap_or_default();
        assert_eq!(v["type"], "cmd");
        assert_eq!(v["id"], "c3");
        assert_eq!(v["cmd"]["text"], "hi");
    }
}
