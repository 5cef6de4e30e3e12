//! End to end on a phone: two phone-sized (390×844) headless browsers (Chromium, then Firefox) enter the
//! built-in `offshore-emergency` study by lab links — consent, instructions, waiting room — and
//! are paired into one room, one as the user and one as the wizard.
//!
//! On every page of the way the page is no wider than the screen, and a page shorter than the
//! screen does not scroll. In the room, for both roles: nothing is wider than the screen, the
//! message box and the Send button are on screen when the room opens and are what a tap there
//! reaches, the wizard's option buttons wrap their text inside the screen's width; the wizard
//! taps its greeting option, then one message each way (typed and sent with the Send button)
//! arrives on the other phone. Then the user's tab leaves the room, and the wizard's banner
//! counts down the time the partner has to come back.
//!
//! Needs both browsers and their drivers (see `main.rs`); fails when one is missing unless
//! `WOZKIT_SKIP_E2E=1`. With `WOZKIT_UPDATE_SCREENSHOTS=1` (or when the files are missing) it
//! writes `docs/screenshots/room-phone-user.png` and `room-phone-wizard.png`.

use crate::browser;
use crate::server;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::json;
use wozkit_core::event::Role;

use browser::{Browser, Driver, screenshot_wanted, write_png};
use server::TestServer;

/// The whole test must end within this time, whatever happens.
const LIMIT: Duration = Duration::from_secs(90);
/// The phone's screen, in CSS pixels.
const PHONE: (u32, u32) = (390, 844);
/// The two participants' lab ids.
const LAB_A: &str = "e2e-phone-a";
const LAB_B: &str = "e2e-phone-b";
/// What each side types on its phone.
const USER_TEXT: &str = "Fred, the alarm light on my console is on. Can you check it?";
const WIZARD_TEXT: &str = "On it, I am looking at the sensor data now.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phones_enter_a_room_and_talk() {
    browser::run_in_both_browsers(
        "end-to-end phone test",
        LIMIT,
        |chromium, chromedriver| async move { run(&chromium, &chromedriver).await },
    )
    .await;
}

/// Starts everything, plays, and always closes the browsers and the server before reporting.
async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let study = server::quick_study()?;
    let mut server = TestServer::start(study).await?;
    let driver = Driver::start(chromium, chromedriver).await?;
    let a = Phone(driver.browser_sized("phone A", PHONE).await?);
    let b = Phone(driver.browser_sized("phone B", PHONE).await?);
    let played = play(&server, &a, &b).await;
    let closed = (a.close().await, b.close().await);
    drop(driver);
    let stopped = server.stop().await;
    played?;
    closed.0?;
    closed.1?;
    stopped
}

async fn play(server: &TestServer, a: &Phone, b: &Phone) -> Result<()> {
    let role_a = enter(a, &server.url(&format!("/join?participant={LAB_A}"))).await?;
    // A is alone: its waiting page is shown until B arrives.
    a.wait_page("waiting").await?;
    a.fits("the waiting page").await?;
    let role_b = enter(b, &server.url(&format!("/join?participant={LAB_B}"))).await?;
    ensure!(
        role_a != role_b,
        "both phones were given the role {role_a:?}"
    );
    let (w, u) = if role_a == Role::Wizard {
        (a, b)
    } else {
        (b, a)
    };
    for p in [w, u] {
        p.wait_page("room").await?;
        p.wait_js(
            "the room's WebSocket",
            "return document.getElementById('room').dataset.connected === 'true'",
            vec![],
        )
        .await?;
    }
    w.wait_js(
        "the wizard's first options",
        "return document.querySelectorAll('#options button.option').length > 0",
        vec![],
    )
    .await?;
    for p in [w, u] {
        p.room_fits().await?;
    }
    w.options_wrap().await?;

    // The user may write once the wizard has spoken: the wizard taps its first option.
    w.click("option-intro_hello").await?;
    u.wait_js(
        "the wizard's greeting in the user's chat",
        "return document.querySelectorAll('#chat li.theirs').length > 0",
        vec![],
    )
    .await?;
    send(u, w, USER_TEXT).await?;
    send(w, u, WIZARD_TEXT).await?;
    for p in [w, u] {
        p.room_fits().await?;
    }
    shoot(u, "room-phone-user.png").await?;
    shoot(w, "room-phone-wizard.png").await?;
    partner_leaves(w, u).await
}

/// The user's tab leaves the room: the wizard's banner says the partner lost the connection and
/// counts down the grace period, second by second.
async fn partner_leaves(w: &Phone, u: &Phone) -> Result<()> {
    // Replaced rather than left by a navigation, so the browser discards the room page as when
    // the tab is closed: a page kept in the back-forward cache may hold its socket open.
    u.js("location.replace('about:blank'); return true", vec![])
        .await?;
    // The countdown's seconds once it shows m:ss below `arguments[0]` (any, when null).
    let script = "const box = document.getElementById('partner-status'); \
                  const c = document.getElementById('partner-countdown'); \
                  if (!box || box.hidden || !c || !box.textContent.includes('lost the connection')) return null; \
                  const m = /^(\\d+):(\\d\\d)$/.exec(c.textContent); \
                  if (!m) return null; \
                  const s = Number(m[1]) * 60 + Number(m[2]); \
                  return (arguments[0] === null || s < arguments[0]) && s > 0 ? s : null";
    let first = w
        .wait_js(
            "the partner-away banner with its countdown",
            script,
            vec![json!(null)],
        )
        .await?;
    let later = w
        .wait_js(
            "the partner-away countdown to go down",
            script,
            vec![first.clone()],
        )
        .await?;
    ensure!(
        later.as_u64() < first.as_u64(),
        "the countdown did not go down: {first} then {later}"
    );
    Ok(())
}

/// Entry link → consent → instructions → waiting room (or straight into the room when the
/// partner is already waiting), checking that each page fits the phone; returns the role shown.
async fn enter(p: &Phone, url: &str) -> Result<Role> {
    p.goto(url).await?;
    p.wait_page("consent").await?;
    p.fits("the consent page").await?;
    p.click("accept").await?;
    p.wait_page("instructions").await?;
    p.fits("the instructions page").await?;
    let role = p
        .wait_js(
            "the role badge",
            "const e = document.querySelector('[data-testid=role]'); return e && e.dataset.role",
            vec![],
        )
        .await?;
    let role = role
        .as_str()
        .and_then(Role::parse)
        .with_context(|| format!("{}: the role badge names no role", p.name))?;
    p.click("continue").await?;
    p.wait_js(
        "the waiting page (or the room)",
        "const m = document.querySelector('main[data-page]'); \
         return !!m && (m.dataset.page === 'waiting' || m.dataset.page === 'room')",
        vec![],
    )
    .await?;
    Ok(role)
}

/// `from` types `text` and taps Send; both chats show it.
async fn send(from: &Phone, to: &Phone, text: &str) -> Result<()> {
    from.type_into("text-input", text).await?;
    from.click("send").await?;
    let line = |cls: &str| {
        format!(
            "return [...document.querySelectorAll('#chat li.{cls} .text')]\
               .some((t) => t.textContent === arguments[0])"
        )
    };
    from.wait_js("my message in my chat", &line("mine"), vec![json!(text)])
        .await?;
    to.wait_js(
        &format!("{}'s message in the chat", from.name),
        &line("theirs"),
        vec![json!(text)],
    )
    .await?;
    let left = from
        .js("return document.getElementById('text-input').value", vec![])
        .await?;
    ensure!(
        left == json!(""),
        "{}: the input was not cleared after sending",
        from.name
    );
    Ok(())
}

/// Writes the viewport to `docs/screenshots/<file>` when asked to (or when it is missing), with
/// the page scrolled to its top, as the room first appears, once its transitions have settled.
async fn shoot(p: &Phone, file: &str) -> Result<()> {
    let Some(path) = screenshot_wanted(file) else {
        return Ok(());
    };
    p.js("window.scrollTo(0, 0); return true", vec![]).await?;
    p.wait_js(
        "the page's transitions to settle",
        "return scrollY === 0 && document.getAnimations().every((a) => a.playState !== 'running')",
        vec![],
    )
    .await?;
    write_png(&p.name, &path, &p.screenshot().await?)
}

/// One participant's phone: a browser of the shared helper with a phone-sized page, and the
/// checks of a phone layout.
struct Phone(Browser);

impl std::ops::Deref for Phone {
    type Target = Browser;
    fn deref(&self) -> &Browser {
        &self.0
    }
}

impl Phone {
    /// The page is no wider than the screen, and scrolls no further down than its content
    /// reaches (a page shorter than the screen does not scroll at all).
    async fn fits(&self, page: &str) -> Result<()> {
        let v = self
            .js(
                "const d = document.documentElement;\
                 const m = document.querySelector('main').getBoundingClientRect();\
                 const cs = getComputedStyle(document.querySelector('main'));\
                 const end = m.bottom + scrollY + parseFloat(cs.marginBottom);\
                 return { width: innerWidth, height: innerHeight, scrollWidth: d.scrollWidth,\
                          scrollHeight: d.scrollHeight, content: Math.ceil(end) }",
                vec![],
            )
            .await?;
        let n = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        ensure!(
            n("width") == f64::from(PHONE.0),
            "{}: the screen is not a phone's {} CSS pixels wide on {page}: {v}",
            self.name,
            PHONE.0
        );
        ensure!(
            n("scrollWidth") <= n("width"),
            "{}: {page} is wider than the {}-pixel screen: {v}",
            self.name,
            PHONE.0
        );
        ensure!(
            n("scrollHeight") <= n("height").max(n("content")),
            "{}: {page} scrolls further down than its content: {v}",
            self.name
        );
        Ok(())
    }

    /// The room on the phone, as it first appears (scrolled to the top): no element sticks out
    /// of the screen's width (a map marker's positioning box is left out: Firefox counts the
    /// marker's overflow into it, and what it draws is checked itself), the message box and Send are on screen and are what a tap at
    /// their middle reaches.
    async fn room_fits(&self) -> Result<()> {
        self.fits("the room").await?;
        self.js("window.scrollTo(0, 0); return true", vec![])
            .await?;
        let wide = self
            .js(
                "const out = [];\
                 for (const e of document.querySelectorAll('#room *:not(svg svg)')) {\
                   const r = e.getBoundingClientRect();\
                   if (r.width === 0 && r.height === 0) continue;\
                   if (r.left < -0.5 || r.right > innerWidth + 0.5)\
                     out.push(`${e.tagName.toLowerCase()}#${e.id}.${e.className} ${Math.round(r.left)}..${Math.round(r.right)}`);\
                 }\
                 return out",
                vec![],
            )
            .await?;
        ensure!(
            wide.as_array().is_some_and(Vec::is_empty),
            "{}: elements of the room stick out of the {}-pixel screen: {wide}",
            self.name,
            PHONE.0
        );
        for id in ["text-input", "send"] {
            let v = self
                .js(
                    "const e = document.getElementById(arguments[0]);\
                     const r = e.getBoundingClientRect();\
                     const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);\
                     return { left: r.left, top: r.top, right: r.right, bottom: r.bottom,\
                              width: r.width, height: r.height,\
                              reached: !!hit && (hit === e || e.contains(hit)) }",
                    vec![json!(id)],
                )
                .await?;
            let n = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
            ensure!(
                n("left") >= 0.0
                    && n("top") >= 0.0
                    && n("right") <= f64::from(PHONE.0)
                    && n("bottom") <= f64::from(PHONE.1),
                "{}: #{id} is not on the screen when the room opens: {v}",
                self.name
            );
            // A finger needs room: at least 40 pixels each way (WCAG asks for 24).
            ensure!(
                n("width") >= 40.0 && n("height") >= 40.0,
                "{}: #{id} is too small to tap: {v}",
                self.name
            );
            ensure!(
                v["reached"] == json!(true),
                "{}: a tap on #{id} reaches another element: {v}",
                self.name
            );
        }
        Ok(())
    }

    /// The wizard's option buttons fit the screen's width with their text wrapped inside.
    async fn options_wrap(&self) -> Result<()> {
        let v = self
            .js(
                "return [...document.querySelectorAll('#options button.option, #fixed button')]\
                   .map((b) => { const r = b.getBoundingClientRect();\
                     return { id: b.dataset.testid, left: r.left, right: r.right,\
                              clipped: b.scrollWidth > b.clientWidth }; })",
                vec![],
            )
            .await?;
        let buttons = v
            .as_array()
            .with_context(|| format!("{}: option buttons", self.name))?;
        ensure!(!buttons.is_empty(), "{}: no option buttons", self.name);
        for b in buttons {
            let n = |k: &str| b[k].as_f64().unwrap_or(f64::NAN);
            ensure!(
                n("left") >= 0.0
                    && n("right") <= f64::from(PHONE.0)
                    && b["clipped"] == json!(false),
                "{}: an option button does not fit the screen: {b}",
                self.name
            );
        }
        Ok(())
    }

    async fn close(self) -> Result<()> {
        self.0.close().await
    }
}
