//! End to end: two real headless Chromium browsers (then two Firefox ESR browsers) play one whole session of the built-in
//! `offshore-emergency` study through the participant pages — entry link, consent, instructions,
//! waiting room, pairing, the room (wizard options, a fixed option, an approval, free text both
//! ways, robot actions with milestone media), the terminal state (the room stays with the end
//! banner until Continue), the questionnaire and the completion code — and then the session's event log is checked against what the browsers did.
//! On the way: the action panel says that nothing is possible before the alarm and then opens on
//! a combination the engine accepts (a robot sent to the fire), an offered text that names the
//! time left keeps it current as the clock runs, and the map's alarm clears once the fire is out.
//!
//! Needs Debian's `chromium` and `chromium-driver` (scripts/test-all.sh installs them); fails
//! when they are missing unless `WOZKIT_SKIP_E2E=1`. With `WOZKIT_UPDATE_SCREENSHOTS=1` (or when
//! the files are missing) it writes the wizard's and the operator's room at 1366×768 to
//! `docs/screenshots/`.

use crate::browser;
use crate::log;
use crate::server;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use wozkit_core::event::Role;
use wozkit_core::load::LoadedStudy;
use wozkit_store::Platform;

use browser::{Browser, ChatLine, Driver, WINDOW, screenshot_wanted, settle, write_png};
use log::{Played, Said};
use server::TestServer;

/// The whole test must end within this time, whatever happens.
const LIMIT: Duration = Duration::from_secs(110);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_browsers_play_a_whole_session() {
    browser::run_in_both_browsers(
        "end-to-end browser test",
        LIMIT,
        |browser, driver| async move { run(&browser, &driver).await },
    )
    .await;
}

/// Starts everything, plays, and always closes the browsers and the server before reporting.
async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let study = server::quick_study()?;
    let mut server = TestServer::start(study.clone()).await?;
    let driver = Driver::start(chromium, chromedriver).await?;
    let a = driver.browser("browser A (Prolific link)").await?;
    let b = driver.browser("browser B (lab link)").await?;
    let played = play(&server, &study, &a, &b).await;
    let checked = match &played {
        Ok(p) => log::check(&server, &study, p).await,
        Err(_) => Ok(()),
    };
    let closed = (a.close().await, b.close().await);
    drop(driver);
    let stopped = server.stop().await;
    played?;
    checked?;
    closed.0?;
    closed.1?;
    stopped
}

const PROLIFIC_PID: &str = "5f1e2e0000000000000000a1";
const LAB_ID: &str = "e2e-lab-b";

/// Entry link → consent → instructions → waiting room (or straight into the room when a
/// partner is already waiting); returns the role shown.
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
    // The second to arrive may be paired before its waiting page is ever polled: the room is
    // as good.
    br.wait_js(
        "the waiting page (or the room)",
        "const m = document.querySelector('main[data-page]'); \
         return !!m && (m.dataset.page === 'waiting' || m.dataset.page === 'room')",
        vec![],
    )
    .await?;
    Ok(role)
}

async fn play(
    server: &TestServer,
    study: &LoadedStudy,
    a: &Browser,
    b: &Browser,
) -> Result<Played> {
    let role_a = enter(
        a,
        &server.url(&format!(
            "/join?PROLIFIC_PID={PROLIFIC_PID}&STUDY_ID=e2e-study&SESSION_ID=e2e-1"
        )),
    )
    .await?;
    // The status keeps the study's own words for the wait, with the time waited after them.
    let flow = &study.study.flow;
    let pages = if role_a == Role::Wizard {
        &flow.wizard
    } else {
        &flow.user
    };
    let words = pages
        .iter()
        .find(|p| p.kind == wozkit_core::model::PageKind::Waiting)
        .and_then(|p| p.title.clone())
        .context("the study's waiting page has no title")?;
    a.wait_js(
        "the waiting time after the study's words",
        "const t = document.querySelector('[data-testid=waiting-status]').textContent; \
         return t.startsWith(arguments[0]) && /\\d+:\\d\\d \\(at most \\d+:\\d\\d\\)$/.test(t)",
        vec![json!(words)],
    )
    .await?;
    let role_b = enter(b, &server.url(&format!("/join?participant={LAB_ID}"))).await?;
    ensure!(
        role_a != role_b,
        "both browsers were given the role {role_a:?}"
    );
    let (w, u) = if role_a == Role::Wizard {
        (a, b)
    } else {
        (b, a)
    };
    for br in [w, u] {
        br.wait_page("room").await?;
        br.wait_js(
            "the room's WebSocket",
            "return document.getElementById('room').dataset.connected === 'true'",
            vec![],
        )
        .await?;
    }
    let room = Room { study, w, u };
    let mut p = Played::default();

    p.said.push(room.say("intro_hello").await?);
    // Nothing can be done with the robots before the alarm: the panel says so.
    room.panel_has_nothing_possible().await?;
    // The clock runs from the greeting: the offered alarm text names the time left and keeps it
    // current.
    room.clock_text_runs("inform_alert_emergency").await?;
    p.user_text.push(
        room.user_types("Fred, there is an alarm light on my console. What is going on?")
            .await?,
    );
    p.said.push(room.say("inform_alert_emergency").await?);
    room.wait_media("alarm.gif").await?;
    // The panel opens on a robot the engine would send now, to the fire.
    room.panel_opens_on_a_possible_send().await?;
    room.alarm_on_map(false).await?;
    p.wizard_text = room
        .wizard_types("Stand by, I am pulling up the sensor data for that tower.")
        .await?;
    p.said.push(room.say("request_pa_announcement").await?);
    u.click("approve").await?;
    w.wait_chat("the approval", |l| {
        l.cls.contains("sys") && l.text == "Approved"
    })
    .await?;
    p.said.push(room.say("request_robot_type").await?);
    p.user_text.push(
        room.user_types("Send quadcopter 1 to the east tower, it is the fastest.")
            .await?,
    );
    p.fixed = room.fixed("okay").await?;

    // Subtask 1: the quadcopter flies out and inspects; the milestone shows a GIF to both.
    room.robot_on_map("qdc1", "base").await?;
    room.act("send", "qdc1", Some("pu_et")).await?;
    room.robot_on_map("qdc1", "pu_et").await?;
    p.said.push(room.say("inform_arrival").await?);
    p.said.push(room.say("inform_inspection").await?);
    room.act("inspect", "qdc1", None).await?;
    room.wait_media("quad_inspect.gif").await?;
    for br in [w, u] {
        br.wait_chat("the milestone", |l| {
            l.cls.contains("milestone") && l.text.contains("(30%)")
        })
        .await?;
    }
    p.said.push(room.say("inform_emergency_status").await?);
    p.user_text.push(
        room.user_types("Understood. Use quadcopter 2 to put the fire out.")
            .await?,
    );
    screenshots(w, u).await?;

    // Subtask 2: extinguish.
    p.said.push(room.say("request_robot_emergency").await?);
    room.act("send", "qdc2", Some("pu_et")).await?;
    p.said.push(room.say("inform_arrival").await?);
    p.said.push(room.say("inform_emergency_action").await?);
    room.act("extinguish", "qdc2", None).await?;
    room.wait_media("quad_extinguish.gif").await?;
    // The fire is out: the map's alarm is cleared on both pages.
    room.alarm_on_map(true).await?;
    p.said.push(room.say("inform_emergency_solved").await?);

    // Subtask 3: assess the damage, then the terminal state ends the session for both.
    p.said.push(room.say("request_robot_inspect_damage").await?);
    p.said.push(room.say("inform_damage_inspection").await?);
    room.act("assess", "qdc2", None).await?;
    room.wait_media("quad_assess.gif").await?;
    p.said.push(room.say("inform_risk").await?);
    let last = room.say("inform_mission_completed").await?;
    let last_text = last.text.clone();
    p.said.push(last);

    // The room stays on screen after the end: the banner is shown, the last message can still
    // be read and nothing can be typed; Continue moves on to the questionnaire.
    for br in [w, u] {
        br.wait_js(
            "the end banner",
            "const b = document.getElementById('end-banner'); \
             return !!b && !b.hidden && b.textContent.includes('The conversation has ended')",
            vec![],
        )
        .await?;
        let chat = br.chat().await?;
        ensure!(
            chat.iter().any(|l| l.text == last_text),
            "{}: the last message is gone from the ended room: {chat:?}",
            br.name
        );
        let state = br
            .js(
                "return { page: document.querySelector('main[data-page]').dataset.page, \
                 input: document.getElementById('text-input').disabled }",
                vec![],
            )
            .await?;
        ensure!(
            state == json!({"page": "room", "input": true}),
            "{}: the ended room should stay with its input off: {state}",
            br.name
        );
    }
    for (br, role) in [(w, Role::Wizard), (u, Role::User)] {
        br.click("continue-after-end").await?;
        br.wait_page("survey").await?;
        let answers = fill_survey(br, role).await?;
        br.click("survey-submit").await?;
        br.wait_page("completion").await?;
        let code = br.text("completion-code").await?;
        ensure!(!code.is_empty(), "{}: empty completion code", br.name);
        p.answers.insert(role, answers);
        p.codes.insert(role, code);
    }
    p.prolific_code = study
        .study
        .prolific_code(wozkit_core::platforms::EndingKind::Completed)
        .map(str::to_string);
    p.workers = vec![
        (Platform::Prolific, PROLIFIC_PID.to_string()),
        (Platform::Lab, LAB_ID.to_string()),
    ];
    Ok(p)
}

/// The two participants in their room.
struct Room<'a> {
    study: &'a LoadedStudy,
    w: &'a Browser,
    u: &'a Browser,
}

impl Room<'_> {
    /// The wizard clicks the offered option `state`; both chats show the message, the wizard's
    /// with its dialogue-act label.
    async fn say(&self, state: &str) -> Result<Said> {
        let st = self
            .study
            .study
            .states
            .iter()
            .find(|s| s.id == state)
            .with_context(|| format!("the study has no state `{state}`"))?;
        let label = st.label().to_string();
        // The page writes the study's own act label with spaces for `_` and `.`, as on the
        // buttons; a state without one by its act type, in the page's words (never its id).
        let shown = log::shown_act(self.study, state);
        let (w_before, u_before) = (self.w.chat().await?.len(), self.u.chat().await?.len());
        self.w.click(&format!("option-{state}")).await?;
        let line = self
            .w
            .wait_chat_after(w_before, &format!("the wizard's `{state}` message"), |l| {
                l.cls.contains("mine") && l.act.as_deref() == Some(shown.as_str())
            })
            .await?;
        self.u
            .wait_chat_after(
                u_before,
                &format!("the operator to see `{state}` from Fred"),
                |l| l.cls.contains("theirs") && l.who == "Fred" && l.text == line.text,
            )
            .await?;
        Ok(Said {
            state: state.to_string(),
            label,
            text: line.text,
            shown_label: line.act.unwrap_or_default(),
        })
    }

    async fn send_text(
        &self,
        from: &Browser,
        to: &Browser,
        text: &str,
        with_enter: bool,
    ) -> Result<String> {
        if with_enter {
            from.type_into("text-input", &format!("{text}\u{e007}"))
                .await?;
        } else {
            from.type_into("text-input", text).await?;
            from.click("send").await?;
        }
        from.wait_chat("my message", |l: &ChatLine| {
            l.cls.contains("mine") && l.text == text
        })
        .await?;
        to.wait_chat("the partner's message", |l| {
            l.cls.contains("theirs") && l.text == text
        })
        .await?;
        let left = from
            .js("return document.getElementById('text-input').value", vec![])
            .await?;
        ensure!(
            left == json!(""),
            "{}: the input was not cleared after sending",
            from.name
        );
        Ok(text.to_string())
    }

    async fn user_types(&self, text: &str) -> Result<String> {
        self.send_text(self.u, self.w, text, false).await
    }

    async fn wizard_types(&self, text: &str) -> Result<String> {
        let sent = self.send_text(self.w, self.u, text, true).await?;
        self.w
            .wait_chat("the free-text label", |l| {
                l.text == text && l.act.as_deref() == Some("free text")
            })
            .await?;
        Ok(sent)
    }

    async fn fixed(&self, id: &str) -> Result<String> {
        let fixed = self
            .study
            .study
            .fixed_options
            .iter()
            .find(|f| f.id == id)
            .with_context(|| format!("the study has no fixed option `{id}`"))?;
        self.w.click(&format!("fixed-{id}")).await?;
        self.u
            .wait_chat("the fixed option", |l| {
                l.cls.contains("theirs") && l.text == fixed.text
            })
            .await?;
        Ok(id.to_string())
    }

    /// The wizard starts a robot action in the action panel and waits for it to start.
    async fn act(&self, action: &str, robot: &str, target: Option<&str>) -> Result<()> {
        let started = |lines: &[ChatLine]| {
            lines
                .iter()
                .filter(|l| l.cls.contains("sys") && l.text.ends_with("started"))
                .count()
        };
        let before = started(&self.w.chat().await?);
        self.w.select("action-select", action).await?;
        self.w.select("robot-select", robot).await?;
        if let Some(t) = target {
            self.w.select("target-select", t).await?;
        }
        self.w.click("action-send").await?;
        browser::until(
            &format!("`{action}` by {robot} to start"),
            browser::WAIT,
            || async { Ok((started(&self.w.chat().await?) > before).then_some(())) },
        )
        .await
    }

    /// The action panel has nothing to start: Start is off and the panel says why.
    async fn panel_has_nothing_possible(&self) -> Result<()> {
        self.w
            .wait_js(
                "the action panel to say that no action is possible",
                "return document.getElementById('action-send').disabled \
                   && document.getElementById('action-panel').dataset.possible === 'false' \
                   && document.getElementById('action-reason').textContent.startsWith('No action is possible now.')",
                vec![],
            )
            .await?;
        Ok(())
    }

    /// Once the alarm is given, the panel opens on sending the first robot with a camera (the
    /// study's guard: the fire is inspected first) to the fire's place, not on the first of
    /// each list; Start is on.
    async fn panel_opens_on_a_possible_send(&self) -> Result<()> {
        let world = &self.study.study.world;
        let fire = world
            .variables
            .get("fire_location")
            .and_then(|v| v.as_str())
            .context("the study has no fire_location")?;
        let robot = world
            .robots
            .iter()
            .find(|r| r.start != fire && r.capabilities.iter().any(|c| c == "inspect"))
            .context("no robot with a camera away from the fire")?;
        ensure!(
            world.locations.first().is_some_and(|l| l.id != fire)
                && world.robots.first().is_some_and(|r| r.id != robot.id),
            "the first robot or place is the pick: the check would not tell a pick from the \
             first of each list"
        );
        self.w
            .wait_js(
                "the action panel to open on sending a robot to the fire",
                "const v = (id) => document.getElementById(id).value; \
                 return v('action-select') === 'send' && v('robot-select') === arguments[0] \
                   && v('target-select') === arguments[1] \
                   && !document.getElementById('action-send').disabled \
                   && document.getElementById('action-reason').textContent === ''",
                vec![json!(robot.id), json!(fire)],
            )
            .await?;
        Ok(())
    }

    /// The wizard's offered option `state` names the time left: its text shows a clock (m:ss)
    /// and changes as the clock runs, without a new view.
    async fn clock_text_runs(&self, state: &str) -> Result<()> {
        // The option's text once it names a time (m:ss) other than `arguments[1]`.
        let script = "const b = document.querySelector(`[data-testid=option-${arguments[0]}]`); \
                      const t = b ? b.textContent : ''; \
                      return /\\d+:\\d\\d/.test(t) && t !== arguments[1] ? t : null";
        let first = self
            .w
            .wait_js(
                &format!("the option `{state}` to name the time"),
                script,
                vec![json!(state), json!(null)],
            )
            .await?;
        let later = self
            .w
            .wait_js(
                &format!("the option `{state}`'s time to change"),
                script,
                vec![json!(state), first.clone()],
            )
            .await?;
        ensure!(
            first != later && later.is_string(),
            "the option's text did not change: {first} / {later}"
        );
        Ok(())
    }

    /// Both maps show the study's alarm at the fire's place, cleared or not.
    async fn alarm_on_map(&self, cleared: bool) -> Result<()> {
        let fire = self
            .study
            .study
            .world
            .variables
            .get("fire_location")
            .and_then(|v| v.as_str())
            .context("the study has no fire_location")?;
        for br in [self.w, self.u] {
            br.wait_js(
                &format!("the map's alarm at {fire}, cleared: {cleared}"),
                "const a = document.querySelector('[data-testid=map-alarm]'); \
                 return !!a && a.dataset.location === arguments[0] \
                   && a.dataset.cleared === String(arguments[1])",
                vec![json!(fire), json!(cleared)],
            )
            .await?;
        }
        Ok(())
    }

    /// Both pages draw `robot`'s marker on the map at the study's x/y of `location`.
    async fn robot_on_map(&self, robot: &str, location: &str) -> Result<()> {
        let place = self
            .study
            .study
            .world
            .locations
            .iter()
            .find(|l| l.id == location)
            .with_context(|| format!("no location {location} in the study"))?;
        let script = "const m = document.querySelector(`[data-testid=map-robot-${arguments[0]}]`);\
                      return !!m && !document.getElementById('map-panel').hidden\
                        && Number(m.dataset.x) === arguments[1] && Number(m.dataset.y) === arguments[2]";
        for br in [self.w, self.u] {
            br.wait_js(
                &format!(
                    "{robot} on the map at {location} ({}, {})",
                    place.x, place.y
                ),
                script,
                vec![json!(robot), json!(place.x), json!(place.y)],
            )
            .await?;
        }
        Ok(())
    }

    /// Both pages show the media file `file`, loaded.
    async fn wait_media(&self, file: &str) -> Result<()> {
        let script = "const m = document.querySelector('[data-testid=media]');\
                      return !!m && !document.getElementById('media-panel').hidden\
                        && (m.getAttribute('src') || '').endsWith(arguments[0])\
                        && m.complete && m.naturalWidth > 0";
        for br in [self.w, self.u] {
            br.wait_js(
                &format!("the media {file} to be shown"),
                script,
                vec![json!(file)],
            )
            .await?;
        }
        Ok(())
    }
}

/// Answers every question: each Likert item with a point that depends on the role, the
/// optional text question with a sentence. Returns the answers as the log should hold them.
async fn fill_survey(br: &Browser, role: Role) -> Result<BTreeMap<String, Value>> {
    let questions = br
        .js(
            "return [...document.querySelectorAll('fieldset.question')].map((f) => ({\
               id: f.dataset.testid.replace(/^question-/, ''),\
               points: f.querySelectorAll('.likert input[type=radio]').length,\
               text: !!f.querySelector('textarea') }))",
            vec![],
        )
        .await?;
    let questions = questions.as_array().context("questions")?.clone();
    ensure!(
        !questions.is_empty(),
        "{}: the questionnaire has no questions",
        br.name
    );
    let mut answers = BTreeMap::new();
    for (i, q) in questions.iter().enumerate() {
        let id = q["id"].as_str().context("question id")?;
        let points = q["points"].as_u64().unwrap_or(0);
        if points > 0 {
            let point = match role {
                Role::User => points - (i as u64 % 3),
                Role::Wizard => 1 + (i as u64 % points),
            };
            br.click(&format!("{id}-{point}")).await?;
            answers.insert(id.to_string(), json!(point));
        } else if q["text"] == json!(true) && role == Role::User {
            let text = "The robots were easy to follow.";
            br.type_into(id, text).await?;
            answers.insert(id.to_string(), json!(text));
        }
    }
    let likert = answers.values().filter(|v| v.is_u64()).count();
    ensure!(
        likert >= 4,
        "{}: expected the study's Likert items, found {likert}",
        br.name
    );
    Ok(answers)
}

/// Checks that both rooms fit 1366×768 without page scrolling, then writes the screenshots
/// when asked to (or when they are missing), after the CSS transitions have settled.
async fn screenshots(w: &Browser, u: &Browser) -> Result<()> {
    for br in [w, u] {
        let size = br
            .js(
                "const d = document.documentElement;\
                 return [innerWidth, innerHeight, d.scrollWidth, d.scrollHeight]",
                vec![],
            )
            .await?;
        let s: Vec<u64> = serde_json::from_value(size)?;
        ensure!(
            s[0] == u64::from(WINDOW.0) && s[1] == u64::from(WINDOW.1),
            "{}: viewport is {}×{}, not {}×{}",
            br.name,
            s[0],
            s[1],
            WINDOW.0,
            WINDOW.1
        );
        ensure!(
            s[2] <= s[0] && s[3] <= s[1],
            "{}: the room overflows the 1366×768 window (page is {}×{})",
            br.name,
            s[2],
            s[3]
        );
    }
    for (br, file) in [(w, "wizard.png"), (u, "operator.png")] {
        let Some(path) = screenshot_wanted(file) else {
            continue;
        };
        // Clicking scrolled the options column; show it from its top, as a wizard first sees it.
        br.js(
            "const o = document.getElementById('options-panel'); if (o) o.scrollTop = 0; return true",
            vec![],
        )
        .await?;
        settle(br).await?;
        write_png(&br.name, &path, &br.screenshot().await?)?;
    }
    Ok(())
}
