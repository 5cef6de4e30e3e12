//! The access rules of `docs/access-matrix.md`, walked cell by cell: every HTTP route and every
//! WebSocket command against every kind of caller. The tables below are the document's tables;
//! a change of rule changes both.
//!
//! Callers: `anon` (a browser without a cookie), `user` and `wizard` (the participants of this
//! session), `other` (a participant of another session), `bot` (a program without a browser, so
//! no `Origin`, holding the cookie of the human who plays next to a built-in bot), and three
//! browsers logged in to researcher accounts (no participant cookie), one per access level:
//! `observer`, `researcher` and `owner`.

use std::path::Path;

use futures_util::future::join_all;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite;
use wozkit_core::load::{StudySource, load_text};

use crate::helpers::{
    Client, TestApp, Tiny, Ws, enter, fast, login, login_as_named, paired_as, spawn_app_in,
    spawn_app_in_tuned,
};
use wozkit_server::Tunables;
use wozkit_server::auth::Access;

const CALLERS: [&str; 8] = [
    "anon",
    "user",
    "wizard",
    "other",
    "bot",
    "observer",
    "researcher",
    "owner",
];

/// Where the researcher callers start in [`CALLERS`].
const FIRST_RESEARCHER: usize = 5;

/// Where a request comes from.
#[derive(Clone, Copy, PartialEq)]
enum Site {
    /// The caller's own kind: browsers send this site's `Origin`, the bot sends none.
    Own,
    /// Every caller sends `Origin: http://evil.example`.
    Evil,
}

/// (method, path, form body, site, expected status per caller in [`CALLERS`] order).
/// `{S}` is this session's id; `{CSRF}` the CSRF token of the caller's researcher login (the
/// owner's for callers without one). `101` means the WebSocket handshake succeeds.
type Route = (&'static str, &'static str, &'static str, Site, [u16; 8]);

#[rustfmt::skip]
const ROUTES: &[Route] = &[
    ("GET",  "/",                                      "",               Site::Own,  [200, 200, 200, 200, 200, 200, 200, 200]),
    ("GET",  "/healthz",                               "",               Site::Own,  [200, 200, 200, 200, 200, 200, 200, 200]),
    ("GET",  "/join",                                  "",               Site::Own,  [303, 303, 303, 303, 303, 303, 303, 303]),
    ("GET",  "/join?study=nope",                       "",               Site::Own,  [400, 400, 400, 400, 400, 400, 400, 400]),
    ("GET",  "/join?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE", "",       Site::Own,  [200, 200, 200, 200, 200, 200, 200, 200]),
    ("GET",  "/p",                                     "",               Site::Own,  [401, 200, 200, 200, 200, 401, 401, 401]),
    ("GET",  "/p?seat=zz",                             "",               Site::Own,  [401, 401, 401, 401, 401, 401, 401, 401]),
    ("GET",  "/p?session={S}",                         "",               Site::Own,  [401, 200, 200, 200, 200, 401, 401, 401]),
    ("POST", "/p/next",                                "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/next",                                "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/survey",                              "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/survey",                              "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/answers",                             "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/answers",                             "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/onboarding",                          "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/onboarding",                          "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/judge",                               "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/judge",                               "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/skip",                                "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/skip",                                "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/chat/send",                           "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/chat/send",                           "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/chat/retry",                          "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/chat/retry",                          "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/chat/end",                            "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/chat/end",                            "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/chat/finish",                         "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/chat/finish",                         "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/desk/reply",                          "dialogue=x&turn=0&text=hi", Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/desk/reply",                          "dialogue=x&turn=0&text=hi", Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/desk/leave",                          "step=x",         Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/desk/leave",                          "step=x",         Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/self-dialog/turn",                    "lease=x",        Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/self-dialog/turn",                    "lease=x",        Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/self-dialog/submit",                  "lease=x",        Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/self-dialog/submit",                  "lease=x",        Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/spans/mark",                          "lease=x",        Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/spans/mark",                          "lease=x",        Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/spans/remove",                        "lease=x",        Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/spans/remove",                        "lease=x",        Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/spans/submit",                        "lease=x",        Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/spans/submit",                        "lease=x",        Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/p/acts/submit",                         "lease=x",        Site::Own,  [401, 303, 303, 303, 403, 401, 401, 401]),
    ("POST", "/p/acts/submit",                         "lease=x",        Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("GET",  "/p/chat/reveal?lease=x",                 "",               Site::Own,  [401, 303, 303, 303, 303, 401, 401, 401]),
    ("GET",  "/leaderboard/tiny",                      "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    ("GET",  "/leaderboard/nope/json",                 "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    ("GET",  "/ws",                                    "",               Site::Own,  [401, 101, 101, 101, 101, 401, 401, 401]),
    ("GET",  "/ws?session={S}",                        "",               Site::Own,  [401, 101, 101, 101, 101, 401, 401, 401]),
    ("GET",  "/ws",                                    "",               Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("GET",  "/assets/room.js",                        "",               Site::Own,  [200, 200, 200, 200, 200, 200, 200, 200]),
    ("GET",  "/assets/nope.js",                        "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    ("GET",  "/assets/..%2fCargo.toml",                "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    ("GET",  "/study/tiny/media/pic.gif",              "",               Site::Own,  [200, 200, 200, 200, 200, 200, 200, 200]),
    ("GET",  "/study/tiny/media/none.gif",             "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    ("GET",  "/study/tiny/media/..%2f..%2fsecret.txt", "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    ("GET",  "/study/nope/media/pic.gif",              "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    ("GET",  "/try",                                   "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/try?study=nope",                        "",               Site::Own,  [303, 303, 303, 303, 303, 404, 404, 404]),
    ("GET",  "/researcher",                            "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/researcher/session/{S}",                "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/researcher/session/none",               "",               Site::Own,  [303, 303, 303, 303, 303, 404, 404, 404]),
    ("GET",  "/researcher/login",                      "",               Site::Own,  [200, 200, 200, 200, 200, 200, 200, 200]),
    // Failed logins count per client address (all callers here are 127.0.0.1) and per name:
    // four, the bot's refusal (no Origin, not counted), the fifth, then 429.
    ("POST", "/researcher/login",                      "name=admin&password=wrong", Site::Own, [401, 401, 401, 401, 403, 401, 429, 429]),
    ("POST", "/researcher/login",                      "name=admin&password=letmein", Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("GET",  "/researcher/account",                    "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/researcher/accounts",                   "",               Site::Own,  [303, 303, 303, 303, 303, 403, 403, 200]),
    ("POST", "/researcher/account/password",           "csrf={CSRF}&old=wrong&new=password-2", Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/account/password",           "csrf=forged&old=wrong&new=password-2", Site::Own, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/account/password",           "csrf={CSRF}&old=wrong&new=password-2", Site::Own, [403, 403, 403, 403, 403, 400, 400, 400]),
    ("POST", "/researcher/account/logout-everywhere",  "csrf={CSRF}",    Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/account/logout-everywhere",  "csrf=forged",    Site::Own,  [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/accounts/add",               "csrf={CSRF}&name=added&access=observer", Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/accounts/add",               "name=added&access=observer", Site::Own, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/accounts/add",               "csrf={CSRF}&name=added&access=observer", Site::Own, [403, 403, 403, 403, 403, 403, 403, 200]),
    ("POST", "/researcher/accounts/password",          "csrf={CSRF}&name=added", Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/accounts/password",          "csrf={CSRF}&name=added", Site::Own, [403, 403, 403, 403, 403, 403, 403, 200]),
    ("POST", "/researcher/accounts/remove",            "csrf={CSRF}&name=added", Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/accounts/remove",            "csrf={CSRF}&name=added", Site::Own, [403, 403, 403, 403, 403, 403, 403, 303]),
    ("POST", "/researcher/accounts/remove",            "csrf={CSRF}&name=added", Site::Own, [403, 403, 403, 403, 403, 403, 403, 404]),
    ("GET",  "/nope",                                  "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    ("GET",  "/p/next",                                "",               Site::Own,  [405, 405, 405, 405, 405, 405, 405, 405]),
    // The console: figures and downloads (the live stream, which never ends, is in tests/api/console.rs).
    ("GET",  "/researcher/study/tiny/download/report", "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/researcher/study/tiny/download/log",    "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/researcher/study/tiny/download/nope",   "",               Site::Own,  [303, 303, 303, 303, 303, 404, 404, 404]),
    ("GET",  "/researcher/study/nope/download/report", "",               Site::Own,  [303, 303, 303, 303, 303, 404, 404, 404]),
    // Observing and taking over.
    ("GET",  "/researcher/session/{S}/observe",        "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/researcher/session/{S}/observe/user",   "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/researcher/session/none/observe",       "",               Site::Own,  [303, 303, 303, 303, 303, 404, 404, 404]),
    ("POST", "/researcher/session/{S}/take-over",      "csrf={CSRF}",    Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/session/{S}/take-over",      "csrf=forged",    Site::Own,  [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/session/none/take-over",     "csrf={CSRF}",    Site::Own,  [403, 403, 403, 403, 403, 403, 404, 404]),
    ("POST", "/researcher/study/tiny/join-as-wizard",  "csrf=forged",    Site::Own,  [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/study/nope/join-as-wizard",  "csrf={CSRF}",    Site::Own,  [403, 403, 403, 403, 403, 403, 404, 404]),
    ("GET",  "/ws?observe={S}",                        "",               Site::Own,  [401, 401, 401, 401, 403, 101, 101, 101]),
    ("GET",  "/ws?observe={S}",                        "",               Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("GET",  "/internal/relay?session={S}",            "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    // Replaying.
    ("GET",  "/researcher/session/{S}/replay",         "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/researcher/session/{S}/replay.json",    "",               Site::Own,  [401, 401, 401, 401, 401, 200, 200, 200]),
    ("GET",  "/researcher/session/none/replay",        "",               Site::Own,  [303, 303, 303, 303, 303, 404, 404, 404]),
    // Reviewing and paying.
    ("GET",  "/researcher/study/tiny/review",          "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    ("GET",  "/researcher/study/nope/review",          "",               Site::Own,  [303, 303, 303, 303, 303, 404, 404, 404]),
    ("POST", "/researcher/study/tiny/review/decide",   "csrf={CSRF}&action=note&reason=x", Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/study/tiny/review/decide",   "csrf=forged&action=note&reason=x", Site::Own, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/study/tiny/review/decide",   "csrf={CSRF}&action=note&reason=x", Site::Own, [403, 403, 403, 403, 403, 403, 400, 400]),
    ("POST", "/researcher/study/tiny/review/send",     "csrf={CSRF}",    Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/study/tiny/review/send",     "csrf=forged",    Site::Own,  [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/study/tiny/review/send",     "csrf={CSRF}",    Site::Own,  [403, 403, 403, 403, 403, 403, 303, 303]),
    // Metrics: without a token configured there is none on the main address.
    ("GET",  "/metrics",                               "",               Site::Own,  [404, 404, 404, 404, 404, 404, 404, 404]),
    ("POST", "/researcher/logout",                     "csrf={CSRF}",    Site::Evil, [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/logout",                     "",               Site::Own,  [403, 403, 403, 403, 403, 403, 403, 403]),
    ("POST", "/researcher/logout",                     "csrf=forged",    Site::Own,  [403, 403, 403, 403, 403, 403, 403, 403]),
    // Last: it ends the researcher logins.
    ("POST", "/researcher/logout",                     "csrf={CSRF}",    Site::Own,  [403, 403, 403, 403, 403, 303, 303, 303]),
];

/// The entry links once the address has used up its allowance for the minute
/// (`Tunables::join_per_minute`): refused before anything else, whoever asks; other routes
/// are not limited.
#[rustfmt::skip]
const FLOODED: &[Route] = &[
    ("GET",  "/join",                                  "",               Site::Own,  [429, 429, 429, 429, 429, 429, 429, 429]),
    ("GET",  "/join?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE", "",       Site::Own,  [429, 429, 429, 429, 429, 429, 429, 429]),
    ("GET",  "/p",                                     "",               Site::Own,  [401, 200, 200, 200, 200, 401, 401, 401]),
    // The failed logins of ROUTES are in the store: the address is still over the limit.
    ("POST", "/researcher/login",                      "name=admin&password=letmein", Site::Own, [429, 429, 429, 429, 403, 429, 429, 429]),
    // On new logins (made in the store: the address may not log in now).
    ("GET",  "/researcher/account",                    "",               Site::Own,  [303, 303, 303, 303, 303, 200, 200, 200]),
    // Last: it ends every login of each account.
    ("POST", "/researcher/account/logout-everywhere",  "csrf={CSRF}",    Site::Own,  [403, 403, 403, 403, 403, 303, 303, 303]),
    ("GET",  "/researcher/account",                    "",               Site::Own,  [303, 303, 303, 303, 303, 303, 303, 303]),
];

/// What a command gets.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    /// `ack`: the command's events are stored in this session.
    Ack,
    /// An `error` frame with this code.
    Code(&'static str),
    /// No WebSocket at all: the handshake is refused with 401.
    NoSocket,
    /// The command is judged in the caller's own session only: this session is unchanged.
    Own,
}
use Want::{Ack, Code, NoSocket, Own};

/// Every participant command (and a system command), in the state where the role that may send
/// it can, against every caller in [`CALLERS`] order.
#[rustfmt::skip]
fn commands() -> Vec<(&'static str, Value, [Want; 8])> {
    let wrong = Code("wrong_role");
    vec![
        ("say",     json!({"cmd": "say", "state": "greet"}),  [NoSocket, wrong, Ack, Own, Ack, NoSocket, NoSocket, NoSocket]),
        ("fixed",   json!({"cmd": "fixed", "id": "ok"}),      [NoSocket, wrong, Ack, Own, Ack, NoSocket, NoSocket, NoSocket]),
        ("text",    json!({"cmd": "text", "text": "hi"}),     [NoSocket, Ack, Ack, Own, Ack, NoSocket, NoSocket, NoSocket]),
        ("act",     json!({"cmd": "act", "action": "move", "robot": "r1", "target": "tower"}),
                                                             [NoSocket, wrong, Ack, Own, Ack, NoSocket, NoSocket, NoSocket]),
        ("approve", json!({"cmd": "approve"}),                [NoSocket, Ack, wrong, Own, wrong, NoSocket, NoSocket, NoSocket]),
        ("deny",    json!({"cmd": "deny"}),                   [NoSocket, Ack, wrong, Own, wrong, NoSocket, NoSocket, NoSocket]),
        ("hint",    json!({"cmd": "hint"}),                   [NoSocket, wrong, Ack, Own, Ack, NoSocket, NoSocket, NoSocket]),
        ("finish",  json!({"cmd": "finish"}),                 [NoSocket, Ack, Ack, Own, Ack, NoSocket, NoSocket, NoSocket]),
        ("tick",    json!({"cmd": "tick"}),                   [NoSocket, Code("bad_command"), Code("bad_command"),
                                                               Code("bad_command"), Code("bad_command"), NoSocket, NoSocket, NoSocket]),
    ]
}

/// The tiny study with a declared media file; on timeout a bot takes the missing role.
fn study(dir: &Path) -> wozkit_core::load::LoadedStudy {
    // The walk is long, and longer on a busy machine (over two minutes): the live session it
    // observes must not reach its time limit or a partner's grace meanwhile.
    let tiny = Tiny {
        on_timeout: "bot",
        wait_limit_s: 2,
        time_limit_s: 3600,
        grace_s: 3600,
        ..Tiny::default()
    };
    let yaml = tiny.yaml().replace(
        "actions:",
        "media:\n  pic: {file: media/pic.gif, alt: A picture}\nactions:",
    );
    std::fs::create_dir_all(dir.join("media")).expect("media dir");
    std::fs::write(dir.join("media/pic.gif"), b"GIF89a").expect("media");
    std::fs::write(dir.join("secret.txt"), b"secret").expect("secret");
    match load_text("tiny.yaml", &yaml, StudySource::Dir(dir.to_path_buf())) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

/// A human wizard whose wait ran out: a built-in bot plays the user. Returns its cookie and
/// its room socket.
async fn next_to_a_bot(app: &TestApp, tag: &str) -> (Client, Ws) {
    let wizard = app
        .join(&format!("participant={tag}&role=wizard&pair={tag}"))
        .await;
    wizard.accept_pages().await;
    let mut ws = wizard.ws().await;
    ws.hello(0).await;
    assert_eq!(ws.until_type("paired").await["partner"], "bot");
    let room = enter(&wizard, 0).await;
    (wizard, room)
}

/// Brings a fresh pair to the state where `command` may be sent by its role.
async fn setup(command: &str, wu: &mut Ws, ww: &mut Ws) {
    match command {
        "approve" | "deny" => {
            for (id, state) in [("s1", "greet"), ("s2", "ask")] {
                ww.cmd(id, json!({"cmd": "say", "state": state})).await;
                assert_eq!(ww.answer(id).await["type"], "ack");
            }
            wu.until(|v| v["type"] == "view" && v["view"]["lock"]["kind"] == "approval")
                .await;
        }
        "finish" => {
            ww.cmd("s1", json!({"cmd": "say", "state": "greet"})).await;
            assert_eq!(ww.answer("s1").await["type"], "ack");
            wu.cmd("s2", json!({"cmd": "text", "text": "hello"})).await;
            assert_eq!(wu.answer("s2").await["type"], "ack");
        }
        _ => {}
    }
}

/// The bot column's setup: only the human wizard acts.
async fn setup_bot(command: &str, ww: &mut Ws) {
    if command == "finish" {
        for (id, cmd) in [
            ("s1", json!({"cmd": "say", "state": "greet"})),
            ("s2", json!({"cmd": "fixed", "id": "ok"})),
        ] {
            ww.cmd(id, cmd).await;
            assert_eq!(ww.answer(id).await["type"], "ack");
        }
    }
}

fn got(answer: &Value) -> Want {
    if answer["type"] == "ack" {
        return Ack;
    }
    match answer["code"].as_str().unwrap_or_default() {
        "wrong_role" => Code("wrong_role"),
        "bad_command" => Code("bad_command"),
        other => panic!("unexpected answer code {other}: {answer}"),
    }
}

#[tokio::test]
async fn every_route_and_command_against_every_caller() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().join("data"), study(&tmp.path().join("study"))).await;
    let (observer_name, observer) = login_as_named(&app, Access::Observer).await;
    let (researcher_name, researcher) = login_as_named(&app, Access::Researcher).await;
    let owner = login(&app).await;

    // The bot sessions come first: their wait has to run out.
    let rows = commands();
    let tags: Vec<String> = (0..=rows.len()).map(|i| format!("bot{i}")).collect();
    let bots = join_all(tags.iter().map(|t| next_to_a_bot(&app, t))).await;
    let (user, wizard, session) = paired_as(&app, "this").await;
    let (_, other, _) = paired_as(&app, "that").await;
    let bot = bots[rows.len()].0.clone();

    // HTTP routes.
    let cookies = [
        String::new(),
        user.cookie.clone(),
        wizard.cookie.clone(),
        other.cookie.clone(),
        bot.cookie.clone(),
        observer.clone(),
        researcher.clone(),
        owner.clone(),
    ];
    walk(&app, ROUTES, &cookies, &session).await;

    // WebSocket commands: each cell in a fresh session brought to the command's state.
    let mut bots = bots.into_iter();
    for (name, cmd, want) in &rows {
        for (i, caller) in CALLERS.iter().enumerate() {
            let answer = match *caller {
                "anon" | "observer" | "researcher" | "owner" => {
                    let cookie = cookies[i].as_str();
                    assert_eq!(handshake(&app, "/ws", cookie, None).await, 401);
                    NoSocket
                }
                "user" | "wizard" => {
                    let (u, w, s) = paired_as(&app, &format!("{name}-{caller}")).await;
                    let mut ww = enter(&w, 0).await;
                    let mut wu = enter(&u, 0).await;
                    setup(name, &mut wu, &mut ww).await;
                    let ws = if *caller == "user" { &mut wu } else { &mut ww };
                    ws.cmd("cell", cmd.clone()).await;
                    let answer = got(&ws.answer("cell").await);
                    if answer == Ack {
                        let seq = ws
                            .seen
                            .iter()
                            .rev()
                            .find(|v| v["type"] == "ack")
                            .map(|v| v["seq"].clone());
                        let last = app.events(&s).await.last().map(|e| e.seq);
                        assert_eq!(
                            seq.and_then(|s| s.as_u64()),
                            last,
                            "{name} as {caller}: ack seq"
                        );
                    }
                    answer
                }
                "other" => {
                    // This session in the command's state; the other session's wizard names it.
                    let (u, w, s) = paired_as(&app, &format!("{name}-target")).await;
                    let mut ww = enter(&w, 0).await;
                    let mut wu = enter(&u, 0).await;
                    setup(name, &mut wu, &mut ww).await;
                    // Joins and reconnects of this session's own sockets may still be landing;
                    // what must not change is everything a command could cause.
                    let caused_by_commands = |events: Vec<wozkit_core::event::Event>| {
                        use wozkit_core::event::EventKind::{Disconnected, Joined, Reconnected};
                        events
                            .into_iter()
                            .filter(|e| {
                                !matches!(
                                    e.kind,
                                    Joined { .. } | Reconnected { .. } | Disconnected { .. }
                                )
                            })
                            .collect::<Vec<_>>()
                    };
                    let before = caused_by_commands(app.events(&s).await);
                    let (_, ow, os) = paired_as(&app, &format!("{name}-foreign")).await;
                    let mut ows = enter(&ow, 0).await;
                    let user_id = app
                        .store
                        .participants_in_session(&s)
                        .await
                        .expect("participants")
                        .into_iter()
                        .find(|p| p.role == Some(wozkit_core::event::Role::User))
                        .map(|p| p.id)
                        .unwrap_or_default();
                    let before_own = app.events(&os).await.len();
                    ows.send(
                        json!({"type": "cmd", "id": "cell", "session": s, "participant": user_id,
                        "cmd": cmd}),
                    )
                    .await;
                    let answer = ows.answer("cell").await;
                    assert_eq!(
                        caused_by_commands(app.events(&s).await),
                        before,
                        "{name} from another session changed this one"
                    );
                    if answer["type"] == "ack" {
                        assert!(
                            app.events(&os).await.len() > before_own,
                            "{name}: acked but not stored in its own session"
                        );
                    }
                    // Its own session judges it (any answer); only a malformed command is refused
                    // the same everywhere.
                    if matches!(want[i], Code(_)) {
                        got(&answer)
                    } else {
                        Own
                    }
                }
                _ => {
                    let (_, mut ws) = bots.next().expect("a bot session per row");
                    setup_bot(name, &mut ws).await;
                    ws.cmd("cell", cmd.clone()).await;
                    got(&ws.answer("cell").await)
                }
            };
            assert_eq!(answer, want[i], "command {name} as {caller}");
        }
    }

    // Last, the address uses up its entry links for the minute (every caller here shares
    // 127.0.0.1): a refused request counts too, so a study that does not exist is enough. The
    // server restarts on the same data with one link a minute, so the bucket cannot refill
    // while the rows are walked, however slow the machine.
    app.stop().await;
    let tuned = Tunables {
        join_per_minute: 1,
        ..fast()
    };
    let mut app = spawn_app_in_tuned(
        tmp.path().join("data"),
        study(&tmp.path().join("study")),
        tuned,
    )
    .await;
    let mut refused = false;
    for _ in 0..=1 {
        if app.http("GET", "/join?study=nope", &[], "").await.status == 429 {
            refused = true;
            break;
        }
    }
    assert!(refused, "the entry-link limit never answered 429");
    // The logins of ROUTES ended with its last row, and this address may not log in now (its
    // failed logins are in the store): new logins straight in the store.
    let mut cookies = cookies;
    for (i, name) in [observer_name.as_str(), researcher_name.as_str(), "admin"]
        .into_iter()
        .enumerate()
    {
        let account = app
            .store
            .account_by_name(name)
            .await
            .expect("read")
            .expect("account");
        let (token, hash) = wozkit_store::new_token();
        let now = wozkit_server::now_ms();
        app.store
            .create_login(wozkit_store::NewLogin {
                token_hash: hash,
                account_id: account.id,
                created_at_ms: now,
                expires_at_ms: now + 3_600_000,
            })
            .await
            .expect("login");
        cookies[FIRST_RESEARCHER + i] = format!("wozkit_researcher={token}");
    }
    walk(&app, FLOODED, &cookies, &session).await;
    app.stop().await;
}

/// Walks `rows` for every caller (`cookies` in [`CALLERS`] order) and checks each status.
async fn walk(app: &TestApp, rows: &[Route], cookies: &[String; 8], session: &str) {
    let origin = format!("http://{}", app.addr);
    // Read before the rows run: the last row of ROUTES ends the logins. Callers without a
    // researcher login send the owner's token.
    let mut csrf: Vec<String> = Vec::new();
    if rows.iter().any(|r| r.2.contains("{CSRF}")) {
        for cookie in &cookies[FIRST_RESEARCHER..] {
            csrf.push(csrf_of(app, cookie).await);
        }
    }
    let owner_csrf = csrf.last().cloned().unwrap_or_default();
    for (method, path, body, site, want) in rows {
        let path = path.replace("{S}", session);
        for (i, caller) in CALLERS.iter().enumerate() {
            let token = i
                .checked_sub(FIRST_RESEARCHER)
                .and_then(|r| csrf.get(r))
                .unwrap_or(&owner_csrf);
            let body = body.replace("{CSRF}", token);
            let body = body.as_str();
            let cookie = &cookies[i];
            let from = match (site, *caller) {
                (Site::Evil, _) => Some("http://evil.example"),
                (Site::Own, "bot") => None,
                (Site::Own, _) => Some(origin.as_str()),
            };
            let status = if path.starts_with("/ws") || path.starts_with("/internal/relay") {
                handshake(app, &path, cookie, from).await
            } else {
                let mut headers = vec![("Content-Type", "application/x-www-form-urlencoded")];
                if let Some(o) = from {
                    headers.push(("Origin", o));
                }
                if !cookie.is_empty() {
                    headers.push(("Cookie", cookie));
                }
                app.http(method, &path, &headers, body).await.status
            };
            assert_eq!(
                status,
                want[i],
                "{method} {path} ({site_name}) as {caller}",
                site_name = if *site == Site::Own {
                    "own site"
                } else {
                    "other site"
                }
            );
        }
    }
}

/// The CSRF token of a researcher login, read from the hidden field of the researcher page.
async fn csrf_of(app: &TestApp, cookie: &str) -> String {
    let res = app
        .http("GET", "/researcher", &[("Cookie", cookie)], "")
        .await;
    let marker = "name=\"csrf\" value=\"";
    let at = res.body.find(marker).unwrap_or_else(|| {
        panic!(
            "the researcher page has no CSRF field: {} {}",
            res.status, res.body
        )
    }) + marker.len();
    res.body[at..]
        .split('"')
        .next()
        .expect("CSRF value")
        .to_string()
}

/// The status of a WebSocket handshake to `path` (101 when it succeeds).
async fn handshake(app: &TestApp, path: &str, cookie: &str, origin: Option<&str>) -> u16 {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = format!("ws://{}{path}", app.addr)
        .into_client_request()
        .expect("request");
    if !cookie.is_empty() {
        req.headers_mut()
            .insert("cookie", cookie.parse().expect("cookie"));
    }
    if let Some(o) = origin {
        req.headers_mut()
            .insert("origin", o.parse().expect("origin"));
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((mut ws, _)) => {
            let _ = ws.close(None).await;
            101
        }
        Err(tungstenite::Error::Http(res)) => res.status().as_u16(),
        Err(e) => panic!("handshake to {path}: {e}"),
    }
}
