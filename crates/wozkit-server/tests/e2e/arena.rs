//! End to end: the built-in chat studies in real headless browsers, with the page's script
//! (`chat.js`) streaming the replies.
//!
//! - Worker A enters `arena-demo` by a Prolific link, gives consent, reads the instructions and
//!   sends three messages to the two hidden systems. During one of the replies the test reads
//!   the new reply bubble several times and sees its text grow before it is complete (the
//!   built-in systems write word by word). After each turn both sides show a reply, and the
//!   page drawn again from the log shows the same texts as the sessions' logs. A then finishes,
//!   votes for Assistant B with a reason and is shown the two systems' names: they must be the
//!   `systems` of the `Judged` event in A's log, whose `choice` is the right side's session.
//!   Continue leads to the completion code, which the log issued.
//! - The leaderboard page lists both systems, the one A voted for first.
//! - Worker C enters `bot-chat-demo`, ticks a label under the assistant's first reply before
//!   writing again and one under the last reply before pressing "End the conversation", answers
//!   the three scales and gets a code; the judgment's `turns` holds both labels on their replies
//!   (the one ticked before the end is not lost with the page).
//! - A phone-sized browser (390×844) opens a battle and sends a message, for the picture of the
//!   arena on a phone.
//!
//! Needs both browsers and their drivers (see `main.rs`); fails when one is missing unless
//! `WOZKIT_SKIP_E2E=1`. With `WOZKIT_UPDATE_SCREENSHOTS=1` (or when the files are missing) it
//! writes `docs/screenshots/arena-*.png`, `leaderboard.png` and `chat-labels.png`.

use crate::browser;
use crate::server;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::json;
use wozkit_core::event::{Event, EventKind, Judgment, Role};
use wozkit_core::load::load_builtin;
use wozkit_store::Platform;

use browser::{
    Browser, Driver, WAIT, close_all, screenshot_wanted, shoot_settled, until, write_png,
};
use server::TestServer;

/// The whole test must end within this time, whatever happens.
const LIMIT: Duration = Duration::from_secs(150);

const ARENA: &str = "arena-demo";
const CHAT: &str = "bot-chat-demo";
const PID_A: &str = "5f1e2e0000000000000000a1";
const PID_C: &str = "5f1e2e0000000000000000c3";
const PID_PHONE: &str = "5f1e2e0000000000000000f9";

/// A's messages to the two systems.
const ARENA_MESSAGES: [&str; 3] = ["hello", "a beach holiday please", "what should I pack?"];
/// C's messages to the library assistant (the study asks for at least four).
const CHAT_MESSAGES: [&str; 4] = [
    "hello",
    "any good mystery books?",
    "when are you open?",
    "how do I borrow a book?",
];
/// The label C ticks under the assistant's first reply.
const LABEL: &str = "On topic";
/// A's reason for the vote.
const REASON: &str = "B gave more detail and asked what I wanted";
/// C's answers to the three scales.
const SCALES: [(&str, u32); 3] = [("helpful", 4), ("engaging", 3), ("human_like", 2)];
/// The phone the arena is pictured on.
const PHONE: (u32, u32) = (390, 844);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arena_and_chat_in_the_browser() {
    browser::run_in_both_browsers(
        "end-to-end arena test",
        LIMIT,
        |chromium, chromedriver| async move { run(&chromium, &chromedriver).await },
    )
    .await;
}

/// Starts everything, plays, and always closes the browsers and the server before reporting.
async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let arena = load_builtin(ARENA).map_err(|e| anyhow!("{ARENA} does not load:\n{e}"))?;
    let chat = load_builtin(CHAT).map_err(|e| anyhow!("{CHAT} does not load:\n{e}"))?;
    let mut server = TestServer::start_all(vec![arena, chat]).await?;
    let driver = Driver::start(chromium, chromedriver).await?;
    let a = driver.browser("browser A (arena)").await?;
    let c = driver.browser("browser C (chat)").await?;
    let played = play(&server, &a, &c).await;
    let phone = match &played {
        Ok(()) => phone_battle(&server, chromium, chromedriver).await,
        Err(_) => Ok(()),
    };
    let closed = close_all([a, c]).await;
    drop(driver);
    let stopped = server.stop().await;
    played?;
    phone?;
    closed?;
    stopped
}

async fn play(server: &TestServer, a: &Browser, c: &Browser) -> Result<()> {
    let battle = arena_battle(server, a).await?;
    check_battle(server, &battle).await?;
    leaderboard(server, a, &battle).await?;
    let chat = chat_with_labels(server, c).await?;
    check_chat(server, &chat).await
}

/// What A saw of the battle.
#[derive(Debug, Default)]
struct Battle {
    /// The final reply texts per turn, left then right, as the page showed them.
    replies: Vec<[String; 2]>,
    /// The systems the reveal page named, left then right.
    revealed: [String; 2],
    code: String,
}

/// One look at the two sides: the number of system replies, the text of the last one, whether
/// the page is still the one the message was sent from, and whether a reply is pending.
#[derive(Debug, serde::Deserialize)]
struct Look {
    count: [usize; 2],
    last: [String; 2],
    same_page: bool,
    pending: bool,
}

const LOOK: &str = "const side = (n) => [...document.querySelectorAll(\
       `section[data-testid=side-${n}] ol[data-testid=log-${n}] li.said.system .text`)];\
     const l = side('left'), r = side('right');\
     const m = document.querySelector('main.chat');\
     return { count: [l.length, r.length],\
       last: [l.length ? l[l.length - 1].textContent : '', r.length ? r[r.length - 1].textContent : ''],\
       same_page: document.querySelector('main')?.__sent === true,\
       pending: !m || m.dataset.pending !== 'false' }";

async fn look(br: &Browser) -> Result<Look> {
    // The page is drawn again after the replies.
    let v = br.js_settled(LOOK, vec![]).await?;
    serde_json::from_value(v).with_context(|| format!("{}: reading the two sides", br.name))
}

/// Whether the texts read off one bubble while its reply was written show it growing: a
/// non-empty text that the next one extends and that is shorter than the finished reply.
fn grew(seen: &[String], finished: &str) -> bool {
    seen.windows(2).any(|w| {
        !w[0].is_empty()
            && w[1].len() > w[0].len()
            && w[1].starts_with(w[0].as_str())
            && w[0].len() < finished.len()
            && finished.starts_with(w[0].trim_end())
    })
}

async fn arena_battle(server: &TestServer, a: &Browser) -> Result<Battle> {
    a.goto(&server.url(&format!(
        "/join?study={ARENA}&PROLIFIC_PID={PID_A}&STUDY_ID=e2e-arena&SESSION_ID=e2e-a"
    )))
    .await?;
    a.wait_page("consent").await?;
    a.click("accept").await?;
    a.wait_page("instructions").await?;
    a.click("continue").await?;
    a.wait_page("arena").await?;
    let mut battle = Battle::default();
    let mut streamed = false;
    for (n, message) in ARENA_MESSAGES.iter().enumerate() {
        let before = look(a).await?;
        ensure!(
            before.count == [n, n] && !before.pending,
            "A: before message {} the sides show {:?} replies (pending: {})",
            n + 1,
            before.count,
            before.pending
        );
        // A mark on the page that drawing it again after the replies wipes out.
        a.js("document.querySelector('main').__sent = true", vec![])
            .await?;
        a.type_into("chat-text", message).await?;
        a.click("chat-send").await?;
        // Every text the new bubble of each side showed while the reply was written.
        let mut seen: [Vec<String>; 2] = [vec![], vec![]];
        let started = Instant::now();
        let done = loop {
            let l = look(a).await?;
            if l.same_page {
                for ((texts, count), last) in seen.iter_mut().zip(l.count).zip(&l.last) {
                    if count > n && texts.last() != Some(last) {
                        texts.push(last.clone());
                    }
                }
            } else if l.count == [n + 1, n + 1] && !l.pending {
                break l;
            }
            ensure!(
                started.elapsed() < Duration::from_secs(20),
                "A: no replies to message {} ({message:?}) within 20 s: {l:?}",
                n + 1
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        for (side, (texts, last)) in ["left", "right"].iter().zip(seen.iter().zip(&done.last)) {
            ensure!(
                !last.trim().is_empty(),
                "A: the {side} side shows an empty reply to {message:?}"
            );
            if grew(texts, last) {
                streamed = true;
            }
        }
        eprintln!(
            "A: message {}: {} / {} texts of the new left / right bubble seen while written",
            n + 1,
            seen[0].len(),
            seen[1].len()
        );
        battle.replies.push(done.last.clone());
        if n == 1 {
            shoot_settled(a, "arena-chat.png").await?;
        }
    }
    ensure!(
        streamed,
        "A: no reply bubble was seen growing while its reply was written (the built-in \
         systems write word by word)"
    );

    // Finish and vote for the right side, with a reason.
    a.click("chat-end").await?;
    a.wait_js(
        "the vote form",
        "return !!document.querySelector('input[data-testid=vote-right]')",
        vec![],
    )
    .await?;
    a.click("vote-right").await?;
    a.type_into_css("textarea[name=justification]", REASON)
        .await?;
    a.js(
        "document.querySelector('[data-testid=question-vote]').scrollIntoView({block: 'center'})",
        vec![],
    )
    .await?;
    shoot_settled(a, "arena-vote.png").await?;
    a.click("chat-finish").await?;
    a.wait_page("reveal").await?;
    let v = a
        .js(
            "return ['left', 'right'].map((s) => {\
               const li = document.querySelector(`li[data-testid=reveal-${s}][data-system]`);\
               return li ? [li.dataset.system, li.textContent] : null })",
            vec![],
        )
        .await?;
    let rows: Vec<Option<(String, String)>> = serde_json::from_value(v)?;
    for (s, row) in rows.iter().enumerate() {
        let (system, text) = row
            .as_ref()
            .with_context(|| format!("A: the reveal page has no row for side {s}"))?;
        ensure!(
            !system.is_empty() && text.contains(system.as_str()),
            "A: the reveal row of side {s} does not name its system {system:?}: {text:?}"
        );
        battle.revealed[s] = system.clone();
    }
    ensure!(
        battle.revealed[0] != battle.revealed[1],
        "A: both sides revealed as {:?}",
        battle.revealed[0]
    );
    shoot_settled(a, "arena-reveal.png").await?;
    a.click("reveal-continue").await?;
    a.wait_page("completion").await?;
    battle.code = a.text("completion-code").await?;
    ensure!(!battle.code.is_empty(), "A: empty completion code");
    Ok(battle)
}

/// A participant's own log, found by how they joined.
async fn log_of(server: &TestServer, study: &str, worker: &str) -> Result<Vec<Event>> {
    let part = server
        .store
        .participant_by_worker(study, Platform::Prolific, worker)
        .await
        .map_err(|e| anyhow!("store: {e}"))?
        .with_context(|| format!("no participant {worker} in {study}"))?;
    server
        .store
        .events(&format!("log-{}", part.id), 0)
        .await
        .map_err(|e| anyhow!("store: {e}"))
}

/// The one judgment of a log.
fn judgment(log: &[Event], who: &str) -> Result<Judgment> {
    let judged: Vec<&Judgment> = log
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Judged(j) => Some(j.as_ref()),
            _ => None,
        })
        .collect();
    match judged.as_slice() {
        [j] => Ok((*j).clone()),
        _ => bail!("{who}: {} Judged events in the log", judged.len()),
    }
}

/// The messages of a conversation's session: (the participant's, the system's).
async fn messages(server: &TestServer, session: &str) -> Result<(Vec<String>, Vec<String>)> {
    let events = server
        .store
        .events(session, 0)
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    let (mut user, mut system) = (vec![], vec![]);
    for e in events {
        if let EventKind::Message { role, text, .. } = e.kind {
            if role == Role::User {
                user.push(text);
            } else {
                system.push(text);
            }
        }
    }
    Ok((user, system))
}

/// Whether the log issued the code a Prolific participant of `study` was shown: wozkit's own
/// code is logged, and the page shows the study's Prolific code for a completed part.
fn code_issued(log: &[Event], study: &str, code: &str) -> bool {
    let prolific = wozkit_core::load::load_builtin(study).ok().and_then(|s| {
        s.study
            .prolific_code(wozkit_core::platforms::EndingKind::Completed)
            .map(str::to_string)
    });
    log.iter().any(|e| {
        matches!(&e.kind, EventKind::CompletionIssued { code: c, .. }
            if c == code || prolific.as_deref() == Some(code))
    })
}

/// A's log and the battle's two sessions against what the browser showed.
async fn check_battle(server: &TestServer, b: &Battle) -> Result<()> {
    let log = log_of(server, ARENA, PID_A).await?;
    let j = judgment(&log, "A")?;
    ensure!(
        j.systems == b.revealed,
        "A: the reveal page showed {:?} (left, right), the judgment holds {:?}",
        b.revealed,
        j.systems
    );
    ensure!(
        j.dialogues.len() == 2 && j.dialogues[1].ends_with("-right"),
        "A: the judgment's dialogues are not left then right: {:?}",
        j.dialogues
    );
    ensure!(
        j.choice.as_deref() == Some(j.dialogues[1].as_str()),
        "A: voted for the right side ({}), the judgment's choice is {:?}",
        j.dialogues[1],
        j.choice
    );
    ensure!(
        j.justification.as_deref() == Some(REASON) && j.counted && !j.void,
        "A: the judgment should hold the reason and be counted, not void: {j:?}"
    );
    ensure!(
        code_issued(&log, ARENA, &b.code),
        "A: the log issued no completion code {:?}",
        b.code
    );
    for (s, session) in j.dialogues.iter().enumerate() {
        let (user, system) = messages(server, session).await?;
        let shown: Vec<&String> = b.replies.iter().map(|r| &r[s]).collect();
        ensure!(
            user == ARENA_MESSAGES,
            "A: session {session} logged the messages {user:?}"
        );
        ensure!(
            system.iter().collect::<Vec<_>>() == shown,
            "A: session {session} logged the replies {system:?}, the page showed {shown:?}"
        );
    }
    Ok(())
}

/// The leaderboard lists both systems, the voted-for one first.
async fn leaderboard(server: &TestServer, a: &Browser, b: &Battle) -> Result<()> {
    a.goto(&server.url(&format!("/leaderboard/{ARENA}")))
        .await?;
    a.wait_page("leaderboard").await?;
    let v = a
        .wait_js(
            "the leaderboard's rows",
            "const rows = [...document.querySelectorAll('table[data-testid=leaderboard] tbody tr[data-system]')];\
             return rows.length ? rows.map((r) => r.dataset.system) : null",
            vec![],
        )
        .await?;
    let ranked: Vec<String> = serde_json::from_value(v)?;
    let mut sorted = ranked.clone();
    sorted.sort();
    let mut expected = b.revealed.to_vec();
    expected.sort();
    ensure!(
        sorted == expected,
        "the leaderboard lists {ranked:?}, the battle was between {:?}",
        b.revealed
    );
    ensure!(
        ranked.first() == Some(&b.revealed[1]),
        "A voted for {}, but the leaderboard ranks {ranked:?}",
        b.revealed[1]
    );
    shoot_settled(a, "leaderboard.png").await
}

/// What C did in the chat.
#[derive(Debug, Default)]
struct Chat {
    /// `data-index` of the reply C labelled before writing again.
    labelled: u64,
    /// `data-index` of the last reply, labelled just before the end.
    labelled_last: u64,
    code: String,
}

async fn chat_with_labels(server: &TestServer, c: &Browser) -> Result<Chat> {
    c.goto(&server.url(&format!(
        "/join?study={CHAT}&PROLIFIC_PID={PID_C}&STUDY_ID=e2e-chat&SESSION_ID=e2e-c"
    )))
    .await?;
    c.wait_page("consent").await?;
    c.click("accept").await?;
    c.wait_page("instructions").await?;
    c.click("continue").await?;
    c.wait_page("chat").await?;
    let mut chat = Chat::default();
    // The number of replies once the page was drawn again after the last message.
    let replies = "return document.querySelector('main')?.__sent !== true && document.querySelector('main.chat[data-pending=false]') ? \
                   document.querySelectorAll('ol[data-testid=log-chat] li.said.system').length : -1";
    for (n, message) in CHAT_MESSAGES.iter().enumerate() {
        if n == 1 {
            // Under the first reply, before the next message.
            chat.labelled = tick_label(c, "the first reply").await?;
            shoot_settled(c, "chat-labels.png").await?;
        }
        c.js("document.querySelector('main').__sent = true", vec![])
            .await?;
        c.type_into("chat-text", message).await?;
        c.click("chat-send").await?;
        until(&format!("the reply to {message:?}"), WAIT, || async {
            let count = c.js(replies, vec![]).await?;
            Ok((count.as_i64() == Some(n as i64 + 1)).then_some(()))
        })
        .await
        .with_context(|| format!("C: message {}", n + 1))?;
    }
    // Under the last reply, then the end: the label goes with the end button's post.
    chat.labelled_last = tick_label(c, "the last reply").await?;
    c.click("chat-end").await?;
    c.wait_js(
        "the questions after the chat",
        "return !!document.querySelector('[data-testid=chat-finish]')",
        vec![],
    )
    .await?;
    for (q, point) in SCALES {
        c.click(&format!("{q}-{point}")).await?;
    }
    c.click("chat-finish").await?;
    c.wait_page("completion").await?;
    chat.code = c.text("completion-code").await?;
    ensure!(!chat.code.is_empty(), "C: empty completion code");
    Ok(chat)
}

/// Ticks [`LABEL`] under the only reply offering labels (the last one not labelled yet) and
/// returns that reply's `data-index`.
async fn tick_label(c: &Browser, which: &str) -> Result<u64> {
    let v = c
        .wait_js(
            &format!("the label checkboxes under {which}"),
            "const box = document.querySelector(\
               `[data-testid=annotate-chat] input[type=checkbox][value='${arguments[0]}']`);\
             if (!box) return null;\
             box.scrollIntoView({block: 'center'}); box.click();\
             return box.checked ? box.closest('li.said').dataset.index : null",
            vec![json!(LABEL)],
        )
        .await?;
    v.as_str()
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("C: the labelled reply ({which}) has no data-index"))
}

/// C's judgment holds the labels on the replies they were ticked under, and the scales.
async fn check_chat(server: &TestServer, chat: &Chat) -> Result<()> {
    let log = log_of(server, CHAT, PID_C).await?;
    let j = judgment(&log, "C")?;
    let labelled: Vec<_> = j
        .turns
        .iter()
        .map(|t| (t.turn as u64, t.labels.clone()))
        .collect();
    ensure!(
        labelled
            == [
                (chat.labelled, vec![LABEL.to_string()]),
                (chat.labelled_last, vec![LABEL.to_string()])
            ],
        "C: labelled replies {} and {} (the last, before the end) with {LABEL:?}, the \
         judgment's turns are {:?}",
        chat.labelled,
        chat.labelled_last,
        j.turns
    );
    ensure!(
        j.turns.iter().all(|t| j.dialogues.contains(&t.dialogue)),
        "C: a labelled turn names a dialogue not in the judgment: {j:?}"
    );
    for (q, point) in SCALES {
        let got = j.answers.get(q);
        ensure!(
            got.is_some_and(|v| v == &json!(point) || v == &json!(point.to_string())),
            "C: answered {point} to `{q}`, the judgment holds {got:?}"
        );
    }
    let (user, system) = messages(server, &j.dialogues[0]).await?;
    ensure!(
        user == CHAT_MESSAGES && system.len() == CHAT_MESSAGES.len(),
        "C: the session logged {user:?} and {} replies",
        system.len()
    );
    ensure!(
        code_issued(&log, CHAT, &chat.code),
        "C: the log issued no completion code {:?}",
        chat.code
    );
    Ok(())
}

/// A battle on a phone, for its picture: one message, both replies.
async fn phone_battle(server: &TestServer, chromium: &Path, chromedriver: &Path) -> Result<()> {
    let driver = Driver::start(chromium, chromedriver).await?;
    let phone = driver.browser_sized("phone", PHONE).await?;
    phone
        .goto(&server.url(&format!(
            "/join?study={ARENA}&PROLIFIC_PID={PID_PHONE}&STUDY_ID=e2e-arena&SESSION_ID=e2e-phone"
        )))
        .await?;
    phone.wait_page("consent").await?;
    phone.click("accept").await?;
    phone.wait_page("instructions").await?;
    phone.click("continue").await?;
    phone.wait_page("arena").await?;
    let size = phone.js("return [innerWidth, innerHeight]", vec![]).await?;
    ensure!(
        size == json!([PHONE.0, PHONE.1]),
        "phone: the viewport is {size}, not {PHONE:?}"
    );
    phone.type_into("chat-text", ARENA_MESSAGES[0]).await?;
    // A mark on the page that drawing it again after the replies wipes out.
    phone
        .js("document.querySelector('main').__sent = true", vec![])
        .await?;
    phone.click("chat-send").await?;
    phone
        .wait_js(
            "both replies, drawn again from the log",
            "return document.querySelector('main')?.__sent !== true\
               && !!document.querySelector('main.chat[data-pending=false]')\
               && document.querySelectorAll('li.said.system .text').length === 2",
            vec![],
        )
        .await?;
    // The page keeps no scrollbar on a phone: nothing is wider than the screen.
    let wide = phone
        .js(
            "return document.documentElement.scrollWidth <= innerWidth",
            vec![],
        )
        .await?;
    ensure!(
        wide == json!(true),
        "phone: the arena page is wider than a {}-pixel screen",
        PHONE.0
    );
    if let Some(path) = screenshot_wanted("arena-phone.png") {
        let png = phone.screenshot().await?;
        write_png(&phone.name, &path, &png)?;
    }
    phone.close().await?;
    Ok(())
}
