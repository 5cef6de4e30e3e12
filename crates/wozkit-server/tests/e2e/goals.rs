//! End to end: the user's goal panel in real headless Chromium, on the two-domain goals study of
//! wozkit-core's fixtures. The user's page lists the goal drawn for the session (the one the log
//! holds); the user states the first sub-goal's constraints and sees them ticked; the wizard
//! searches, uses the drawn row and says the option that tells it, and the user sees the requested
//! slots ticked with the values told. The wizard's page never shows the goal.
//!
//! Needs both browsers and their drivers (see `main.rs`); fails when one is missing unless
//! `WOZKIT_SKIP_E2E=1`. With `WOZKIT_UPDATE_SCREENSHOTS=1` (or when the file is missing) it
//! writes the user's room to `docs/screenshots/user-goal.png` at 1366×768.

use crate::browser;
use crate::server;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use serde_json::{Value, json};
use wozkit_core::event::EventKind;
use wozkit_core::goals::{Goal, GoalText};
use wozkit_core::load::load_path;
use wozkit_store::Platform;

use browser::{Browser, Driver, close_all, into_room, shoot, use_row};
use server::TestServer;

/// The whole test must end within this time, whatever happens.
const LIMIT: Duration = Duration::from_secs(120);
const STUDY_ID: &str = "goals-mini";
const USER_LAB: &str = "e2e-goal-visitor";
const WIZARD_LAB: &str = "e2e-goal-guide";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_sees_the_goal_ticked_in_the_browser() {
    browser::run_in_both_browsers(
        "end-to-end goal panel test",
        LIMIT,
        |chromium, chromedriver| async move { run(&chromium, &chromedriver).await },
    )
    .await;
}

async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let driver = Driver::start(chromium, chromedriver).await?;
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../wozkit-core/tests/fixtures/goals-study");
    let study = load_path(&dir).map_err(|e| anyhow!("the goals study does not load:\n{e}"))?;
    let mut server = TestServer::start(study).await?;
    let u = driver.browser("the user").await?;
    let w = driver.browser("the wizard").await?;
    let played = play(&server, &u, &w).await;
    let closed = close_all([u, w]).await;
    let stopped = server.stop().await;
    drop(driver);
    played?;
    closed?;
    stopped
}

/// The session's goal, from its log.
async fn logged_goal(server: &TestServer) -> Result<Goal> {
    server
        .session_events(STUDY_ID, Platform::Lab, USER_LAB)
        .await?
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::GoalGenerated { goal, .. } => Some(goal),
            _ => None,
        })
        .context("no goal_generated in the log")
}

/// The goal entries on the user's page: subgoal, kind, slot, text, satisfied.
async fn entries(u: &Browser) -> Result<Value> {
    u.js(
        "return [...document.querySelectorAll('#goal-panel li[data-testid=goal-entry]')].map(li => ({ \
           subgoal: Number(li.closest('[data-subgoal]').dataset.subgoal), kind: li.dataset.kind, \
           slot: li.dataset.slot, text: li.querySelector('.goal-text').textContent, \
           satisfied: li.dataset.satisfied === 'true' }))",
        vec![],
    )
    .await
}

/// Waits until every entry of sub-goal 1 of `kind` is ticked on the user's page.
async fn wait_ticked(u: &Browser, kind: &str) -> Result<()> {
    u.wait_js(
        &format!("the {kind} entries of sub-goal 1 ticked"),
        "const li = [...document.querySelectorAll('#goal-panel [data-subgoal=\"1\"] li[data-kind=' + arguments[0] + ']')]; \
         return li.length > 0 && li.every(l => l.dataset.satisfied === 'true' && l.querySelector('.tick').textContent === '✓')",
        vec![json!(kind)],
    )
    .await
    .map(drop)
}

async fn wizard_has_no_goal(w: &Browser) -> Result<()> {
    let v = w
        .js(
            "return !!document.getElementById('goal-panel') || document.body.innerText.includes('Your goal')",
            vec![],
        )
        .await?;
    ensure!(v == json!(false), "the wizard's page shows the goal");
    Ok(())
}

async fn play(server: &TestServer, u: &Browser, w: &Browser) -> Result<()> {
    let user_url = server.url(&format!("/join?participant={USER_LAB}&role=user"));
    let wizard_url = server.url(&format!("/join?participant={WIZARD_LAB}&role=wizard"));
    let (ur, wr) = tokio::join!(into_room(u, &user_url), into_room(w, &wizard_url));
    ur?;
    wr?;
    u.wait_js(
        "the goal panel",
        "return document.querySelectorAll('#goal-panel li[data-testid=goal-entry]').length > 0",
        vec![],
    )
    .await?;
    let goal = logged_goal(server).await?;
    let sg = &goal.subgoals[0];

    // The panel lists the logged goal, nothing ticked.
    let shown = entries(u).await?;
    let shown = shown.as_array().context("entries")?;
    let mut expected: Vec<(u32, &str, &str)> = vec![];
    for s in &goal.subgoals {
        expected.extend(
            s.constraints
                .iter()
                .map(|c| (s.id, "constraint", c.slot.as_str())),
        );
        expected.extend(
            s.requests
                .iter()
                .map(|r| (s.id, "request", r.slot.as_str())),
        );
    }
    let listed: Vec<(u32, &str, &str)> = shown
        .iter()
        .map(|e| {
            (
                e["subgoal"].as_u64().unwrap_or(0) as u32,
                e["kind"].as_str().unwrap_or(""),
                e["slot"].as_str().unwrap_or(""),
            )
        })
        .collect();
    ensure!(
        listed == expected,
        "the panel lists {listed:?}, the goal is {expected:?}"
    );
    ensure!(
        shown.iter().all(|e| e["satisfied"] == false),
        "ticked before anything was said"
    );
    // Every constraint as the user reads it: a reference to an earlier sub-goal in the study's
    // words, never the stored `id=1`.
    let words = GoalText {
        reference: Some("one of the hotels near sub-goal {id}".into()),
        ..GoalText::default()
    };
    for c in goal.subgoals.iter().flat_map(|s| &s.constraints) {
        let text = format!("{}: {}", c.slot, words.shown_value(c));
        ensure!(
            shown.iter().any(|e| e["text"] == json!(text)),
            "the constraint `{text}` is not shown: {shown:?}"
        );
    }
    ensure!(
        !shown
            .iter()
            .any(|e| e["text"].as_str().is_some_and(|t| t.contains("id="))),
        "a stored reference value is shown: {shown:?}"
    );
    wizard_has_no_goal(w).await?;

    // The wizard greets; the user states the constraints (a reference is met by the selection).
    w.type_into("text-input", "Hello! What would you like to visit?\u{e007}")
        .await?;
    u.wait_chat("the greeting", |l| l.text.starts_with("Hello!"))
        .await?;
    let plain: Vec<&str> = sg
        .constraints
        .iter()
        .filter(|c| c.reference.is_none())
        .map(|c| c.value.as_str())
        .collect();
    u.type_into(
        "text-input",
        &format!("Something with {}.\u{e007}", plain.join(" and ")),
    )
    .await?;
    if sg.constraints.iter().all(|c| c.reference.is_none()) {
        wait_ticked(u, "constraint").await?;
    }

    // The wizard searches the table, uses the drawn row and tells it.
    w.select("db-table", &sg.table).await?;
    w.click("db-search").await?;
    w.wait_js(
        "the drawn row among the results",
        "return !!document.querySelector('#db-results tr[data-key=\"' + arguments[0] + '\"]')",
        vec![json!(sg.row)],
    )
    .await?;
    use_row(w, &sg.row).await?;
    w.click(&format!("option-{}", sg.table)).await?;
    wait_ticked(u, "request").await?;
    let shown = entries(u).await?;
    let db = server_row(sg)?;
    for r in &sg.requests {
        let value = db.get(&r.slot).cloned().unwrap_or_default();
        ensure!(
            shown
                .as_array()
                .is_some_and(|a| a.iter().any(|e| e["slot"] == json!(r.slot)
                    && e["text"].as_str().is_some_and(|t| t.contains(&value)))),
            "the request `{}` does not show `{value}`",
            r.slot
        );
    }
    shoot(u, "user-goal.png").await?;
    wizard_has_no_goal(w).await?;
    Ok(())
}

/// The drawn row's values as text, read from the fixture's data file.
fn server_row(
    sg: &wozkit_core::goals::SubGoal,
) -> Result<std::collections::HashMap<String, String>> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../wozkit-core/tests/fixtures/goals-study");
    let study = load_path(&dir).map_err(|e| anyhow!("{e}"))?;
    let db = study.database.as_deref().context("database")?;
    let row = db.select(&sg.table, &sg.row).map_err(|e| anyhow!("{e}"))?;
    Ok(row
        .iter()
        .map(|(k, v)| (k.clone(), wozkit_core::database::value_text(v)))
        .collect())
}
