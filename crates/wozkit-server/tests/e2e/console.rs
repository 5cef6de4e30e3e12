//! End to end through the researcher console: a researcher (an account created in the store)
//! logs in with a browser and sees the console's figures (also on a phone-sized screen, with no
//! sideways scroll); two other browsers enter the built-in `offshore-emergency` study by lab
//! links and are paired as user and wizard; the researcher observes the room live (a message the
//! user types shows in the observer's user view, an option the wizard chooses in its wizard
//! view); the wizard closes their browser, the researcher takes over as wizard and plays the
//! session to its terminal state, and the user and the researcher answer the questionnaire and
//! get their completion codes. The researcher then replays the session (the scrubber at the start
//! shows an empty transcript, stepping and playing show events, the last step the final world)
//! and, on the review page, approves the user and gives the wizard who left a bonus.
//!
//! Then the logs are checked: `TakenOver` names the researcher's account; the study's review log
//! holds the approval and the bonus, each by that account; the payment table shows the bonus to
//! the cent and the approval.
//!
//! Needs both browsers and their drivers (see `main.rs`); fails when one is missing unless
//! `WOZKIT_SKIP_E2E=1`. With `WOZKIT_UPDATE_SCREENSHOTS=1` (or when the files are missing) it
//! writes `docs/screenshots/console-home.png`, `console-observe.png`, `console-takeover.png`,
//! `console-replay.png` and `console-review.png` at 1366×768.

use crate::browser;
use crate::server;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::json;
use wozkit_core::event::{EndReason, Event, EventKind, ReviewAction, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_server::auth::Access;
use wozkit_store::{Account, Platform};

use browser::{Browser, Driver, close_all, shoot_settled};
use server::{STUDY, TestServer};

/// The whole test must end within this time, whatever happens.
const LIMIT: Duration = Duration::from_secs(240);
/// A phone's screen, in CSS pixels.
const PHONE: (u32, u32) = (390, 844);
/// The researcher's account.
const ACCOUNT: &str = "e2e-researcher";
const PASSWORD: &str = "console-e2e-password";
/// The participants' lab ids.
const LAB_A: &str = "e2e-console-a";
const LAB_B: &str = "e2e-console-b";
/// The bonus given on the review page, as typed and in cents.
const BONUS: &str = "1.35";
const BONUS_CENTS: u64 = 135;
const BONUS_REASON: &str = "Stayed with the operator through the alarm";
/// What the user types while the researcher observes.
const USER_SAYS: &str = "Fred, there is an alarm light on my console. What is going on?";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_researcher_observes_takes_over_replays_and_reviews() {
    browser::run_in_both_browsers(
        "end-to-end console test",
        LIMIT,
        |chromium, chromedriver| async move { run(&chromium, &chromedriver).await },
    )
    .await;
}

/// What the browsers did that the logs must hold.
#[derive(Debug, Default)]
struct Done {
    session: String,
    /// The store's participant ids of the user and of the wizard who left.
    user: String,
    wizard: String,
}

async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    // One variant of the study's emergency with quick robot actions: this test is about the
    // console.
    let study = server::quick_study()?;
    let mut server = TestServer::start(study.clone()).await?;
    let (account, _) = wozkit_server::auth::add_account(
        server.store.as_ref(),
        ACCOUNT,
        Access::Researcher,
        Some(PASSWORD),
    )
    .await
    .map_err(|e| anyhow!("creating the account {ACCOUNT}: {e:?}"))?;
    let driver = Driver::start(chromium, chromedriver).await?;
    let r = driver.browser("the researcher").await?;
    let a = driver.browser("browser A (lab link)").await?;
    let b = driver.browser("browser B (lab link)").await?;
    let phone = driver
        .browser_sized("the researcher's phone", PHONE)
        .await?;
    let done = play(&server, &study, &r, &phone, a, b).await;
    let checked = match &done {
        Ok(d) => check(&server, &study, &account, d).await,
        Err(_) => Ok(()),
    };
    let closed = close_all([r, phone]).await;
    drop(driver);
    let stopped = server.stop().await;
    done?;
    checked?;
    closed?;
    stopped
}

async fn play(
    server: &TestServer,
    study: &LoadedStudy,
    r: &Browser,
    phone: &Browser,
    a: Browser,
    b: Browser,
) -> Result<Done> {
    // The console home, with the study's figures; on a phone too, without sideways scroll.
    for br in [r, phone] {
        log_in(server, br).await?;
        br.wait_js(
            "the study's card with its figures",
            "const c = document.querySelector(`.study-card[data-study=\"${arguments[0]}\"]`); \
             return !!c && ['waiting_users', 'waiting_wizards', 'live', 'finished', 'codes'] \
               .every((k) => /^\\d+$/.test((c.querySelector(`[data-figure=${k}]`) || {}).textContent || ''))",
            vec![json!(STUDY)],
        )
        .await?;
    }
    no_sideways_scroll(phone, "the console home").await?;

    // Two participants are paired.
    let role_a = enter(&a, &server.url(&format!("/join?participant={LAB_A}"))).await?;
    let role_b = enter(&b, &server.url(&format!("/join?participant={LAB_B}"))).await?;
    ensure!(
        role_a != role_b,
        "both browsers were given the role {role_a:?}"
    );
    let (w, u, w_lab, u_lab) = if role_a == Role::Wizard {
        (a, b, LAB_A, LAB_B)
    } else {
        (b, a, LAB_B, LAB_A)
    };
    for br in [&w, &u] {
        br.wait_page("room").await?;
        wait_connected(br).await?;
    }
    let participant = |lab: &'static str| async move {
        server
            .store
            .participant_by_worker(STUDY, Platform::Lab, lab)
            .await
            .map_err(|e| anyhow!("store: {e}"))?
            .with_context(|| format!("no participant {lab}"))
    };
    let user_p = participant(u_lab).await?;
    let wizard_p = participant(w_lab).await?;
    let session = user_p
        .session_id
        .clone()
        .context("the user has no session")?;
    ensure!(
        wizard_p.session_id.as_deref() == Some(session.as_str()),
        "the two participants are in different sessions"
    );
    say(&w, &u, "intro_hello").await?;

    // The researcher observes: what each side does shows in its view as it happens.
    r.goto(&server.url(&format!("/researcher/session/{session}/observe")))
        .await?;
    r.wait_js(
        "the observer's socket",
        "return document.getElementById('observe').dataset.connected === 'true'",
        vec![],
    )
    .await?;
    frame_chat(r, "user", "the greeting in the user's view", "Fred").await?;
    r.check_accessible("observe (console)").await?;
    u.type_into("text-input", USER_SAYS).await?;
    u.click("send").await?;
    frame_chat(
        r,
        "user",
        "the user's message in the user's view",
        USER_SAYS,
    )
    .await?;
    let said = say(&w, &u, "inform_alert_emergency").await?;
    frame_chat(
        r,
        "wizard",
        "the wizard's option in the wizard's view",
        &said,
    )
    .await?;
    r.wait_js(
        "the wizard's view to label the option it chose",
        "const d = document.getElementById('observe-wizard').contentDocument; \
         return !!d && [...d.querySelectorAll('#chat li')].some((li) => \
           (li.querySelector('.text') || {}).textContent === arguments[0] && li.querySelector('.act'))",
        vec![json!(said)],
    )
    .await?;
    r.wait_js(
        "both seats connected",
        "return document.getElementById('take-over-form').hidden \
           && document.getElementById('observe-seats').dataset.wizard === 'here'",
        vec![],
    )
    .await?;
    shoot_settled(r, "console-observe.png").await?;

    // The wizard closes their browser; the observer may take over, and does.
    w.close().await?;
    u.wait_js(
        "the user to be told the partner left",
        "const p = document.getElementById('partner-status'); return !!p && !p.hidden",
        vec![],
    )
    .await?;
    r.wait_js(
        "the take-over button",
        "return !document.getElementById('take-over-form').hidden \
           && document.getElementById('observe-seats').dataset.wizard !== 'here'",
        vec![],
    )
    .await?;
    r.click("take-over").await?;
    r.wait_page("room").await?;
    let seat = r
        .wait_js(
            "the researcher in the wizard's room",
            "const m = document.getElementById('room'); \
             return m && m.dataset.connected === 'true' ? m.dataset.role : null",
            vec![],
        )
        .await?;
    ensure!(
        seat == json!("wizard"),
        "the researcher was seated as {seat}"
    );
    // The researcher's room has the session so far.
    r.wait_chat("the user's message in the taken-over room", |l| {
        l.text == USER_SAYS
    })
    .await?;
    u.wait_js(
        "the user to see the wizard back",
        "const p = document.getElementById('partner-status'); return !p || p.hidden",
        vec![],
    )
    .await?;
    play_to_the_end(study, r, &u).await?;

    // The user finishes: questionnaire and completion code. The researcher goes back to the
    // session's page in the console: the questionnaire is the participants'.
    for br in [r, &u] {
        br.wait_js(
            "the end banner",
            "const b = document.getElementById('end-banner'); \
             return !!b && !b.hidden && b.textContent.includes('The conversation has ended')",
            vec![],
        )
        .await?;
        br.click("continue-after-end").await?;
    }
    r.wait_js(
        "the session's page in the console, not the questionnaire",
        "return location.pathname === arguments[0] && !!document.getElementById('replay-link')",
        vec![json!(format!("/researcher/session/{session}"))],
    )
    .await?;
    u.wait_page("survey").await?;
    fill_survey(&u).await?;
    u.click("survey-submit").await?;
    u.wait_page("completion").await?;
    let code = u.text("completion-code").await?;
    ensure!(!code.is_empty(), "{}: empty completion code", u.name);
    u.close().await?;

    replay(server, r, &session).await?;
    review(server, r, &user_p.id, &wizard_p.id).await?;

    // The console home again, now with a finished session.
    r.goto(&server.url("/researcher")).await?;
    r.wait_js(
        "the finished session in the study's figures",
        "const c = document.querySelector(`.study-card[data-study=\"${arguments[0]}\"]`); \
         return !!c && c.querySelector('[data-figure=finished]').textContent === '1'",
        vec![json!(STUDY)],
    )
    .await?;
    r.check_accessible("home (console)").await?;
    shoot_settled(r, "console-home.png").await?;
    Ok(Done {
        session,
        user: user_p.id,
        wizard: wizard_p.id,
    })
}

/// The researcher logs in on the login page and lands on the console home.
async fn log_in(server: &TestServer, br: &Browser) -> Result<()> {
    br.goto(&server.url("/researcher/login?next=/researcher"))
        .await?;
    // The account field starts empty (`admin` is only its placeholder): typing a name is
    // not appended to a default.
    let prefilled = br
        .js("return document.getElementById('name').value", vec![])
        .await?;
    ensure!(
        prefilled == json!(""),
        "the login page's account field is prefilled with {prefilled}"
    );
    br.check_accessible("login (console)").await?;
    br.type_into_css("#name", ACCOUNT).await?;
    br.type_into_css("#password", PASSWORD).await?;
    click_css(br, "#login").await?;
    br.wait_js(
        "the console home",
        "return location.pathname === '/researcher' && !!document.getElementById('overview')",
        vec![],
    )
    .await?;
    Ok(())
}

/// Clicks the element the CSS selector finds, once it is there and enabled.
async fn click_css(br: &Browser, sel: &str) -> Result<()> {
    br.wait_js(
        &format!("an enabled {sel} to click"),
        "const e = document.querySelector(arguments[0]); \
         if (!e || e.disabled) return false; e.click(); return true",
        vec![json!(sel)],
    )
    .await
    .map(drop)
}

async fn no_sideways_scroll(br: &Browser, what: &str) -> Result<()> {
    let v = br
        .js(
            "return [innerWidth, document.documentElement.scrollWidth, document.body.scrollWidth]",
            vec![],
        )
        .await?;
    let s: Vec<u64> = serde_json::from_value(v)?;
    ensure!(
        s[0] == u64::from(PHONE.0),
        "{}: the viewport is {} wide, not {}",
        br.name,
        s[0],
        PHONE.0
    );
    ensure!(
        s[1] <= s[0] && s[2] <= s[0],
        "{}: {what} scrolls sideways on a {}-pixel screen (page {} / body {} wide)",
        br.name,
        s[0],
        s[1],
        s[2]
    );
    Ok(())
}

async fn wait_connected(br: &Browser) -> Result<()> {
    br.wait_js(
        "the room's WebSocket",
        "return document.getElementById('room').dataset.connected === 'true'",
        vec![],
    )
    .await
    .map(drop)
}

/// Entry link → consent → instructions → waiting room or room; returns the role shown.
async fn enter(br: &Browser, url: &str) -> Result<Role> {
    br.goto(url).await?;
    br.wait_page("consent").await?;
    br.click("accept").await?;
    br.wait_page("instructions").await?;
    let role = br
        .wait_js(
            "the role badge",
            "const e = document.querySelector('[data-testid=role]'); return e && e.dataset.role",
            vec![],
        )
        .await?;
    let role = role
        .as_str()
        .and_then(Role::parse)
        .context("the role badge names no role")?;
    br.click("continue").await?;
    br.wait_js(
        "the waiting page (or the room)",
        "const m = document.querySelector('main[data-page]'); \
         return !!m && (m.dataset.page === 'waiting' || m.dataset.page === 'room')",
        vec![],
    )
    .await?;
    Ok(role)
}

/// The wizard `w` clicks the option `state`; the user sees the message. Returns its text.
async fn say(w: &Browser, u: &Browser, state: &str) -> Result<String> {
    let (w_before, u_before) = (w.chat().await?.len(), u.chat().await?.len());
    w.click(&format!("option-{state}")).await?;
    let line = w
        .wait_chat_after(w_before, &format!("the wizard's `{state}` message"), |l| {
            l.cls.contains("mine") && l.act.is_some()
        })
        .await?;
    u.wait_chat_after(u_before, &format!("the user to see `{state}`"), |l| {
        l.cls.contains("theirs") && l.text == line.text
    })
    .await?;
    Ok(line.text)
}

/// Waits until the observer's `role` view shows a chat line whose speaker or text is `needle`.
async fn frame_chat(r: &Browser, role: &str, what: &str, needle: &str) -> Result<()> {
    r.wait_js(
        what,
        "const d = document.getElementById(`observe-${arguments[0]}`).contentDocument; \
         return !!d && [...d.querySelectorAll('#chat li')].some((li) => \
           [(li.querySelector('.who') || {}).textContent, (li.querySelector('.text') || {}).textContent] \
             .includes(arguments[1]))",
        vec![json!(role), json!(needle)],
    )
    .await
    .map(drop)
}

/// The wizard `w` starts a robot action in the action panel and waits for it to start.
async fn act(w: &Browser, action: &str, robot: &str, target: Option<&str>) -> Result<()> {
    let started = |lines: &[browser::ChatLine]| {
        lines
            .iter()
            .filter(|l| l.cls.contains("sys") && l.text.ends_with("started"))
            .count()
    };
    let before = started(&w.chat().await?);
    w.select("action-select", action).await?;
    w.select("robot-select", robot).await?;
    if let Some(t) = target {
        w.select("target-select", t).await?;
    }
    w.click("action-send").await?;
    browser::until(
        &format!("`{action}` by {robot} to start"),
        browser::WAIT,
        || async { Ok((started(&w.chat().await?) > before).then_some(())) },
    )
    .await
}

/// Both pages show the media file `file`, loaded.
async fn wait_media(w: &Browser, u: &Browser, file: &str) -> Result<()> {
    for br in [w, u] {
        br.wait_js(
            &format!("the media {file} to be shown"),
            "const m = document.querySelector('[data-testid=media]');\
             return !!m && (m.getAttribute('src') || '').endsWith(arguments[0]) && m.complete",
            vec![json!(file)],
        )
        .await?;
    }
    Ok(())
}

/// The researcher, as wizard, plays the study's scenario to its terminal state.
async fn play_to_the_end(study: &LoadedStudy, r: &Browser, u: &Browser) -> Result<()> {
    ensure!(
        study
            .study
            .states
            .iter()
            .any(|s| s.id == "inform_mission_completed"),
        "the study has no state `inform_mission_completed`"
    );
    say(r, u, "request_pa_announcement").await?;
    u.click("approve").await?;
    r.wait_chat("the approval", |l| {
        l.cls.contains("sys") && l.text == "Approved"
    })
    .await?;
    say(r, u, "request_robot_type").await?;
    act(r, "send", "qdc1", Some("pu_et")).await?;
    shoot_settled(r, "console-takeover.png").await?;
    say(r, u, "inform_arrival").await?;
    say(r, u, "inform_inspection").await?;
    act(r, "inspect", "qdc1", None).await?;
    wait_media(r, u, "quad_inspect.gif").await?;
    say(r, u, "inform_emergency_status").await?;
    say(r, u, "request_robot_emergency").await?;
    act(r, "send", "qdc2", Some("pu_et")).await?;
    say(r, u, "inform_arrival").await?;
    say(r, u, "inform_emergency_action").await?;
    act(r, "extinguish", "qdc2", None).await?;
    wait_media(r, u, "quad_extinguish.gif").await?;
    say(r, u, "inform_emergency_solved").await?;
    say(r, u, "request_robot_inspect_damage").await?;
    say(r, u, "inform_damage_inspection").await?;
    act(r, "assess", "qdc2", None).await?;
    wait_media(r, u, "quad_assess.gif").await?;
    say(r, u, "inform_risk").await?;
    say(r, u, "inform_mission_completed").await?;
    Ok(())
}

/// Answers every Likert item of the questionnaire with its middle point.
async fn fill_survey(br: &Browser) -> Result<()> {
    let questions = br
        .js(
            "return [...document.querySelectorAll('fieldset.question')].map((f) => ({\
               id: f.dataset.testid.replace(/^question-/, ''),\
               points: f.querySelectorAll('.likert input[type=radio]').length }))",
            vec![],
        )
        .await?;
    let questions = questions.as_array().context("questions")?.clone();
    ensure!(
        !questions.is_empty(),
        "{}: the questionnaire has no questions",
        br.name
    );
    for q in &questions {
        let id = q["id"].as_str().context("question id")?;
        let points = q["points"].as_u64().unwrap_or(0);
        if points > 0 {
            br.click(&format!("{id}-{}", points.div_ceil(2))).await?;
        }
    }
    Ok(())
}

/// Moves the replay's scrubber to `k` as a person dragging it would (its `input` event).
async fn scrub(r: &Browser, k: u64) -> Result<()> {
    r.js(
        "const s = document.getElementById('replay-scrubber'); s.value = String(arguments[0]); \
         s.dispatchEvent(new Event('input', { bubbles: true })); return true",
        vec![json!(k)],
    )
    .await
    .map(drop)
}

/// The replay: the start is empty, stepping and playing show the log's events, the last step
/// the session's end.
async fn replay(server: &TestServer, r: &Browser, session: &str) -> Result<()> {
    let events = server
        .store
        .events(session, 0)
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    let total = events.len() as u64;
    ensure!(total > 10, "the session logged only {total} events");
    r.goto(&server.url(&format!("/researcher/session/{session}/replay")))
        .await?;
    r.wait_js(
        "the replay's steps loaded",
        "const m = document.getElementById('replay'); \
         return m.dataset.complete === 'true' && m.dataset.total === String(arguments[0])",
        vec![json!(total)],
    )
    .await?;
    r.check_accessible("replay (console)").await?;

    // The last step first, then back to the start.
    scrub(r, total).await?;
    let milestones: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Milestone { subtask, .. } => Some(subtask.clone()),
            _ => None,
        })
        .collect();
    ensure!(
        milestones.len() == 3,
        "the log has milestones {milestones:?}"
    );
    let last_kind = kind_of(events.last().context("no events")?);
    r.wait_js(
        "the last step with the final world",
        "const w = document.getElementById('replay-world'); \
         const s = document.getElementById('replay-step'); \
         const t = (document.getElementById('replay-overview') || {}).textContent || ''; \
         return w.dataset.step === String(arguments[0]) && s.dataset.kind === arguments[1] \
           && t.includes('ended: terminal (goal reached)') \
           && arguments[2].every((m) => t.includes(m)) \
           && [...document.querySelectorAll('#replay-transcript li .text')] \
                .some((e) => e.textContent === arguments[3])",
        vec![
            json!(total),
            json!(last_kind),
            json!(milestones),
            json!(USER_SAYS),
        ],
    )
    .await?;
    // Nothing unset or missing shows as a script's word for it.
    let stray = r
        .js(
            "return document.getElementById('replay').innerText.match(/\\b(null|undefined|NaN)\\b/g) || []",
            vec![],
        )
        .await?;
    ensure!(
        stray == json!([]),
        "the replay shows {stray} at its last step"
    );
    shoot_settled(r, "console-replay.png").await?;
    scrub(r, 0).await?;
    r.wait_js(
        "an empty transcript at the start",
        "const o = document.getElementById('replay-transcript'); \
         return document.getElementById('replay-step').dataset.step === '0' \
           && o.children.length === 0 \
           && ((document.getElementById('replay-overview') || {}).textContent || '').includes('not started')",
        vec![],
    )
    .await?;
    r.click("replay-forward").await?;
    let first = kind_of(&events[0]);
    r.wait_js(
        "the first event after one step",
        "const s = document.getElementById('replay-step'); \
         return s.dataset.step === '1' && s.dataset.seq === '1' && s.dataset.kind === arguments[0]",
        vec![json!(first)],
    )
    .await?;
    // Playing moves on through the events and fills the transcript; pausing stops it.
    r.click("replay-play").await?;
    r.wait_js(
        "playing to show events in the transcript",
        "return document.getElementById('replay-transcript').children.length > 0 \
           && Number(document.getElementById('replay-step').dataset.step) > 1",
        vec![],
    )
    .await?;
    r.click("replay-play").await?;
    r.wait_js(
        "the replay paused",
        "return document.getElementById('replay-play').textContent === 'Play'",
        vec![],
    )
    .await?;
    Ok(())
}

fn kind_of(e: &Event) -> String {
    serde_json::to_value(&e.kind)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Records one decision about participant `p` with its row's form on the review page.
async fn decide(r: &Browser, p: &str, action: &str, amount: &str, reason: &str) -> Result<()> {
    let prefix = format!("row-{p}");
    r.wait_js(
        &format!("the decide form of {p}"),
        "const f = [...document.querySelectorAll('form.row-decide')] \
           .find((f) => f.querySelector('input[name=p]').value === arguments[0]); \
         if (!f) return false; f.closest('details').open = true; \
         window.wozkitBefore = true; return true",
        vec![json!(p)],
    )
    .await?;
    r.js(
        "const s = document.getElementById(arguments[0]); s.value = arguments[1]; \
         s.dispatchEvent(new Event('change', { bubbles: true })); return s.value",
        vec![json!(format!("{prefix}-action")), json!(action)],
    )
    .await?;
    if !amount.is_empty() {
        r.type_into_css(&format!("[id=\"{prefix}-amount\"]"), amount)
            .await?;
    }
    if !reason.is_empty() {
        r.type_into_css(&format!("[id=\"{prefix}-reason\"]"), reason)
            .await?;
    }
    r.js(
        "document.getElementById(arguments[0]).closest('form').querySelector('button[type=submit]').click(); return true",
        vec![json!(format!("{prefix}-action"))],
    )
    .await?;
    r.wait_js(
        "the decision recorded",
        "return !window.wozkitBefore && !!document.getElementById('review-done')",
        vec![],
    )
    .await?;
    Ok(())
}

async fn review(server: &TestServer, r: &Browser, user: &str, wizard: &str) -> Result<()> {
    r.goto(&server.url(&format!("/researcher/study/{STUDY}/review")))
        .await?;
    r.wait_js(
        "the review rows",
        "return !!document.getElementById('review-rows')",
        vec![],
    )
    .await?;
    r.check_accessible("review (console)").await?;
    decide(r, user, "approve", "", "").await?;
    decide(r, wizard, "bonus", BONUS, BONUS_REASON).await?;
    r.js(
        "for (const d of document.querySelectorAll('details.decide')) d.open = false; \
         scrollTo(0, 0); return true",
        vec![],
    )
    .await?;
    shoot_settled(r, "console-review.png").await?;
    Ok(())
}

/// The logs against what the browsers did.
async fn check(
    server: &TestServer,
    study: &LoadedStudy,
    account: &Account,
    d: &Done,
) -> Result<()> {
    let store = server.store.as_ref();
    let events = store
        .events(&d.session, 0)
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    let mut problems: Vec<String> = vec![];
    let taken: Vec<(&Role, &String, &String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TakenOver {
                role,
                researcher,
                participant,
            } => Some((role, researcher, participant)),
            _ => None,
        })
        .collect();
    match taken.as_slice() {
        [(role, researcher, participant)] => {
            if **role != Role::Wizard || **researcher != account.id || **participant == d.wizard {
                problems.push(format!(
                    "TakenOver names role {role:?}, researcher {researcher}, participant \
                     {participant}; expected the wizard's seat, account {} and a seat of its own",
                    account.id
                ));
            }
        }
        other => problems.push(format!("expected one TakenOver, got {other:?}")),
    }
    let ended = events.iter().any(|e| {
        matches!(
            e.kind,
            EventKind::SessionEnded {
                reason: EndReason::Terminal,
                goal_reached: true
            }
        )
    });
    if !ended {
        problems.push("the session did not end in its terminal state".into());
    }
    let issued = |role: Role| {
        events.iter().any(|e| {
            matches!(&e.kind, EventKind::CompletionIssued { role: r, no_partner: false, .. } if *r == role)
        })
    };
    if !issued(Role::User) {
        problems.push("no completion code issued to the user".into());
    }
    // The researcher in the wizard's seat went back to the console: no code, no questionnaire.
    if issued(Role::Wizard) {
        problems
            .push("a completion code was issued in the wizard's seat (the researcher's)".into());
    }

    // The review log: an approval and a bonus, both by the researcher's account.
    let reviewed = wozkit_server::review::read(store, STUDY)
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    let by_account = |p: &str, action: ReviewAction| {
        reviewed.get(p).is_some_and(|rv| {
            rv.history.iter().any(|e| match &e.kind {
                EventKind::Reviewed(x) => {
                    x.action == action
                        && x.researcher == account.id
                        && (action != ReviewAction::Bonus
                            || (x.cents == Some(BONUS_CENTS) && x.reason == BONUS_REASON))
                }
                _ => false,
            })
        })
    };
    if !by_account(&d.user, ReviewAction::Approve) {
        problems.push(format!(
            "the review log has no approval of the user by account {}: {:?}",
            account.id,
            reviewed.get(&d.user)
        ));
    }
    if !by_account(&d.wizard, ReviewAction::Bonus) {
        problems.push(format!(
            "the review log has no bonus of {BONUS_CENTS} cents ({BONUS_REASON:?}) for the wizard by account {}: {:?}",
            account.id,
            reviewed.get(&d.wizard)
        ));
    }

    // The payment table: the bonus to the cent, the approval.
    let study = Arc::new(study.clone());
    let study_of = move |id: &str| (id == STUDY).then(|| study.clone());
    let rows = wozkit_data::records::payments::payments(store, Some(STUDY), &study_of, false)
        .await
        .map_err(|e| anyhow!("payment table: {e}"))?;
    let row = |p: &str| rows.iter().find(|r| r.participant == p);
    match row(&d.wizard) {
        Some(w) => {
            let cents = (w.review_bonus * 100.0).round() as i64;
            let total = ((w.total_with_bonus - w.total) * 100.0).round() as i64;
            if cents != BONUS_CENTS as i64 || total != BONUS_CENTS as i64 {
                problems.push(format!(
                    "the payment table's wizard row has review_bonus {} and total_with_bonus {} over total {}, not a bonus of {BONUS}",
                    w.review_bonus, w.total_with_bonus, w.total
                ));
            }
        }
        None => problems.push("the payment table has no row for the wizard who left".into()),
    }
    match row(&d.user) {
        Some(u) if u.decision == "approve" && u.review_bonus == 0.0 => {}
        other => problems.push(format!(
            "the payment table's user row should say approve with no bonus: {other:?}"
        )),
    }
    let by_role: HashMap<&str, usize> = rows.iter().fold(HashMap::new(), |mut m, r| {
        *m.entry(r.role.as_str()).or_default() += 1;
        m
    });
    if by_role.get("user").copied().unwrap_or(0) != 1 {
        problems.push(format!("the payment table's roles: {by_role:?}"));
    }

    if problems.is_empty() {
        return Ok(());
    }
    bail!(
        "the logs miss what the browsers did:\n  - {}",
        problems.join("\n  - ")
    )
}
