//! Keyboard only: three people who use no mouse take part, in real headless Chromium and then
//! in Firefox ESR. Every
//! step is a key press sent to whatever has the focus (Tab to move, Enter to press, Space and
//! the arrow keys to choose, letters to type); nothing is clicked and no element is focused by
//! the driver. The page is only read, to know when to go on.
//!
//! - Two participants play a whole `offshore-emergency` session: entry, consent, instructions,
//!   the room (offered options, a fixed option, free text both ways, an approval, robot actions
//!   chosen in the action panel's lists), the end, the questionnaire and the completion code.
//! - One worker does an ACUTE-Eval comparison study (`acute-eval`): the screening questions, the
//!   practice pair, every comparison with its reason, the last question and the code.
//! - One worker fights an arena battle (`arena-demo`): messages to both assistants, the end, the
//!   vote and its reason, the reveal and the code.
//!
//! Each page these reach is also checked with axe-core (`Browser::wait_page`). Needs Debian's
//! `chromium` and `chromium-driver`; fails when they are missing unless `WOZKIT_SKIP_E2E=1`.

use crate::browser;
use crate::server;
use crate::sides;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use serde_json::json;
use wozkit_core::load::{LoadedStudy, load_builtin};

use browser::{Browser, Driver, ENTER, close_all};
use server::TestServer;
use sides::{side_of, sides};

/// The whole test must end within this time, whatever happens.
const LIMIT: Duration = Duration::from_secs(240);
const ACUTE: &str = "acute-eval";
const ARENA: &str = "arena-demo";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wizard_of_oz_session_a_comparison_and_a_battle_by_keyboard_alone() {
    browser::run_in_both_browsers(
        "keyboard-only browser test",
        LIMIT,
        |browser, driver| async move { run(&browser, &driver).await },
    )
    .await;
}

async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let woz = server::quick_study()?;
    let acute = load_builtin(ACUTE).map_err(|e| anyhow!("{ACUTE} does not load:\n{e}"))?;
    let arena = load_builtin(ARENA).map_err(|e| anyhow!("{ARENA} does not load:\n{e}"))?;
    let woz_id = woz.study.id.clone();
    let mut server = TestServer::start_all(vec![woz.clone(), acute.clone(), arena.clone()]).await?;
    let driver = Driver::start(chromium, chromedriver).await?;
    let a = driver.browser("keyboard A (WoZ)").await?;
    let b = driver.browser("keyboard B (WoZ)").await?;
    let c = driver.browser("keyboard C (comparison)").await?;
    let d = driver.browser("keyboard D (battle)").await?;
    let played = async {
        woz_session(&server, &woz, &woz_id, &a, &b).await?;
        comparison(&server, &acute, &c).await?;
        battle(&server, &arena, &d).await
    }
    .await;
    let closed = close_all([a, b, c, d]).await;
    drop(driver);
    let stopped = server.stop().await;
    played?;
    closed?;
    stopped
}

/// Consent and instructions by keyboard.
async fn enter(br: &Browser, url: &str) -> Result<()> {
    br.goto(url).await?;
    br.wait_page("consent").await?;
    br.press_on("[data-testid=accept]").await?;
    br.wait_page("instructions").await?;
    br.press_on("[data-testid=continue]").await
}

/// The number of lines in the room's chat.
async fn chat_len(br: &Browser) -> Result<u64> {
    let v = br
        .js(
            "return document.querySelectorAll('#chat li').length",
            vec![],
        )
        .await?;
    v.as_u64().context("chat length")
}

/// Waits until `br`'s chat has a line (past the first `after`) containing `text`.
async fn chat_shows(br: &Browser, after: u64, text: &str) -> Result<()> {
    br.wait_js(
        &format!("a chat line with {text:?}"),
        "return [...document.querySelectorAll('#chat li')].slice(arguments[0])\
           .some((l) => l.textContent.includes(arguments[1]))",
        vec![json!(after), json!(text)],
    )
    .await
    .map(drop)
}

/// The two participants in their room, both on keyboards.
struct Room<'a> {
    w: &'a Browser,
    u: &'a Browser,
}

impl Room<'_> {
    /// The wizard presses the offered option `state`; the user's chat shows a new message.
    async fn say(&self, state: &str) -> Result<()> {
        let before = chat_len(self.u).await?;
        self.w
            .press_on(&format!("[data-testid=\"option-{state}\"]"))
            .await?;
        self.u
            .wait_js(
                &format!("the wizard's message ({state})"),
                "return document.querySelectorAll('#chat li.msg').length > 0 \
                   && document.querySelectorAll('#chat li').length > arguments[0]",
                vec![json!(before)],
            )
            .await
            .map(drop)
    }

    /// `from` types `text` into the message box and sends it with Enter; `to` sees it.
    async fn types(&self, from: &Browser, to: &Browser, text: &str) -> Result<()> {
        let before = chat_len(to).await?;
        from.type_by_keys("#text-input", text).await?;
        from.keys(&ENTER.to_string()).await?;
        chat_shows(to, before, text).await
    }

    /// The wizard starts `action` by `robot` (to `target`) from the action panel's lists.
    async fn act(&self, action: &str, robot: &str, target: Option<&str>) -> Result<()> {
        let before = chat_len(self.w).await?;
        self.w.choose_option("#action-select", action).await?;
        self.w.choose_option("#robot-select", robot).await?;
        if let Some(t) = target {
            self.w.choose_option("#target-select", t).await?;
        }
        self.w.press_on("#action-send").await?;
        self.w
            .wait_js(
                &format!("`{action}` by {robot} to start"),
                "return [...document.querySelectorAll('#chat li')].slice(arguments[0])\
                   .some((l) => l.classList.contains('sys') && l.textContent.endsWith('started'))",
                vec![json!(before)],
            )
            .await
            .map(drop)
    }
}

async fn woz_session(
    server: &TestServer,
    study: &LoadedStudy,
    id: &str,
    a: &Browser,
    b: &Browser,
) -> Result<()> {
    enter(
        a,
        &server.url(&format!("/join?study={id}&participant=kb-a")),
    )
    .await?;
    let role_a = a
        .wait_js(
            "the waiting page",
            "const m = document.querySelector('main[data-page]'); return !!m && m.dataset.page === 'waiting'",
            vec![],
        )
        .await;
    role_a.context("A waits for a partner")?;
    enter(
        b,
        &server.url(&format!("/join?study={id}&participant=kb-b")),
    )
    .await?;
    for br in [a, b] {
        br.wait_page("room").await?;
        br.wait_js(
            "the room's WebSocket",
            "return document.getElementById('room').dataset.connected === 'true'",
            vec![],
        )
        .await?;
    }
    let role = a
        .js(
            "return document.getElementById('room').dataset.role",
            vec![],
        )
        .await?;
    let (w, u) = if role == json!("wizard") {
        (a, b)
    } else {
        (b, a)
    };
    let room = Room { w, u };

    room.say("intro_hello").await?;
    room.types(u, w, "There is an alarm light on my console.")
        .await?;
    room.say("inform_alert_emergency").await?;
    room.types(w, u, "Stand by, I am reading the sensors.")
        .await?;
    // An approval, answered by keyboard.
    room.say("request_pa_announcement").await?;
    let before = chat_len(w).await?;
    u.press_on("[data-testid=approve]").await?;
    chat_shows(w, before, "Approved").await?;
    room.say("request_robot_type").await?;
    let before = chat_len(u).await?;
    w.press_on("[data-testid=fixed-okay]").await?;
    u.wait_js(
        "the fixed option",
        "return document.querySelectorAll('#chat li').length > arguments[0]",
        vec![json!(before)],
    )
    .await?;

    let fire = study
        .study
        .world
        .variables
        .get("fire_location")
        .and_then(|v| v.as_str())
        .context("fire_location")?
        .to_string();
    room.act("send", "qdc1", Some(&fire)).await?;
    room.say("inform_arrival").await?;
    room.say("inform_inspection").await?;
    room.act("inspect", "qdc1", None).await?;
    room.say("inform_emergency_status").await?;
    room.say("request_robot_emergency").await?;
    room.act("send", "qdc2", Some(&fire)).await?;
    room.say("inform_arrival").await?;
    room.say("inform_emergency_action").await?;
    room.act("extinguish", "qdc2", None).await?;
    room.say("inform_emergency_solved").await?;
    room.say("request_robot_inspect_damage").await?;
    room.say("inform_damage_inspection").await?;
    room.act("assess", "qdc2", None).await?;
    room.say("inform_risk").await?;
    room.say("inform_mission_completed").await?;

    for br in [w, u] {
        br.press_on("[data-testid=continue-after-end]").await?;
        br.wait_page("survey").await?;
        answer_by_keys(br, "The robots were easy to follow.").await?;
        br.press_on("[data-testid=survey-submit]").await?;
        br.wait_page("completion").await?;
        let code = br.text("completion-code").await?;
        ensure!(!code.is_empty(), "{}: empty completion code", br.name);
    }
    Ok(())
}

/// Answers every question of the page's form by keyboard: the middle point of each scale or
/// list of choices, `text` in each text field.
async fn answer_by_keys(br: &Browser, text: &str) -> Result<()> {
    let groups = br
        .js(
            "const names = [...new Set([...document.querySelectorAll('main input[type=radio]')]\
               .map((r) => r.name))];\
             return names.map((n) => {\
               const rs = [...document.querySelectorAll(`main input[type=radio][name=\"${n}\"]`)];\
               return [n, rs[Math.floor((rs.length - 1) / 2)].value] })",
            vec![],
        )
        .await?;
    let groups: Vec<(String, String)> = serde_json::from_value(groups).context("radio groups")?;
    for (name, value) in groups {
        br.choose_radio(&name, &value).await?;
    }
    let fields = br
        .js(
            "return [...document.querySelectorAll('main textarea, main input[type=text]')]\
               .filter((f) => f.id).map((f) => f.id)",
            vec![],
        )
        .await?;
    let fields: Vec<String> = serde_json::from_value(fields).context("text fields")?;
    for id in fields {
        br.type_by_keys(&format!("#{id}"), text).await?;
    }
    Ok(())
}

async fn comparison(server: &TestServer, study: &LoadedStudy, c: &Browser) -> Result<()> {
    let ev = study.study.evaluation.as_ref().context("no evaluation")?;
    enter(
        c,
        &server.url(&format!(
            "/join?study={ACUTE}&PROLIFIC_PID=5f1e2e00000000000000ee01&STUDY_ID=kb&SESSION_ID=kb-c"
        )),
    )
    .await?;
    // The screening questions: fluent English, chatbots every week (as eval.rs answers them).
    c.wait_page("questions").await?;
    for id in ["english-1", "chatbot_use-1"] {
        let v = c
            .js(
                "const r = document.querySelector(`[data-testid=${arguments[0]}]`); return [r.name, r.value]",
                vec![json!(id)],
            )
            .await?;
        let (name, value): (String, String) = serde_json::from_value(v)?;
        c.choose_radio(&name, &value).await?;
    }
    c.press_on("[data-testid=answers-submit]").await?;

    // The practice pair: the better one, by keyboard.
    c.wait_page("onboarding").await?;
    let known = ev
        .onboarding
        .as_ref()
        .and_then(|o| o.items.first())
        .context("no practice item")?;
    let better = known.better.as_deref().context("no better dialogue")?;
    let shown = sides(c, ev, "[data-testid=onboarding-0]").await?;
    let side = side_of(&shown, better)?;
    let radio = c
        .js(
            "const r = document.querySelector(`[data-testid=ob0-${arguments[0]}]`); return [r.name, r.value]",
            vec![json!(side)],
        )
        .await?;
    let (name, value): (String, String) = serde_json::from_value(radio)?;
    c.choose_radio(&name, &value).await?;
    c.press_on("[data-testid=onboarding-submit]").await?;

    // Every comparison (attention checks answered right) until the last question.
    let mut judged = 0;
    loop {
        let page = c
            .wait_js(
                "a comparison or the last question",
                "const m = document.querySelector('main[data-page]'); \
                 return m && (m.dataset.page === 'compare' || m.dataset.page === 'questions') \
                   ? m.dataset.page + ' ' + (m.dataset.item || '') : null",
                vec![],
            )
            .await?;
        let page = page.as_str().unwrap_or_default().to_string();
        let Some(item) = page.strip_prefix("compare ") else {
            break;
        };
        c.wait_page("compare").await?;
        let shown = sides(c, ev, "main").await?;
        let side = match ev.gold_item(item).and_then(|k| k.better.clone()) {
            Some(better) => side_of(&shown, &better)?,
            None => "left",
        };
        let radio = c
            .js(
                "const r = document.querySelector(`[data-testid=choice-${arguments[0]}]`); return [r.name, r.value]",
                vec![json!(side)],
            )
            .await?;
        let (name, value): (String, String) = serde_json::from_value(radio)?;
        c.choose_radio(&name, &value).await?;
        c.type_by_keys(
            "textarea[name=justification]",
            "it answers the question asked",
        )
        .await?;
        c.press_on("[data-testid=judge-submit]").await?;
        judged += 1;
        c.wait_js(
            "the next page",
            "const m = document.querySelector('main[data-page]'); \
             return !m || m.dataset.page !== 'compare' || m.dataset.item !== arguments[0]",
            vec![json!(item)],
        )
        .await?;
        ensure!(judged < 40, "C: more than 40 comparisons");
    }
    ensure!(judged > 0, "C: no comparison was shown");
    c.wait_page("questions").await?;
    answer_by_keys(c, "About the same as the ones I use.").await?;
    c.press_on("[data-testid=answers-submit]").await?;
    c.wait_page("completion").await?;
    let code = c.text("completion-code").await?;
    ensure!(!code.is_empty(), "C: empty completion code");
    Ok(())
}

async fn battle(server: &TestServer, arena: &LoadedStudy, d: &Browser) -> Result<()> {
    enter(
        d,
        &server.url(&format!(
            "/join?study={ARENA}&PROLIFIC_PID=5f1e2e00000000000000ee02&STUDY_ID=kb&SESSION_ID=kb-d"
        )),
    )
    .await?;
    d.wait_page("arena").await?;
    let turns = arena
        .study
        .evaluation
        .as_ref()
        .context("no evaluation")?
        .conversation
        .min_turns as usize;
    let messages = [
        "I would like to go to the mountains.",
        "Somewhere quiet, please.",
        "What should I pack?",
        "How long should I stay?",
    ];
    ensure!(
        turns <= messages.len(),
        "D: the battle needs {turns} messages"
    );
    for (n, message) in messages.iter().take(turns.max(1)).enumerate() {
        d.type_by_keys("[data-testid=chat-text]", message).await?;
        d.keys(&ENTER.to_string()).await?;
        d.wait_js(
            &format!("both replies to message {}", n + 1),
            // Drawn again after the replies: the message box is enabled again (it is disabled
            // while they stream in).
            "const m = document.querySelector('main.chat'); \
             const box = document.querySelector('[data-testid=chat-text]'); \
             return !!m && m.dataset.pending === 'false' && (!box || !box.disabled) \
               && document.querySelectorAll('ol[data-testid=log-left] li.said.system').length === arguments[0] \
               && document.querySelectorAll('ol[data-testid=log-right] li.said.system').length === arguments[0]",
            vec![json!(n + 1)],
        )
        .await?;
    }
    d.press_on("[data-testid=chat-end]").await?;
    d.wait_js(
        "the vote",
        "return !!document.querySelector('input[data-testid=vote-left]')",
        vec![],
    )
    .await?;
    d.choose_radio("vote", "left").await?;
    let why = d
        .js(
            "return !!document.querySelector('textarea[name=justification]')",
            vec![],
        )
        .await?;
    if why == json!(true) {
        d.type_by_keys(
            "textarea[name=justification]",
            "the left one stayed on the topic",
        )
        .await?;
    }
    answer_by_keys_in_finish(d).await?;
    d.press_on("[data-testid=chat-finish]").await?;
    d.wait_page("reveal").await?;
    d.press_on("[data-testid=reveal-continue]").await?;
    d.wait_page("completion").await?;
    let code = d.text("completion-code").await?;
    ensure!(!code.is_empty(), "D: empty completion code");
    Ok(())
}

/// The questions after a battle besides the vote (scales), by keyboard.
async fn answer_by_keys_in_finish(d: &Browser) -> Result<()> {
    let groups = d
        .js(
            "const f = document.getElementById('chat-finish'); if (!f) return [];\
             const names = [...new Set([...f.querySelectorAll('input[type=radio]')].map((r) => r.name))]\
               .filter((n) => n !== 'vote');\
             return names.map((n) => {\
               const rs = [...f.querySelectorAll(`input[type=radio][name=\"${n}\"]`)];\
               return [n, rs[Math.floor((rs.length - 1) / 2)].value] })",
            vec![],
        )
        .await?;
    let groups: Vec<(String, String)> = serde_json::from_value(groups).context("radio groups")?;
    for (name, value) in groups {
        d.choose_radio(&name, &value).await?;
    }
    Ok(())
}
