//! End to end: a `human` system in real headless Chromium — a wizard at the desk (`desk.js`)
//! answers the human side of an arena battle played by a participant in another browser.
//!
//! - The wizard enters by a lab link with `role=wizard` and sees the empty desk. The participant
//!   enters the arena of a builtin bot against the person at the desk and sends a message. While
//!   the human side is "typing…" on the participant's page (the bot's reply already shown), the
//!   desk page reloads itself (through `desk.js`, not the test) and shows the message and a
//!   reply box naming the system. The wizard types a reply and sends it; the participant's page
//!   shows it on the human side and the bot's reply on the other.
//! - The second turn goes to the same wizard, whose desk shows the whole history. The wizard
//!   types the first part of the reply; then another participant (plain HTTP) sends a message
//!   that reaches this desk too. `desk.js` sees the desk change in two polls in a row and still
//!   does not reload the page: the half-written reply and the page's own state are still there.
//!   The wizard finishes and sends; the desk then shows the other conversation, answered too.
//! - The participant ends the chat, votes for the human side and is shown the systems' names.
//!   The `Judged` event, the two sessions' messages and the `human_reply` annotations (naming
//!   the wizard, before each reply) must match what both browsers showed.
//!
//! Needs both browsers and their drivers (see `main.rs`); fails when one is missing unless
//! `WOZKIT_SKIP_E2E=1`. With `WOZKIT_UPDATE_SCREENSHOTS=1` (or when the file is missing) it
//! writes `docs/screenshots/desk.png`: the desk with a turn waiting and a reply being written.

use crate::browser;
use crate::client;
use crate::server;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::{Value, json};
use wozkit_core::event::{Event, EventKind, Judgment, Role};
use wozkit_core::load::{StudySource, load_text};
use wozkit_store::Platform;

use browser::{Browser, Driver, WAIT, close_all, shoot_settled, until};
use server::TestServer;

/// The whole test must end within this time, whatever happens.
const LIMIT: Duration = Duration::from_secs(150);

const STUDY_ID: &str = "people";
const STUDY: &str = r#"id: people
title: People and models
flow:
  user:
    - {kind: arena}
    - {kind: completion}
  wizard:
    - {kind: desk, title: Answer as the assistant}
    - {kind: completion}
systems:
  bot:
    kind: builtin
    fallback: ["I am the scripted bot.", "Still the scripted bot here."]
  person:
    kind: human
evaluation:
  task: arena
  judgments_per_item: 3
  items_per_worker: 1
  conversation: {min_turns: 2, max_turns: 3, reveal: true}
  justification: {required: false}
  no_items: {text: "No battles are left.", code: true}
"#;

/// The human system's name in the study.
const HUMAN: &str = "person";
/// The builtin system's name in the study.
const BOT: &str = "bot";
/// The wizard's and the participants' lab names.
const WIZARD: &str = "desk-1";
const USER: &str = "user-1";
const OTHER: &str = "user-2";

/// The participant's two messages.
const MESSAGES: [&str; 2] = ["which city for jazz?", "and where should I stay there?"];
/// The wizard's reply to the first message.
const REPLY_1: &str = "New Orleans, without a doubt.";
/// The wizard's reply to the second message, typed in two parts with a pause between.
const REPLY_2: [&str; 2] = [
    "Stay in the French Quarter.",
    " The clubs on Frenchmen Street are a short walk away.",
];
/// The other participant's message, which reaches the desk while the wizard writes.
const OTHER_MESSAGE: &str = "hello from the other battle";
/// The wizard's reply to it.
const OTHER_REPLY: &str = "Hello! How can I help?";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wizard_at_the_desk_answers_an_arena_battle_in_the_browser() {
    browser::run_in_both_browsers(
        "end-to-end desk test",
        LIMIT,
        |chromium, chromedriver| async move { run(&chromium, &chromedriver).await },
    )
    .await;
}

/// Starts everything, plays, and always closes the browsers and the server before reporting.
async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let study = load_text("study.yaml", STUDY, StudySource::Dir(".".into()))
        .map_err(|e| anyhow!("the desk study does not load:\n{e}"))?;
    let mut server = TestServer::start(study).await?;
    let driver = Driver::start(chromium, chromedriver).await?;
    let w = driver.browser("the wizard's browser").await?;
    let u = driver.browser("the participant's browser").await?;
    let played = play(&server, &w, &u).await;
    let closed = close_all([w, u]).await;
    drop(driver);
    let stopped = server.stop().await;
    played?;
    closed?;
    stopped
}

async fn play(server: &TestServer, w: &Browser, u: &Browser) -> Result<()> {
    let battle = battle(server, w, u).await?;
    check(server, &battle).await
}

/// What the two browsers showed of the battle.
#[derive(Debug, Default)]
struct Battle {
    /// The side (`left` or `right`) the human system plays.
    human_side: String,
    /// The sessions of the human side and of the bot's side.
    human: String,
    bot: String,
    /// The replies the participant's page showed per turn: (human side, bot side).
    shown: Vec<(String, String)>,
    /// The systems the reveal page named, left then right.
    revealed: [String; 2],
    /// The other participant's session with the human system.
    other_human: String,
}

/// One look at the participant's page: the replies per side (left, right), whether the human
/// side says it is typing, whether the page is still the one the message was sent from, and
/// whether a reply is pending.
#[derive(Debug, serde::Deserialize)]
struct Look {
    replies: [Vec<String>; 2],
    typing: [bool; 2],
    same_page: bool,
    pending: bool,
}

const LOOK: &str = "const side = (n) => [...document.querySelectorAll(\
       `section[data-testid=side-${n}] ol[data-testid=log-${n}] li.said.system .text`)]\
       .map((e) => e.textContent);\
     const typing = (n) => { const t = document.querySelector(`[data-testid=typing-${n}]`);\
       return !!t && !t.hidden; };\
     const m = document.querySelector('main.chat');\
     return { replies: [side('left'), side('right')], typing: [typing('left'), typing('right')],\
       same_page: document.querySelector('main')?.__sent === true,\
       pending: !m || m.dataset.pending !== 'false' }";

async fn look(br: &Browser) -> Result<Look> {
    // The page is drawn again after the replies.
    let v = br.js_settled(LOOK, vec![]).await?;
    serde_json::from_value(v).with_context(|| format!("{}: reading the two sides", br.name))
}

/// Index of a side in `[left, right]`.
fn index_of(side: &str) -> usize {
    usize::from(side == "right")
}

/// One conversation as the desk page shows it.
#[derive(Debug, serde::Deserialize)]
struct DeskView {
    /// `data-waiting`: the reply's message index, empty when nothing waits.
    waiting: String,
    /// (`user` or `system`, text) per line of the history.
    lines: Vec<(String, String)>,
    /// Whether the reply form (with its text box) is there.
    reply_box: bool,
    /// The system the reply box names.
    system: String,
    /// What the reply box holds now.
    draft: String,
}

/// The desk's conversation `dialogue`, or null; `reloaded` says whether the page was drawn
/// again since the test marked it.
const DESK: &str = "const s = document.querySelector(\
       `section[data-testid=desk-conversation][data-dialogue='${arguments[0]}']`);\
     const reloaded = window.__mark !== true;\
     if (!s) return { reloaded, view: null };\
     const form = s.querySelector('form[data-testid=desk-reply]');\
     const area = form && form.querySelector('textarea[name=text]');\
     return { reloaded, view: {\
       waiting: s.dataset.waiting,\
       lines: [...s.querySelectorAll('ol.chat-log li.said')].map((li) =>\
         [li.classList.contains('user') ? 'user' : 'system', li.querySelector('.text').textContent]),\
       reply_box: !!area,\
       system: form ? (form.querySelector('label strong') || {}).textContent || '' : '',\
       draft: area ? area.value : '' } }";

#[derive(Debug, serde::Deserialize)]
struct DeskLook {
    reloaded: bool,
    view: Option<DeskView>,
}

async fn desk_look(w: &Browser, dialogue: &str) -> Result<DeskLook> {
    // The desk reloads when a turn arrives.
    let v = w.js_settled(DESK, vec![json!(dialogue)]).await?;
    serde_json::from_value(v).with_context(|| format!("{}: reading the desk", w.name))
}

/// Marks the wizard's page: the mark is gone once the page is drawn again.
async fn mark(w: &Browser) -> Result<()> {
    w.js("window.__mark = true", vec![]).await.map(drop)
}

/// Waits until the desk page, drawn again by `desk.js` since it was marked, shows a turn of
/// `dialogue` waiting for the reply with message index `turn`.
async fn wait_for_turn(w: &Browser, dialogue: &str, turn: usize) -> Result<DeskView> {
    let r = until(
        &format!("desk.js to show turn {turn} of {dialogue} at the desk"),
        WAIT,
        || async {
            let l = desk_look(w, dialogue).await?;
            Ok(match l.view {
                Some(v) if l.reloaded && v.waiting == turn.to_string() => Some(v),
                _ => None,
            })
        },
    )
    .await;
    match r {
        Ok(v) => Ok(v),
        Err(e) => {
            let now = desk_look(w, dialogue).await.ok();
            Err(e.context(format!("{}: the desk shows {now:?}", w.name)))
        }
    }
}

/// Clicks the Send button of the reply box of `dialogue` at the desk.
async fn send_reply(w: &Browser, dialogue: &str) -> Result<()> {
    let clicked = w
        .js(
            "const b = document.querySelector(\
               `section[data-dialogue='${arguments[0]}'] form[data-testid=desk-reply] button[type=submit]`);\
             if (!b) return false; b.click(); return true",
            vec![json!(dialogue)],
        )
        .await?;
    ensure!(
        clicked == json!(true),
        "{}: no Send button in the reply box of {dialogue}",
        w.name
    );
    Ok(())
}

/// The reply box's text area of `dialogue` at the desk, as a CSS selector.
fn reply_area(dialogue: &str) -> String {
    format!("section[data-dialogue='{dialogue}'] form[data-testid=desk-reply] textarea[name=text]")
}

/// The participant's page after the message of turn `n` (0-based) was sent: waits until the
/// page is drawn again with both replies; returns them as (human side, bot side).
async fn wait_for_replies(u: &Browser, human: usize, n: usize) -> Result<(String, String)> {
    let r = until(
        &format!("both replies to message {}", n + 1),
        WAIT,
        || async {
            let l = look(u).await?;
            Ok(
                (!l.same_page && !l.pending && l.replies.iter().all(|r| r.len() == n + 1))
                    .then_some(l),
            )
        },
    )
    .await;
    let l = match r {
        Ok(l) => l,
        Err(e) => {
            let now = look(u).await.ok();
            return Err(e.context(format!("{}: the page shows {now:?}", u.name)));
        }
    };
    Ok((l.replies[human][n].clone(), l.replies[1 - human][n].clone()))
}

/// The session of the battle's `side` under `lease`, and the system it started with.
async fn side_system(server: &TestServer, lease: &str, side: &str) -> Result<(String, String)> {
    let session = format!("chat-{lease}-{side}");
    let events = server
        .store
        .events(&session, 0)
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    match events.first().map(|e| &e.kind) {
        Some(EventKind::ChatStarted { system, .. }) => Ok((session, system.clone())),
        other => bail!("{session} does not start with ChatStarted: {other:?}"),
    }
}

/// The human side and the two sessions (human, bot) of the battle under `lease`.
async fn sides(server: &TestServer, lease: &str) -> Result<(String, String, String)> {
    let (left, left_system) = side_system(server, lease, "left").await?;
    let (right, right_system) = side_system(server, lease, "right").await?;
    match (left_system.as_str(), right_system.as_str()) {
        (HUMAN, BOT) => Ok(("left".into(), left, right)),
        (BOT, HUMAN) => Ok(("right".into(), right, left)),
        other => bail!("the battle under {lease} is between {other:?}, not {HUMAN} and {BOT}"),
    }
}

async fn battle(server: &TestServer, w: &Browser, u: &Browser) -> Result<Battle> {
    // The wizard enters by a lab link and finds the desk empty.
    w.goto(&server.url(&format!(
        "/join?study={STUDY_ID}&participant={WIZARD}&role=wizard"
    )))
    .await?;
    w.wait_page("desk").await?;
    w.wait_js(
        "the empty desk",
        "return !!document.querySelector('[data-testid=desk-empty]')",
        vec![],
    )
    .await?;
    mark(w).await?;

    // The participant enters the arena.
    u.goto(&server.url(&format!("/join?study={STUDY_ID}&participant={USER}")))
        .await?;
    u.wait_page("arena").await?;
    let lease = u
        .wait_js(
            "the battle's lease",
            "const l = document.querySelector('#chat-send input[name=lease]'); return l ? l.value : null",
            vec![],
        )
        .await?
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (human_side, human, bot) = sides(server, &lease).await?;
    let h = index_of(&human_side);
    let mut battle = Battle {
        human_side: human_side.clone(),
        human: human.clone(),
        bot,
        ..Battle::default()
    };

    // Turn 1.
    let typed_1 = send_and_wait_at_desk(w, u, &human, h, 0, &[]).await?;
    w.type_into_css(&reply_area(&human), REPLY_1).await?;
    check_draft(w, &human, REPLY_1, &typed_1).await?;
    send_reply(w, &human).await?;
    battle.shown.push(wait_for_replies(u, h, 0).await?);
    back_at_desk(w, &human, &[("user", MESSAGES[0]), ("system", REPLY_1)]).await?;
    mark(w).await?;

    // Turn 2: the same wizard, with the history; a reply written in two parts while another
    // conversation reaches the desk.
    let history = [("user", MESSAGES[0]), ("system", REPLY_1)];
    let at_desk = send_and_wait_at_desk(w, u, &human, h, 1, &history).await?;
    w.type_into_css(&reply_area(&human), REPLY_2[0]).await?;
    check_draft(w, &human, REPLY_2[0], &at_desk).await?;
    shoot_settled(w, "desk.png").await?;
    watch_polls(w).await?;
    let (other, other_send) = other_participant(server).await?;
    battle.other_human = other.clone();
    still_writing(w, &human, REPLY_2[0]).await?;
    w.type_into_css(&reply_area(&human), REPLY_2[1]).await?;
    let whole = REPLY_2.concat();
    check_draft(w, &human, &whole, &at_desk).await?;
    send_reply(w, &human).await?;
    battle.shown.push(wait_for_replies(u, h, 1).await?);

    // The desk now shows the other conversation's turn; the wizard answers it as well.
    let full: Vec<(&str, &str)> = history
        .iter()
        .copied()
        .chain([("user", MESSAGES[1]), ("system", whole.as_str())])
        .collect();
    back_at_desk(w, &human, &full).await?;
    let view = desk_look(w, &other)
        .await?
        .view
        .with_context(|| format!("{}: the desk does not show {other}", w.name))?;
    ensure!(
        view.waiting == "1"
            && view.reply_box
            && view.lines == [("user".to_string(), OTHER_MESSAGE.to_string())],
        "{}: after the reply the desk shows the other conversation as {view:?}",
        w.name
    );
    w.type_into_css(&reply_area(&other), OTHER_REPLY).await?;
    send_reply(w, &other).await?;
    let sent = tokio::time::timeout(WAIT, other_send)
        .await
        .context("the other participant's message got no replies")?
        .context("the other participant's task")?;
    ensure!(
        sent.status == 303,
        "the other participant's message: {} {}",
        sent.status,
        sent.body
    );

    // The participant ends the chat and votes for the human side.
    u.click("chat-end").await?;
    u.wait_js(
        "the vote form",
        "return !!document.querySelector('input[data-testid=vote-right]')",
        vec![],
    )
    .await?;
    u.click(&format!("vote-{human_side}")).await?;
    u.click("chat-finish").await?;
    u.wait_page("reveal").await?;
    let v = u
        .js(
            "return ['left', 'right'].map((s) => {\
               const li = document.querySelector(`li[data-testid=reveal-${s}][data-system]`);\
               return li ? li.dataset.system : null })",
            vec![],
        )
        .await?;
    let rows: Vec<Option<String>> = serde_json::from_value(v)?;
    for (s, row) in rows.into_iter().enumerate() {
        battle.revealed[s] = row.with_context(|| format!("the reveal page has no side {s}"))?;
    }
    ensure!(
        battle.revealed[h] == HUMAN && battle.revealed[1 - h] == BOT,
        "the reveal page names {:?} (left, right); the human system plays the {human_side} side",
        battle.revealed
    );
    Ok(battle)
}

/// The participant sends message `n`; waits until the desk page shows it (drawn again by
/// `desk.js`) after `history`, with a reply box naming the human system, while the participant's
/// page shows the bot's reply and the human side typing. Returns the desk's view.
async fn send_and_wait_at_desk(
    w: &Browser,
    u: &Browser,
    human: &str,
    h: usize,
    n: usize,
    history: &[(&str, &str)],
) -> Result<DeskView> {
    let before = look(u).await?;
    ensure!(
        before.replies.iter().all(|r| r.len() == n) && !before.pending,
        "{}: before message {} the sides show {:?} (pending: {})",
        u.name,
        n + 1,
        before.replies,
        before.pending
    );
    // A mark on the page that drawing it again after the replies wipes out.
    u.js("document.querySelector('main').__sent = true", vec![])
        .await?;
    u.type_into("chat-text", MESSAGES[n]).await?;
    u.click("chat-send").await?;

    // The turn at the desk: the reply is the conversation's message 2n + 1.
    let view = wait_for_turn(w, human, 2 * n + 1).await?;
    let mut expected: Vec<(String, String)> = history
        .iter()
        .map(|(c, t)| (c.to_string(), t.to_string()))
        .collect();
    expected.push(("user".into(), MESSAGES[n].into()));
    ensure!(
        view.lines == expected && view.reply_box && view.system == HUMAN && view.draft.is_empty(),
        "{}: turn {} at the desk shows {view:?}, expected the history {expected:?} and an empty \
         reply box for {HUMAN}",
        w.name,
        n + 1
    );

    // Meanwhile the participant sees the bot's reply and the human side typing.
    let r = until(
        &format!("the bot's reply to message {} alone", n + 1),
        WAIT,
        || async {
            let l = look(u).await?;
            Ok((l.same_page && l.replies[1 - h].len() == n + 1).then_some(l))
        },
    )
    .await;
    let l = match r {
        Ok(l) => l,
        Err(e) => {
            let now = look(u).await.ok();
            return Err(e.context(format!("{}: the page shows {now:?}", u.name)));
        }
    };
    ensure!(
        l.replies[h].len() == n && l.typing[h] && !l.typing[1 - h],
        "{}: while the wizard writes, the human side should be typing with {n} replies and the \
         bot's side not typing: {l:?}",
        u.name
    );
    Ok(view)
}

/// The reply box holds `draft` and the conversation is as it was when the turn arrived.
async fn check_draft(w: &Browser, dialogue: &str, draft: &str, arrived: &DeskView) -> Result<()> {
    let l = desk_look(w, dialogue).await?;
    let view = l
        .view
        .with_context(|| format!("{}: {dialogue} left the desk", w.name))?;
    ensure!(
        view.draft == draft && view.lines == arrived.lines && view.waiting == arrived.waiting,
        "{}: the reply box of {dialogue} should hold {draft:?} under the same history: {view:?}",
        w.name
    );
    Ok(())
}

/// After a reply was sent, the desk (drawn again) shows `dialogue`'s history with nothing
/// waiting.
async fn back_at_desk(w: &Browser, dialogue: &str, history: &[(&str, &str)]) -> Result<()> {
    let expected: Vec<(String, String)> = history
        .iter()
        .map(|(c, t)| (c.to_string(), t.to_string()))
        .collect();
    let r = until(
        &format!("the desk with {dialogue} answered"),
        WAIT,
        || async {
            let l = desk_look(w, dialogue).await?;
            Ok(l.view.filter(|v| {
                l.reloaded && v.waiting.is_empty() && !v.reply_box && v.lines == expected
            }))
        },
    )
    .await;
    match r {
        Ok(_) => Ok(()),
        Err(e) => {
            let now = desk_look(w, dialogue).await.ok();
            Err(e.context(format!(
                "{}: expected {expected:?}; the desk shows {now:?}",
                w.name
            )))
        }
    }
}

/// Another participant (plain HTTP, no browser) enters and sends a message; returns their
/// human session and the pending send, which ends when both sides have replied.
async fn other_participant(
    server: &TestServer,
) -> Result<(String, tokio::task::JoinHandle<client::Response>)> {
    let res = client::http(
        server.addr,
        "GET",
        &format!("/join?study={STUDY_ID}&participant={OTHER}"),
        &[],
        "",
    )
    .await;
    ensure!(
        res.status == 303,
        "{OTHER} joins: {} {}",
        res.status,
        res.body
    );
    let cookie = res
        .header("set-cookie")
        .and_then(|c| c.split(';').next().map(str::to_string))
        .context("the join sets no cookie")?;
    let other = client::Client {
        addr: server.addr,
        cookie,
        seat: None,
    };
    let page = other.page().await;
    let attr = |marker: &str| {
        page.body
            .split(marker)
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_default()
            .to_string()
    };
    ensure!(
        attr("data-page=\"") == "arena",
        "{OTHER} is not in the arena: {}",
        page.body
    );
    let (step, lease) = (
        attr("name=\"step\" value=\""),
        attr("name=\"lease\" value=\""),
    );
    let (_, human, _) = sides(server, &lease).await?;
    let form = format!(
        "step={step}&lease={lease}&text={}",
        OTHER_MESSAGE.replace(' ', "+")
    );
    let send = tokio::spawn(async move { other.post("/p/chat/send", &form).await });
    Ok((human, send))
}

/// Marks the desk page and records what its polls return, without changing what `desk.js`
/// does with it.
async fn watch_polls(w: &Browser) -> Result<()> {
    w.js(
        "window.__mark = true;\
         window.__polls = [];\
         const fetch0 = window.fetch;\
         window.fetch = async (...args) => {\
           const res = await fetch0(...args);\
           if (String(args[0]).startsWith('/p/desk/poll')) {\
             const seen = await res.clone().json();\
             window.__polls.push(seen.version);\
           }\
           return res;\
         };",
        vec![],
    )
    .await
    .map(drop)
}

/// The wizard is writing `draft`: waits until `desk.js` has seen the desk change (the other
/// conversation's turn) in two polls, and checks that it did not reload the page meanwhile.
async fn still_writing(w: &Browser, dialogue: &str, draft: &str) -> Result<()> {
    let state = w
        .wait_js(
            "two polls of desk.js that see the desk changed",
            "if (window.__mark !== true) return 'reloaded';\
             const shown = document.querySelector('main[data-page=desk]').dataset.version;\
             return window.__polls.filter((v) => v !== shown).length >= 2 ? 'kept' : null",
            vec![],
        )
        .await?;
    ensure!(
        state == json!("kept"),
        "{}: desk.js reloaded the desk while a reply was being written",
        w.name
    );
    let l = desk_look(w, dialogue).await?;
    let view = l
        .view
        .with_context(|| format!("{}: {dialogue} left the desk", w.name))?;
    ensure!(
        !l.reloaded && view.draft == draft,
        "{}: while writing, the reply box holds {:?} (expected {draft:?}; reloaded: {})",
        w.name,
        view.draft,
        l.reloaded
    );
    Ok(())
}

/// The log of the participant who joined by the lab name `name`, and their id.
async fn participant(server: &TestServer, name: &str) -> Result<(String, Vec<Event>)> {
    let p = server
        .store
        .participant_by_worker(STUDY_ID, Platform::Lab, name)
        .await
        .map_err(|e| anyhow!("store: {e}"))?
        .with_context(|| format!("no participant {name} in {STUDY_ID}"))?;
    let log = server
        .store
        .events(&format!("log-{}", p.id), 0)
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    Ok((p.id, log))
}

fn judgment(log: &[Event]) -> Result<Judgment> {
    let judged: Vec<&Judgment> = log
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Judged(j) => Some(j.as_ref()),
            _ => None,
        })
        .collect();
    match judged.as_slice() {
        [j] => Ok((*j).clone()),
        _ => bail!("{} Judged events in {USER}'s log", judged.len()),
    }
}

/// A session's messages: (the participant's, the system's).
fn messages(events: &[Event]) -> (Vec<String>, Vec<String>) {
    let (mut user, mut system) = (vec![], vec![]);
    for (role, text) in wozkit_core::event::messages(events) {
        if role == Role::User {
            user.push(text.to_string());
        } else {
            system.push(text.to_string());
        }
    }
    (user, system)
}

/// Each system reply of a human session with the `human_reply` annotation just before it:
/// (reply, annotation value, the reply's index among the session's messages).
fn annotated_replies(events: &[Event]) -> Vec<(String, Option<Value>, usize)> {
    let mut out = vec![];
    let mut index = 0;
    for (i, e) in events.iter().enumerate() {
        if let EventKind::Message { role, text, .. } = &e.kind {
            if *role == Role::Wizard {
                let before =
                    i.checked_sub(1)
                        .and_then(|j| events.get(j))
                        .and_then(|e| match &e.kind {
                            EventKind::Annotation { key, value } if key == "human_reply" => {
                                Some(value.clone())
                            }
                            _ => None,
                        });
                out.push((text.clone(), before, index));
            }
            index += 1;
        }
    }
    out
}

async fn session(server: &TestServer, session: &str) -> Result<Vec<Event>> {
    server
        .store
        .events(session, 0)
        .await
        .map_err(|e| anyhow!("store: {e}"))
}

/// The store against what the two browsers showed.
async fn check(server: &TestServer, b: &Battle) -> Result<()> {
    let (_, log) = participant(server, USER).await?;
    let (wizard_id, _) = participant(server, WIZARD).await?;
    let j = judgment(&log)?;
    ensure!(
        j.systems == b.revealed,
        "the reveal page showed {:?} (left, right), the judgment holds {:?}",
        b.revealed,
        j.systems
    );
    let h = index_of(&b.human_side);
    ensure!(
        j.dialogues.len() == 2 && j.dialogues[h] == b.human && j.dialogues[1 - h] == b.bot,
        "the judgment's dialogues {:?} are not the battle's sessions (human {}, bot {})",
        j.dialogues,
        b.human,
        b.bot
    );
    ensure!(
        j.choice.as_deref() == Some(b.human.as_str()) && j.counted && !j.void,
        "voted for the human side ({}): the judgment should choose it and count: {j:?}",
        b.human
    );

    let shown_human: Vec<String> = b.shown.iter().map(|(h, _)| h.clone()).collect();
    let shown_bot: Vec<String> = b.shown.iter().map(|(_, b)| b.clone()).collect();
    ensure!(
        shown_human == [REPLY_1.to_string(), REPLY_2.concat()],
        "the participant's page showed {shown_human:?} on the human side, the wizard typed \
         {REPLY_1:?} and {:?}",
        REPLY_2.concat()
    );
    let human_events = session(server, &b.human).await?;
    let bot_events = session(server, &b.bot).await?;
    for (name, events, shown) in [
        ("human", &human_events, &shown_human),
        ("bot", &bot_events, &shown_bot),
    ] {
        let (user, system) = messages(events);
        ensure!(
            user == MESSAGES && &system == shown,
            "the {name} session logged {user:?} and the replies {system:?}; the page showed \
             {shown:?}"
        );
    }
    for (session_name, events) in [
        (&b.human, &human_events),
        (&b.other_human, &session(server, &b.other_human).await?),
    ] {
        for (reply, note, index) in annotated_replies(events) {
            let expected = json!({"participant": wizard_id, "turn": index});
            ensure!(
                note.as_ref() == Some(&expected),
                "{session_name}: the reply {reply:?} should follow a human_reply annotation \
                 {expected}, found {note:?}"
            );
        }
    }
    let (_, other_replies) = messages(&session(server, &b.other_human).await?);
    ensure!(
        other_replies == [OTHER_REPLY],
        "{}: the other participant's human side logged {other_replies:?}",
        b.other_human
    );
    ensure!(
        bot_events
            .iter()
            .all(|e| !matches!(&e.kind, EventKind::Annotation { key, .. } if key == "human_reply")),
        "the bot's session holds a human_reply annotation"
    );
    Ok(())
}
