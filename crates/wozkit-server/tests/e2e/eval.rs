//! End to end: the built-in evaluation studies in real headless Chromium, through the plain
//! forms of the participant pages.
//!
//! - Worker A enters `acute-eval` by a Prolific link, gives consent, reads the instructions,
//!   answers the questions, passes the practice pair by picking the better chatbot, judges two
//!   attention checks (the first right, the second wrong: one failure is allowed) and two
//!   ordinary pairs (one on each side), answers the last question and gets a completion code.
//! - Worker B enters by a lab link, picks the broken chatbot of the practice pair and is
//!   screened out with the study's message and no code.
//! - Worker C enters `rate-dialogues` and sees the rating page.
//!
//! Then both logs (`log-<participant>`) and the leases are checked against what the browsers
//! showed and clicked: which dialogue was on which side, what was chosen, the gold results, the
//! onboarding results, the screening and the code.
//!
//! The study is the built-in one with two changes, so that the attention checks come at all:
//! every claim tries the gold pool first (`gold.rate = 1`), so A's first two pairs are the two
//! attention checks, and a worker judges two ordinary pairs (`items_per_worker = 2`).
//!
//! Needs both browsers and their drivers (see `main.rs`); fails when one is missing unless
//! `WOZKIT_SKIP_E2E=1`. With `WOZKIT_UPDATE_SCREENSHOTS=1` (or when the files are missing) it
//! writes each kind of evaluation page at 1366×768 to `docs/screenshots/eval-*.png`.

use crate::browser;
use crate::server;
use crate::sides;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::json;
use wozkit_core::evaluation::Evaluation;
use wozkit_core::event::{Event, EventKind, ItemPool, Judgment, ScreenReason};
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_store::{LeaseState, Platform};

use browser::{Browser, Driver, close_all, shoot_settled};
use server::TestServer;
use sides::{other, side_of, sides};

/// The whole test must end within this time, whatever happens.
const LIMIT: Duration = Duration::from_secs(110);

const COMPARE: &str = "acute-eval";
const RATE: &str = "rate-dialogues";
const PROLIFIC_PID: &str = "5f1e2e0000000000000000e1";
const LAB_ID: &str = "e2e-eval-lab-b";
/// How many ordinary pairs a worker judges in this test.
const ITEMS: u32 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluation_studies_in_the_browser() {
    browser::run_in_both_browsers(
        "end-to-end evaluation test",
        LIMIT,
        |chromium, chromedriver| async move { run(&chromium, &chromedriver).await },
    )
    .await;
}

/// `acute-eval` with the attention checks first and two ordinary pairs per worker.
fn compare_study() -> Result<LoadedStudy> {
    let mut study = load_builtin(COMPARE).map_err(|e| anyhow!("{COMPARE} does not load:\n{e}"))?;
    let ev = study
        .study
        .evaluation
        .as_mut()
        .context("acute-eval has no evaluation")?;
    ev.items_per_worker = ITEMS;
    let gold = ev.gold.as_mut().context("acute-eval has no gold items")?;
    ensure!(
        gold.items.len() == 2 && gold.max_failures == Some(1),
        "the test expects acute-eval's two gold items with one failure allowed"
    );
    gold.rate = 1.0;
    Ok(study)
}

/// Starts everything, plays, and always closes the browsers and the server before reporting.
async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let study = compare_study()?;
    let rate = load_builtin(RATE).map_err(|e| anyhow!("{RATE} does not load:\n{e}"))?;
    let mut server = TestServer::start_all(vec![study.clone(), rate]).await?;
    let driver = Driver::start(chromium, chromedriver).await?;
    let a = driver.browser("browser A (Prolific link)").await?;
    let b = driver.browser("browser B (lab link)").await?;
    let c = driver.browser("browser C (rating study)").await?;
    let played = play(&server, &study, &a, &b, &c).await;
    let checked = match &played {
        Ok(p) => check(&server, &study, p).await,
        Err(_) => Ok(()),
    };
    let closed = close_all([a, b, c]).await;
    drop(driver);
    let stopped = server.stop().await;
    played?;
    checked?;
    closed?;
    stopped
}

/// One comparison as the browser showed and answered it.
#[derive(Debug)]
struct Judged {
    /// The page's `data-item`.
    item: String,
    /// The dialogues left then right, recognised by their text.
    shown: Vec<String>,
    /// `left` or `right`.
    side: &'static str,
    justification: String,
    /// Gold items: whether the side picked was the known better one.
    gold_correct: Option<bool>,
}

/// What the browsers did that the logs must hold.
#[derive(Debug, Default)]
struct Played {
    /// A's practice pair, left then right.
    onboarding_a: Vec<String>,
    judged: Vec<Judged>,
    code: String,
}

async fn play(
    server: &TestServer,
    study: &LoadedStudy,
    a: &Browser,
    b: &Browser,
    c: &Browser,
) -> Result<Played> {
    let ev = study.study.evaluation.as_ref().context("no evaluation")?;
    let mut p = Played::default();

    // Worker A: consent, instructions, questions.
    a.goto(&server.url(&format!(
        "/join?study={COMPARE}&PROLIFIC_PID={PROLIFIC_PID}&STUDY_ID=e2e-eval&SESSION_ID=e2e-a"
    )))
    .await?;
    a.wait_page("consent").await?;
    fits(a, "consent").await?;
    shoot_settled(a, "eval-consent.png").await?;
    a.click("accept").await?;
    a.wait_page("instructions").await?;
    a.click("continue").await?;
    a.wait_page("questions").await?;
    // Option indices in the study: english 1 = "Fluently", chatbot_use 1 = "Every week".
    a.click("english-1").await?;
    a.click("chatbot_use-1").await?;
    shoot_settled(a, "eval-questions.png").await?;
    a.click("answers-submit").await?;

    // The practice pair: the better chatbot.
    a.wait_page("onboarding").await?;
    fits(a, "onboarding").await?;
    shoot_settled(a, "eval-onboarding.png").await?;
    let (shown, better) = practice(a, ev).await?;
    p.onboarding_a = shown;
    a.click(&format!("ob0-{better}")).await?;
    a.click("onboarding-submit").await?;

    // The pairs: two attention checks (right, then wrong), then the ordinary pairs.
    let gold_ids: Vec<String> = ev
        .gold
        .iter()
        .flat_map(|g| &g.items)
        .map(|k| k.id())
        .collect();
    let mut ordinary = 0;
    let total = gold_ids.len() + ITEMS as usize;
    for n in 0..total {
        let before = p.judged.last().map(|j| j.item.clone());
        a.wait_js(
            &format!("comparison {} of {total}", n + 1),
            "const m = document.querySelector('main[data-page=compare]');\
             return m && m.dataset.item !== arguments[0] ? m.dataset.item : null",
            vec![json!(before.unwrap_or_default())],
        )
        .await?;
        let item = a
            .js(
                "return document.querySelector('main[data-page=compare]').dataset.item",
                vec![],
            )
            .await?
            .as_str()
            .context("data-item")?
            .to_string();
        let shown = sides(a, ev, "main").await?;
        let (side, gold_correct, justification) = match ev.gold_item(&item) {
            Some(k) => {
                let better = k
                    .better
                    .as_deref()
                    .context("a gold item without `better`")?;
                let at = side_of(&shown, better)?;
                // The first check answered right, the second wrong.
                let right = p.judged.iter().all(|j| j.gold_correct.is_none());
                let side = if right { at } else { other(at) };
                let why = if right {
                    "the other one repeats itself"
                } else {
                    "this one seemed more fun"
                };
                (side, Some(right), why.to_string())
            }
            None => {
                ensure!(
                    !gold_ids.is_empty() && p.judged.len() >= gold_ids.len(),
                    "an ordinary pair ({item}) came before both attention checks"
                );
                ordinary += 1;
                if ordinary == 1 {
                    shoot_settled(a, "eval-compare.png").await?;
                }
                let side = if ordinary == 1 { "left" } else { "right" };
                (side, None, format!("asks follow-up questions ({ordinary})"))
            }
        };
        a.click(&format!("choice-{side}")).await?;
        a.type_into_css("textarea[name=justification]", &justification)
            .await?;
        a.click("judge-submit").await?;
        p.judged.push(Judged {
            item,
            shown,
            side,
            justification,
            gold_correct,
        });
    }

    // The last question (shown because A uses chatbots), then the code.
    a.wait_page("questions").await?;
    a.type_into("compared_to_usual", "About the same as the ones I use.")
        .await?;
    a.click("answers-submit").await?;
    a.wait_page("completion").await?;
    // The page returns to Prolific after a few seconds: take the picture first.
    fits(a, "completion").await?;
    shoot_settled(a, "eval-complete.png").await?;
    p.code = a.text("completion-code").await?;
    ensure!(!p.code.is_empty(), "A: empty completion code");

    screened_out(server, ev, b).await?;
    rating_page(server, c).await?;
    Ok(p)
}

/// The practice pair on the onboarding page: its dialogues left then right, and the side of the
/// better one.
async fn practice(br: &Browser, ev: &Evaluation) -> Result<(Vec<String>, &'static str)> {
    let ob = ev
        .onboarding
        .as_ref()
        .context("acute-eval has no onboarding")?;
    let known = ob.items.first().context("no practice item")?;
    let better = known
        .better
        .as_deref()
        .context("practice item without `better`")?;
    let shown = sides(br, ev, "[data-testid=onboarding-0]").await?;
    let mut written = known.dialogues();
    let mut seen = shown.clone();
    written.sort();
    seen.sort();
    ensure!(
        seen == written,
        "{}: the practice pair shows {shown:?}, not {written:?}",
        br.name
    );
    let side = side_of(&shown, better)?;
    Ok((shown, side))
}

/// Worker B: through the questions, then the broken chatbot of the practice pair.
async fn screened_out(server: &TestServer, ev: &Evaluation, b: &Browser) -> Result<()> {
    b.goto(&server.url(&format!("/join?study={COMPARE}&participant={LAB_ID}")))
        .await?;
    b.wait_page("consent").await?;
    b.click("accept").await?;
    b.wait_page("instructions").await?;
    b.click("continue").await?;
    b.wait_page("questions").await?;
    b.click("english-0").await?;
    b.click("chatbot_use-3").await?;
    b.click("answers-submit").await?;
    b.wait_page("onboarding").await?;
    let (_, better) = practice(b, ev).await?;
    b.click(&format!("ob0-{}", other(better))).await?;
    b.click("onboarding-submit").await?;
    b.wait_page("screened").await?;
    let fail = &ev.onboarding.as_ref().context("no onboarding")?.fail;
    let title = fail.title.as_deref().context("no fail title")?;
    let first_line = fail
        .text
        .as_deref()
        .and_then(|t| t.lines().next())
        .context("no fail text")?;
    let text = b
        .js("return document.querySelector('main').innerText", vec![])
        .await?;
    let text = text.as_str().unwrap_or_default();
    // The page shows the text as paragraphs: compare it with the line breaks as spaces.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    ensure!(
        flat.contains(title) && flat.contains(first_line.trim()),
        "B: the screened page does not show the study's message: {text}"
    );
    let code = b
        .js(
            "return !!document.querySelector('[data-testid=completion-code]')",
            vec![],
        )
        .await?;
    ensure!(
        code == json!(false),
        "B: the screened page shows a completion code, but the study gives none"
    );
    fits(b, "screened").await?;
    shoot_settled(b, "eval-screened.png").await
}

/// Worker C: the first rating page of `rate-dialogues`, with its per-turn labels and scales.
async fn rating_page(server: &TestServer, c: &Browser) -> Result<()> {
    c.goto(&server.url(&format!(
        "/join?study={RATE}&PROLIFIC_PID=5f1e2e0000000000000000c3&STUDY_ID=e2e-rate&SESSION_ID=e2e-c"
    )))
    .await?;
    c.wait_page("consent").await?;
    c.click("accept").await?;
    c.wait_page("instructions").await?;
    c.click("continue").await?;
    c.wait_page("rate").await?;
    let shape = c
        .js(
            "return [document.querySelectorAll('[data-testid=dialogue-0] .turn').length,\
                     document.querySelectorAll('.turn-labels input[type=checkbox]').length,\
                     document.querySelectorAll('fieldset.question').length]",
            vec![],
        )
        .await?;
    let n: Vec<u64> = serde_json::from_value(shape)?;
    ensure!(
        n[0] >= 2 && n[1] >= 1 && n[2] >= 3,
        "C: the rating page has {} turns, {} turn labels and {} questions",
        n[0],
        n[1],
        n[2]
    );
    shoot_settled(c, "eval-rate.png").await
}

/// Checks that a short page fits the window without a scrollbar.
async fn fits(br: &Browser, page: &str) -> Result<()> {
    let size = br
        .js(
            "const d = document.documentElement; return [innerHeight, d.scrollHeight]",
            vec![],
        )
        .await?;
    let s: Vec<u64> = serde_json::from_value(size)?;
    ensure!(
        s[1] <= s[0],
        "{}: the {page} page scrolls ({} px high in a {} px window)",
        br.name,
        s[1],
        s[0]
    );
    Ok(())
}

/// A participant's own log, found by how they joined.
async fn log_of(
    server: &TestServer,
    platform: Platform,
    worker: &str,
) -> Result<(String, Vec<Event>)> {
    let part = server
        .store
        .participant_by_worker(COMPARE, platform, worker)
        .await
        .map_err(|e| anyhow!("store: {e}"))?
        .with_context(|| format!("no participant {worker} on {}", platform.as_str()))?;
    let events = server
        .store
        .events(&format!("log-{}", part.id), 0)
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    Ok((part.id, events))
}

/// The two logs and the leases against what the browsers did.
async fn check(server: &TestServer, study: &LoadedStudy, p: &Played) -> Result<()> {
    let ev = study.study.evaluation.as_ref().context("no evaluation")?;
    let (a_id, a_log) = log_of(server, Platform::Prolific, PROLIFIC_PID).await?;
    let (b_id, b_log) = log_of(server, Platform::Lab, LAB_ID).await?;
    let mut problems: Vec<String> = vec![];
    let mut need = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    let kinds = |log: &[Event]| -> Vec<EventKind> { log.iter().map(|e| e.kind.clone()).collect() };
    let (a, b) = (kinds(&a_log), kinds(&b_log));

    // A: the questions, the practice pair passed, every pair claimed and judged as shown.
    need(
        a.iter().any(|k| matches!(k, EventKind::PageAnswered { page, answers }
            if page == "about-you" && answers.contains_key("english") && answers.contains_key("chatbot_use"))),
        "A: no answers of the `about-you` page".into(),
    );
    let onboarding: Vec<_> = a
        .iter()
        .filter_map(|k| match k {
            EventKind::OnboardingDone {
                passed,
                correct,
                total,
                ..
            } => Some((*passed, *correct, *total)),
            _ => None,
        })
        .collect();
    need(
        onboarding == [(true, 1, 1)],
        format!("A: onboarding should be passed once with 1 of 1 right: {onboarding:?}"),
    );
    need(
        p.onboarding_a.len() == 2,
        format!("A: the practice pair was {:?}", p.onboarding_a),
    );
    let claimed: Vec<(&String, &Vec<String>, ItemPool)> = a
        .iter()
        .filter_map(|k| match k {
            EventKind::ItemClaimed {
                item,
                dialogues,
                pool,
                ..
            } => Some((item, dialogues, *pool)),
            _ => None,
        })
        .collect();
    let judged: Vec<&Judgment> = a
        .iter()
        .filter_map(|k| match k {
            EventKind::Judged(j) => Some(j.as_ref()),
            _ => None,
        })
        .collect();
    need(
        claimed.len() == p.judged.len() && judged.len() == p.judged.len(),
        format!(
            "A: {} pairs judged in the browser, {} claimed and {} judged in the log",
            p.judged.len(),
            claimed.len(),
            judged.len()
        ),
    );
    for (n, seen) in p.judged.iter().enumerate() {
        let pool = if seen.gold_correct.is_some() {
            ItemPool::Gold
        } else {
            ItemPool::Item
        };
        need(
            claimed.get(n) == Some(&(&seen.item, &seen.shown, pool)),
            format!(
                "A: claim {n} should be {} ({pool:?}) shown as {:?}: {:?}",
                seen.item,
                seen.shown,
                claimed.get(n)
            ),
        );
        let Some(j) = judged.get(n) else { continue };
        let chose = &seen.shown[usize::from(seen.side == "right")];
        let systems: Vec<String> = seen.shown.iter().map(|d| ev.system_of(d)).collect();
        need(
            j.item == seen.item
                && j.pool == pool
                && j.dialogues == seen.shown
                && j.systems == systems
                && j.choice.as_ref() == Some(chose)
                && j.justification.as_deref() == Some(seen.justification.as_str()),
            format!(
                "A: judgment {n} should be {} shown {:?}, choosing {chose} ({}) for {:?}: {j:?}",
                seen.item, seen.shown, seen.side, seen.justification
            ),
        );
        need(
            j.gold_correct == seen.gold_correct,
            format!(
                "A: judgment {n} ({}) has gold_correct {:?}, the browser picked {:?}",
                seen.item, j.gold_correct, seen.gold_correct
            ),
        );
        need(
            j.counted == (pool == ItemPool::Item) && !j.surplus,
            format!(
                "A: judgment {n} ({pool:?}) counted = {}, surplus = {}",
                j.counted, j.surplus
            ),
        );
    }
    let gold: Vec<Option<bool>> = judged
        .iter()
        .map(|j| j.gold_correct)
        .filter(Option::is_some)
        .collect();
    need(
        gold == [Some(true), Some(false)],
        format!("A: the gold results should be right then wrong: {gold:?}"),
    );
    let sides: Vec<&str> = p
        .judged
        .iter()
        .filter(|j| j.gold_correct.is_none())
        .map(|j| j.side)
        .collect();
    need(
        sides == ["left", "right"],
        format!("A: the ordinary pairs were answered {sides:?}"),
    );
    need(
        !a.iter().any(|k| matches!(k, EventKind::ScreenedOut { .. })),
        "A: screened out after one gold failure, which the study allows".into(),
    );
    let codes: Vec<&String> = a
        .iter()
        .filter_map(|k| match k {
            EventKind::CompletionIssued { code, .. } => Some(code),
            _ => None,
        })
        .collect();
    // A Prolific participant is shown the study's Prolific code; wozkit's own is logged.
    let prolific = wozkit_core::load::load_builtin(COMPARE).ok().and_then(|s| {
        s.study
            .prolific_code(wozkit_core::platforms::EndingKind::Completed)
            .map(str::to_string)
    });
    need(
        codes.len() == 1 && (codes == [&p.code] || prolific.as_deref() == Some(p.code.as_str())),
        format!(
            "A: the log's completion codes {codes:?}, the page showed {:?}",
            p.code
        ),
    );

    // B: the practice pair failed, screened out for it, nothing claimed, judged or paid.
    need(
        b.iter().any(|k| {
            matches!(
                k,
                EventKind::OnboardingDone {
                    passed: false,
                    correct: 0,
                    total: 1,
                    ..
                }
            )
        }),
        "B: no failed onboarding in the log".into(),
    );
    let screened: Vec<&EventKind> = b
        .iter()
        .filter(|k| matches!(k, EventKind::ScreenedOut { .. }))
        .collect();
    need(
        matches!(
            screened.as_slice(),
            [EventKind::ScreenedOut {
                reason: ScreenReason::Onboarding
            }]
        ),
        format!("B: should be screened out once for onboarding: {screened:?}"),
    );
    need(
        !b.iter().any(|k| {
            matches!(
                k,
                EventKind::ItemClaimed { .. }
                    | EventKind::Judged(_)
                    | EventKind::CompletionIssued { .. }
            )
        }),
        "B: claimed, judged or got a code after failing the practice pair".into(),
    );

    // The leases: A's four, all done; none of B's.
    let leases = server
        .store
        .leases(COMPARE)
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    let mine: Vec<_> = leases.iter().filter(|l| l.worker == a_id).collect();
    need(
        mine.len() == p.judged.len() && mine.iter().all(|l| l.state == LeaseState::Done),
        format!("A: leases should be {} done ones: {mine:?}", p.judged.len()),
    );
    need(
        !leases.iter().any(|l| l.worker == b_id),
        format!("B holds a lease: {leases:?}"),
    );

    if problems.is_empty() {
        Ok(())
    } else {
        bail!(
            "the logs do not match the browsers:\n  {}",
            problems.join("\n  ")
        )
    }
}
