//! End to end: the built-in `self-dialog-demo` and `self-dialog-spans` studies in real headless
//! Chromium.
//!
//! - A worker gives consent, reads the instructions, writes six turns (Enter sends a turn, as
//!   `selfdialog.js` arranges), fixes the last one in the "Fix the last turn" form, and submits:
//!   the page always named the speaker of the next turn, and the judgment in the log carries the
//!   turns as written and fixed.
//! - An annotator selects a place's name in an utterance with the mouse: the script fills the form's
//!   utterance, offsets and words; they pick a slot and mark it, and the span is listed.
//!
//! Needs both browsers and their drivers (see `main.rs`); fails when one is missing unless
//! `WOZKIT_SKIP_E2E=1`. With `WOZKIT_UPDATE_SCREENSHOTS=1` (or when the file is missing) it
//! writes the writing page at 1366×768 to `docs/screenshots/self-dialog.png`.

use crate::browser;
use crate::server;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::json;
use wozkit_core::event::EventKind;
use wozkit_core::load::load_builtin;
use wozkit_store::{SessionFilter, SessionKind};

use browser::{Browser, Driver, close_all, shoot};
use server::TestServer;

const LIMIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_dialogs_in_the_browser() {
    browser::run_in_both_browsers(
        "end-to-end self-dialog test",
        LIMIT,
        |chromium, chromedriver| async move { run(&chromium, &chromedriver).await },
    )
    .await;
}

async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let write = load_builtin("self-dialog-demo").map_err(|e| anyhow!("{e}"))?;
    let spans = load_builtin("self-dialog-spans").map_err(|e| anyhow!("{e}"))?;
    let mut server = TestServer::start_all(vec![write, spans]).await?;
    let driver = Driver::start(chromium, chromedriver).await?;
    let a = driver.browser("writer").await?;
    let b = driver.browser("annotator").await?;
    let played = play(&server, &a, &b).await;
    let closed = close_all([a, b]).await;
    drop(driver);
    let stopped = server.stop().await;
    played?;
    closed?;
    stopped
}

/// The name on the next turn's form.
async fn next_speaker(br: &Browser) -> Result<String> {
    br.text("sd-next-speaker").await
}

async fn play(server: &TestServer, a: &Browser, b: &Browser) -> Result<()> {
    a.goto(&server.url(
        "/join?study=self-dialog-demo&PROLIFIC_PID=5f1e2e00000000000000sd01&STUDY_ID=e2e&SESSION_ID=sd-a",
    ))
    .await?;
    a.wait_page("consent").await?;
    a.click("accept").await?;
    a.wait_page("instructions").await?;
    a.click("continue").await?;
    a.wait_page("self-dialog").await?;
    // Turns that fit the scenario the worker was given.
    let scenario = a
        .js(
            "return document.querySelector('[data-testid=scenario]').dataset.scenario",
            vec![],
        )
        .await?;
    let turns: [&str; 6] = match scenario.as_str().unwrap_or_default() {
        "restaurant-table-1" => [
            "Hi, I'd like to book a table at Luigi's tonight.",
            "Of course. For how many people, and at what time?",
            "Four of us, at 7 pm.",
            "I'm sorry, 7 pm is full. Would 7:30 pm suit you?",
            "Yes, 7:30 is fine.",
            "Booked: a table for 4 at Luigi's, 7:30 tonight.",
        ],
        "pizza-ordering-1" => [
            "Hi, I'd like a pizza delivered from Mario's.",
            "Sure! Which pizza, and what size and crust?",
            "A large margherita, thin crust, with mushrooms.",
            "We're out of mushrooms today. Would olives do?",
            "Olives are fine, thanks.",
            "A large thin-crust margherita with olives, in 30 minutes.",
        ],
        "uber-lyft-1" => [
            "I need a ride from the station to the airport.",
            "How many people are riding?",
            "Just two of us.",
            "A standard car is $32, 5 minutes away; a large one $45, 9 minutes.",
            "The standard car, please.",
            "Your standard car is booked and arrives in 5 minutes.",
        ],
        other => bail!("unexpected scenario {other:?}"),
    };
    for (i, text) in turns.iter().enumerate() {
        let expected = if i % 2 == 0 { "USER" } else { "ASSISTANT" };
        ensure!(
            next_speaker(a).await? == expected,
            "turn {i} should be {expected}'s"
        );
        // Enter sends the turn (selfdialog.js): the WebDriver Enter key, which both browsers
        // press as a key (geckodriver types a "\n" as a line break without an Enter keydown).
        a.type_into_css("#sd-text", &format!("{text}{}", browser::ENTER))
            .await?;
        a.wait_js(
            "the turn to be listed",
            "return document.querySelectorAll('[data-testid=sd-turn]').length === arguments[0]",
            vec![json!(i + 1)],
        )
        .await?;
    }
    shoot(a, "self-dialog.png").await?;
    // Fix the last turn.
    a.js("document.querySelector('.sd-fix').open = true", vec![])
        .await?;
    let fixed = "All set, thank you for your order!";
    a.js(
        "document.querySelector('.sd-fix textarea').value = arguments[0]",
        vec![json!(fixed)],
    )
    .await?;
    a.click("sd-fix-save").await?;
    a.wait_js(
        "the fixed turn to be shown",
        "const t = document.querySelectorAll('[data-testid=sd-turn] .sd-text');\
         return t.length === 6 && t[5].textContent === arguments[0]",
        vec![json!(fixed)],
    )
    .await?;
    a.click("sd-submit").await?;
    a.wait_page("completion").await?;

    // The log holds the dialogue as written and fixed.
    let logs = server
        .store
        .list_sessions(&SessionFilter {
            study_id: Some("self-dialog-demo".into()),
            kind: SessionKind::Participant,
            ..SessionFilter::default()
        })
        .await?;
    ensure!(logs.len() == 1, "one worker log, found {}", logs.len());
    let events = server.store.events(&logs[0].id, 0).await?;
    let judged = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Judged(j) => Some(j),
            _ => None,
        })
        .context("no judgment in the log")?;
    let written: Vec<&str> = judged.answers["utterances"]
        .as_array()
        .context("utterances")?
        .iter()
        .filter_map(|u| u["text"].as_str())
        .collect();
    let mut expected: Vec<&str> = turns.to_vec();
    expected[5] = fixed;
    ensure!(written == expected, "logged {written:?}");

    // The annotator marks "Luigi's" by selecting it.
    b.goto(&server.url(
        "/join?study=self-dialog-spans&PROLIFIC_PID=5f1e2e00000000000000sd02&STUDY_ID=e2e&SESSION_ID=sd-b",
    ))
    .await?;
    b.wait_page("consent").await?;
    b.click("accept").await?;
    b.wait_page("instructions").await?;
    b.click("continue").await?;
    b.wait_page("spans").await?;
    // The annotator is given one of the two dialogues; each names a place.
    let selected = b
        .js(
            "const words = [\"Luigi's\", \"Mario's\"];\
             for (const el of document.querySelectorAll('.sp-text')) {\
               const word = words.find((w) => el.textContent.includes(w));\
               if (!word) continue;\
               const node = el.firstChild; const at = node.textContent.indexOf(word);\
               const r = document.createRange(); r.setStart(node, at); r.setEnd(node, at + word.length);\
               const s = window.getSelection(); s.removeAllRanges(); s.addRange(r);\
               document.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));\
               const f = document.getElementById('sp-mark');\
               return [f.turn.value, f.start.value, f.end.value, f.text.value,\
                       Array.from(node.textContent.slice(0, at)).length, el.dataset.turn, word];\
             }\
             return null;",
            vec![],
        )
        .await?;
    let v = selected.as_array().context("no utterance names a place")?;
    let at = v[4].as_u64().context("offset")?;
    let word = v[6].as_str().context("word")?;
    ensure!(
        v[0] == v[5]
            && v[1] == json!(at.to_string())
            && v[2] == json!((at + 7).to_string())
            && v[3] == word,
        "the form was filled with {v:?}"
    );
    let slot = if word == "Luigi's" {
        "restaurant_reservation.name.restaurant"
    } else {
        "pizza_ordering.name.store"
    };
    b.select("sp-slot", slot).await?;
    b.click("sp-add").await?;
    b.wait_js(
        "the span to be listed",
        "const r = document.querySelector('[data-testid=sp-span]');\
         return !!r && r.textContent.includes(arguments[0]) && r.textContent.includes(arguments[1])",
        vec![json!(word), json!(slot)],
    )
    .await?;
    Ok(())
}
