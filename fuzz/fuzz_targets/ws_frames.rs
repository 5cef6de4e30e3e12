//! The WebSocket frame decoder gets arbitrary text frames (one per line, the first byte picks
//! who sends each): every frame is accepted or answered with a known error code, never a panic;
//! an accepted command is never a system command, its id stays within the limit and it survives
//! a round trip through JSON. Accepted commands are then played through the engine on the
//! built-in offshore study as the room would, and replaying the events gives the live state.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use wozkit_core::engine::{Command, Session, replay, step};
use wozkit_core::event::{Actor, EVENT_SCHEMA_VERSION, Event, Role};
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_server::frames::{self, ClientFrame, MAX_FRAME_BYTES};

/// Every code the decoder may answer with (docs/protocol.md, "Errors and limits").
const CODES: &[&str] = &["bad_json", "unknown_type", "bad_command", "too_large"];

fn study() -> &'static LoadedStudy {
    static STUDY: OnceLock<LoadedStudy> = OnceLock::new();
    STUDY.get_or_init(|| load_builtin("offshore-emergency").expect("built-in study loads"))
}

/// A started session with both roles in the room, and its log.
fn started(study: &LoadedStudy, rng: &mut ChaCha8Rng) -> (Session, Vec<Event>) {
    let mut s = Session::new(study, "fuzz");
    let mut log = vec![];
    let cmds = [
        Command::Start { seed: 7 },
        Command::Join {
            role: Role::User,
            bot: false,
        },
        Command::Join {
            role: Role::Wizard,
            bot: false,
        },
    ];
    for c in cmds {
        let st = step(study, &s, &Actor::System, c, 0, rng).expect("session starts");
        s = st.session;
        record(&mut log, st.events, 0);
    }
    (s, log)
}

fn record(log: &mut Vec<Event>, events: Vec<(Actor, wozkit_core::event::EventKind)>, at_ms: u64) {
    for (actor, kind) in events {
        log.push(Event {
            v: EVENT_SCHEMA_VERSION,
            session: "fuzz".into(),
            seq: log.len() as u64 + 1,
            at_ms,
            actor,
            kind,
        });
    }
}

/// Checks what the decoder said about one frame.
fn check(text: &str, parsed: &Result<ClientFrame, frames::FrameError>) {
    match parsed {
        Err(e) => {
            assert!(CODES.contains(&e.code), "unknown error code {}", e.code);
            assert_eq!(e.code == "too_large", text.len() > MAX_FRAME_BYTES);
            if let Some(id) = &e.id {
                assert!(id.chars().count() <= 64, "error id too long");
            }
            let frame: Value =
                serde_json::from_str(&frames::error_frame(e.id.as_deref(), e.code, &e.message))
                    .expect("error frames are JSON");
            assert_eq!(frame["type"], "error");
        }
        Ok(ClientFrame::Cmd { id, cmd }) => {
            assert!(id.chars().count() <= 64, "command id too long");
            assert!(
                !matches!(
                    cmd,
                    Command::Start { .. }
                        | Command::Join { .. }
                        | Command::Disconnect { .. }
                        | Command::Reconnect { .. }
                        | Command::Tick
                        | Command::Abort { .. }
                ),
                "a system command got through: {cmd:?}"
            );
            let again = json!({"type": "cmd", "id": id, "cmd": cmd}).to_string();
            if again.len() <= MAX_FRAME_BYTES {
                let expected = ClientFrame::Cmd {
                    id: id.clone(),
                    cmd: cmd.clone(),
                };
                assert_eq!(frames::parse(&again), Ok(expected), "round trip changed it");
            }
        }
        Ok(_) => assert!(text.len() <= MAX_FRAME_BYTES),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&who, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let study = study();
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(who));
    let (mut session, mut log) = started(study, &mut rng);
    let mut now = 0u64;
    for (i, frame) in text.split('\n').enumerate().take(64) {
        let parsed = frames::parse(frame);
        check(frame, &parsed);
        let Ok(ClientFrame::Cmd { id, cmd }) = parsed else {
            continue;
        };
        let role = if (who >> (i % 8)) & 1 == 0 {
            Role::User
        } else {
            Role::Wizard
        };
        let actor = Actor::Participant {
            role,
            participant: Some(format!("p-{role:?}")),
        };
        now += 700;
        for (actor, cmd) in [(actor, cmd), (Actor::System, Command::Tick)] {
            match step(study, &session, &actor, cmd, now, &mut rng) {
                Ok(st) => {
                    session = st.session;
                    record(&mut log, st.events, now);
                }
                Err(r) => {
                    let frame: Value = serde_json::from_str(&frames::refusal_frame(&id, &r))
                        .expect("refusal frames are JSON");
                    assert_eq!(frame["id"].as_str(), Some(id.as_str()));
                }
            }
        }
    }
    assert_eq!(
        replay(study, "fuzz", &log),
        session,
        "replay differs from live"
    );
});
