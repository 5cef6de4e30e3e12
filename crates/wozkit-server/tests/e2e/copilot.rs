//! The wizard's copilot in real browsers, by keyboard alone: the study's system suggests the
//! wizard's opening, which the wizard edits in the message box and sends; then it suggests the
//! answer to the user's message, which the wizard sends as it is. The room with a suggestion
//! showing is checked with axe-core; the user's page never shows the copilot; the log records
//! both uses with their edit distances. Chromium, then Firefox ESR.

use crate::browser;
use crate::server;

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, ensure};
use serde_json::json;
use wozkit_core::copilot::{Copilot, uptake};
use wozkit_store::Platform;

use browser::{Browser, Driver, ENTER, close_all, into_room, shoot_settled};
use server::TestServer;

const LIMIT: Duration = Duration::from_secs(120);
const USER: &str = "e2e-copilot-user";
const WIZARD: &str = "e2e-copilot-wizard";
const OPENING: &str = "Hello, this is the platform assistant. What happened?";
const ANSWER: &str = "Where exactly is the fire?";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wizard_edits_one_suggestion_and_sends_another_by_keyboard() {
    browser::run_in_both_browsers(
        "copilot browser test",
        LIMIT,
        |browser, driver| async move { run(&browser, &driver).await },
    )
    .await;
}

async fn run(browser: &Path, driver: &Path) -> Result<()> {
    let mut study = server::quick_study()?;
    let helper = json!({
        "kind": "builtin",
        "replies": [{"when": ["fire"], "say": ANSWER}],
        "fallback": [OPENING],
    });
    study
        .study
        .systems
        .insert("helper".into(), serde_json::from_value(helper)?);
    study.study.copilot = Some(Copilot {
        system: "helper".into(),
        opening: true,
    });
    let id = study.study.id.clone();
    let mut server = TestServer::start(study).await?;
    let driver = Driver::start(browser, driver).await?;
    let u = driver.browser("the user").await?;
    let w = driver.browser("the wizard").await?;
    let played = play(&server, &id, &u, &w).await;
    let closed = close_all([u, w]).await;
    drop(driver);
    let stopped = server.stop().await;
    played?;
    closed?;
    stopped
}

/// Waits until the wizard's copilot panel shows `text`.
async fn suggestion_shows(w: &Browser, text: &str) -> Result<()> {
    w.wait_js(
        &format!("the suggestion {text:?}"),
        "const p = document.getElementById('copilot-panel'); \
         return !!p && !p.hidden && document.getElementById('copilot-text').textContent === arguments[0]",
        vec![json!(text)],
    )
    .await
    .map(drop)
}

/// Waits until `br`'s chat has a line containing `text`.
async fn chat_shows(br: &Browser, text: &str) -> Result<()> {
    br.wait_js(
        &format!("a chat line with {text:?}"),
        "return [...document.querySelectorAll('#chat li')].some((l) => l.textContent.includes(arguments[0]))",
        vec![json!(text)],
    )
    .await
    .map(drop)
}

async fn play(server: &TestServer, id: &str, u: &Browser, w: &Browser) -> Result<()> {
    let user_url = server.url(&format!("/join?study={id}&participant={USER}&role=user"));
    let wizard_url = server.url(&format!(
        "/join?study={id}&participant={WIZARD}&role=wizard"
    ));
    let (ur, wr) = tokio::join!(into_room(u, &user_url), into_room(w, &wizard_url));
    ur?;
    wr?;

    // The opening: edited in the message box, then sent with Enter.
    suggestion_shows(w, OPENING).await?;
    w.check_accessible("room with a suggestion").await?;
    w.press_on("[data-testid=copilot-edit]").await?;
    let edited = format!("{OPENING} Over.");
    w.keys(&format!(" Over.{ENTER}")).await?;
    chat_shows(u, &edited).await?;

    // The answer to the user's message: sent as it is.
    u.type_by_keys(
        "[data-testid=text-input]",
        &format!("There is a fire{ENTER}"),
    )
    .await?;
    suggestion_shows(w, ANSWER).await?;
    shoot_settled(w, "copilot.png").await?;
    w.press_on("[data-testid=copilot-send]").await?;
    chat_shows(u, ANSWER).await?;
    w.wait_js(
        "the suggestion closed once sent",
        "return document.getElementById('copilot-panel').hidden",
        vec![],
    )
    .await?;
    let user_page = u
        .js("return !!document.getElementById('copilot-panel')", vec![])
        .await?;
    ensure!(
        user_page == json!(false),
        "the user's page has a copilot panel"
    );

    // The log: the opening edited by six characters, the answer sent as it was.
    let events = server.session_events(id, Platform::Lab, WIZARD).await?;
    let (system, use_) = uptake(&events).ok_or_else(|| anyhow::anyhow!("no suggestion logged"))?;
    ensure!(system == "helper", "suggested by {system}");
    ensure!(
        (use_.sent, use_.edited, use_.edit_distances.as_slice()) == (1, 1, &[6][..]),
        "what became of the suggestions: {use_:?}"
    );
    Ok(())
}
