//! Evaluation flows over HTTP: a page's `when` skips it or shows it by an earlier answer, a
//! failed onboarding screens the worker out, a comparison with a missing reason comes back with
//! the problem next to the field, a judgment closes its lease and is logged once, a reload
//! shows the same item, a worker with no item left gets the study's page and code, and a
//! blocklisted worker is refused at entry; a page's `next` jumps over pages, and a worker's
//! place, item and left/right placement survive a server restart.

use wozkit_core::event::{EventKind, ItemPool, ScreenReason};
use wozkit_core::load::{StudySource, load_text};
use wozkit_store::LeaseState;

use crate::helpers::{Client, TestApp, hidden, page_kind, spawn_app_in};

const STUDY: &str = r#"id: eval-mini
title: Compare
flow:
  user:
    - {kind: consent}
    - {id: about, kind: questions, questions: [{id: native, text: Native speaker?, kind: choice, options: ["yes", "no"]}]}
    - {id: help, kind: instructions, when: "answers.native == 'no'", text: "Take your time."}
    - {kind: onboarding}
    - {kind: compare}
    - {kind: completion}
evaluation:
  task: compare
  judgments_per_item: 1
  items_per_worker: 1
  pairs: {rule: all_systems}
  justification: {min_words: 2}
  no_items: {text: "All conversations have been judged.", code: true}
  blocklist: [banned-worker]
  onboarding:
    items: [{a: g1, b: g2, better: g1}]
    fail: {text: "Sorry, the practice answer was not right."}
  dialogues:
    - {id: a1, system: A, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: hello there}]}
    - {id: b1, system: B, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: go away}]}
    - {id: g1, system: A, turns: [{speaker: user, text: hi}, {speaker: bot, text: good day}]}
    - {id: g2, system: B, turns: [{speaker: user, text: hi}, {speaker: bot, text: asdf qwer}]}
"#;

async fn app() -> (TestApp, tempfile::TempDir) {
    let study = match load_text("eval.yaml", STUDY, StudySource::Dir(".".into())) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    (app, tmp)
}

/// Posts the current page's form with `extra` fields; returns the status.
async fn submit(c: &Client, path: &str, extra: &str) -> u16 {
    let step = c.step().await;
    c.post(path, &format!("step={step}{extra}")).await.status
}

/// The side (`left`/`right`) on which the page's first practice item shows `text`.
fn side_of(body: &str, text: &str) -> &'static str {
    let left = body
        .split("data-testid=\"dialogue-1\"")
        .next()
        .unwrap_or_default();
    if left.contains(text) { "left" } else { "right" }
}

/// Consent, then the questions page answered `native`.
async fn through_questions(c: &Client, native: &str) {
    assert_eq!(submit(c, "/p/next", "").await, 303);
    assert_eq!(page_kind(&c.page().await.body), "questions");
    assert_eq!(
        submit(c, "/p/answers", "").await,
        422,
        "an answer is required"
    );
    assert_eq!(
        submit(c, "/p/answers", &format!("&native={native}")).await,
        303
    );
}

async fn log_kinds(app: &TestApp, participant_log: &str) -> Vec<EventKind> {
    app.events(participant_log)
        .await
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

async fn log_of(app: &TestApp) -> Vec<String> {
    let filter = wozkit_store::SessionFilter {
        kind: wozkit_store::SessionKind::Participant,
        ..Default::default()
    };
    app.store
        .list_sessions(&filter)
        .await
        .expect("logs")
        .into_iter()
        .map(|s| s.id)
        .collect()
}

#[tokio::test]
async fn a_worker_is_screened_out_or_judges_once_and_the_next_finds_nothing_left() {
    let (mut app, _tmp) = app().await;

    // A worker who fails the practice item is screened out with the study's text, no code.
    let fails = app
        .join("study=eval-mini&PROLIFIC_PID=w-fail&STUDY_ID=s&SESSION_ID=1")
        .await;
    through_questions(&fails, "yes").await;
    let body = fails.page().await.body;
    assert_eq!(page_kind(&body), "onboarding", "`when` false: help skipped");
    let wrong = side_of(&body, "asdf qwer");
    assert_eq!(
        submit(&fails, "/p/onboarding", &format!("&ob0={wrong}")).await,
        303
    );
    let body = fails.page().await.body;
    assert_eq!(page_kind(&body), "screened", "{body}");
    assert!(body.contains("the practice answer was not right"));
    assert!(!body.contains("completion-code"));

    // A careful worker sees the help page (`when` true), passes, and judges the one pair.
    let good = app
        .join("study=eval-mini&PROLIFIC_PID=w-good&STUDY_ID=s&SESSION_ID=2")
        .await;
    through_questions(&good, "no").await;
    assert_eq!(page_kind(&good.page().await.body), "instructions");
    assert_eq!(submit(&good, "/p/next", "").await, 303);
    let body = good.page().await.body;
    let right = side_of(&body, "good day");
    assert_eq!(
        submit(&good, "/p/onboarding", &format!("&ob0={right}")).await,
        303
    );
    let body = good.page().await.body;
    assert_eq!(page_kind(&body), "compare", "{body}");
    let lease = hidden(&body, "lease");
    assert_eq!(
        hidden(&good.page().await.body, "lease"),
        lease,
        "a reload keeps the item"
    );
    let choice = side_of(&body, "hello there");
    let short = submit(
        &good,
        "/p/judge",
        &format!("&lease={lease}&choice={choice}&justification=ok"),
    )
    .await;
    assert_eq!(short, 422, "two words are needed");
    assert!(
        good.post(
            "/p/judge",
            &format!("step={}&lease={lease}&choice={choice}", good.step().await)
        )
        .await
        .body
        .contains("data-testid=\"problem-justification\"")
    );
    let ok = submit(
        &good,
        "/p/judge",
        &format!("&lease={lease}&choice={choice}&justification=more+polite+answer"),
    )
    .await;
    assert_eq!(ok, 303);
    // A second submission of the same lease changes nothing.
    let again = good
        .post(
            "/p/judge",
            &format!(
                "step=4:compare&lease={lease}&choice={choice}&justification=more+polite+answer"
            ),
        )
        .await;
    assert_eq!(again.status, 303);
    let body = good.page().await.body;
    assert_eq!(page_kind(&body), "completion", "{body}");

    // The next worker finds nothing left: the study's page, with a code.
    let late = app
        .join("study=eval-mini&PROLIFIC_PID=w-late&STUDY_ID=s&SESSION_ID=3")
        .await;
    through_questions(&late, "yes").await;
    let body = late.page().await.body;
    let right = side_of(&body, "good day");
    assert_eq!(
        submit(&late, "/p/onboarding", &format!("&ob0={right}")).await,
        303
    );
    let body = late.page().await.body;
    assert_eq!(page_kind(&body), "no-items", "{body}");
    assert!(body.contains("All conversations have been judged."));
    assert!(body.contains("data-testid=\"completion-code\""));

    // The store: one lease, done, by the careful worker.
    let leases = app.store.leases("eval-mini").await.expect("leases");
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(leases[0].state, LeaseState::Done);
    assert_eq!(leases[0].item_id, "a1~b1");

    // The logs: every answer and judgment, once.
    let logs = log_of(&app).await;
    assert_eq!(logs.len(), 3, "one log per worker: {logs:?}");
    let mut judged = 0;
    let mut screened = 0;
    for log in &logs {
        for kind in log_kinds(&app, log).await {
            match kind {
                EventKind::Judged(j) => {
                    judged += 1;
                    assert!(j.counted && !j.surplus);
                    assert_eq!(j.pool, ItemPool::Item);
                    assert_eq!(j.choice.as_deref(), Some("a1"));
                    assert_eq!(j.justification.as_deref(), Some("more polite answer"));
                    assert_eq!(j.systems.len(), 2);
                    assert_eq!(
                        j.dialogues
                            .iter()
                            .position(|d| d == "a1")
                            .map(|i| j.systems[i].as_str()),
                        Some("A")
                    );
                }
                EventKind::ScreenedOut { reason } => {
                    screened += 1;
                    assert_eq!(reason, ScreenReason::Onboarding);
                }
                _ => {}
            }
        }
    }
    assert_eq!((judged, screened), (1, 1));
    app.stop().await;
}

#[tokio::test]
async fn a_blocklisted_worker_is_refused_at_entry() {
    let (mut app, _tmp) = app().await;
    let res = app
        .http(
            "GET",
            "/join?study=eval-mini&PROLIFIC_PID=banned-worker&STUDY_ID=s&SESSION_ID=1",
            &[],
            "",
        )
        .await;
    assert_eq!(res.status, 403, "{}", res.body);
    assert!(res.body.contains("not open to your worker id"));
    app.stop().await;
}

const JUMPS: &str = r#"id: eval-jumps
title: Compare
flow:
  user:
    - {kind: consent}
    - {id: about, kind: questions, questions: [{id: native, text: Native speaker?, kind: choice, options: ["yes", "no"]}]}
    - {id: fast, kind: instructions, when: "answers.native == 'yes'", text: "Fast track.", next: judge}
    - {id: slow, kind: instructions, text: "Slow track."}
    - {id: judge, kind: compare}
    - {kind: completion}
evaluation:
  task: compare
  judgments_per_item: 1
  items_per_worker: 1
  pairs: {rule: all_systems}
  dialogues:
    - {id: a1, system: A, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: hello there}]}
    - {id: b1, system: B, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: go away}]}
    - {id: a2, system: A, scenario: s2, turns: [{speaker: user, text: bye}, {speaker: bot, text: farewell}]}
    - {id: b2, system: B, scenario: s2, turns: [{speaker: user, text: bye}, {speaker: bot, text: whatever}]}
"#;

fn jumps_study() -> wozkit_core::load::LoadedStudy {
    match load_text("jumps.yaml", JUMPS, StudySource::Dir(".".into())) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

/// The text of the page's left-hand dialogue, to compare placements.
fn left_text(body: &str) -> String {
    body.split("data-testid=\"dialogue-1\"")
        .next()
        .unwrap_or_default()
        .split("data-testid=\"dialogue-0\"")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_jump_skips_pages_and_the_item_and_its_sides_survive_a_server_restart() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), jumps_study()).await;

    // `native = yes`: the fast page, whose `next` jumps over the slow one to the comparison.
    let fast = app
        .join("study=eval-jumps&PROLIFIC_PID=w-fast&STUDY_ID=s&SESSION_ID=1")
        .await;
    through_questions(&fast, "yes").await;
    let body = fast.page().await.body;
    assert_eq!(page_kind(&body), "instructions");
    assert!(body.contains("Fast track."), "{body}");
    assert!(
        !body.contains("Your role"),
        "no role to announce without a room"
    );
    assert_eq!(submit(&fast, "/p/next", "").await, 303);
    let before = fast.page().await.body;
    assert_eq!(page_kind(&before), "compare", "the jump skips `slow`");

    // `native = no`: the fast page is skipped (its `when` is false), the slow one shown.
    let slow = app
        .join("study=eval-jumps&PROLIFIC_PID=w-slow&STUDY_ID=s&SESSION_ID=2")
        .await;
    through_questions(&slow, "no").await;
    let body = slow.page().await.body;
    assert!(body.contains("Slow track."), "{body}");
    assert!(!body.contains("Fast track."));
    assert_eq!(submit(&slow, "/p/next", "").await, 303);
    assert_eq!(page_kind(&slow.page().await.body), "compare");

    // The server stops and starts again on the same data: the worker's place, item and sides
    // are the same.
    let lease = hidden(&before, "lease");
    assert!(!lease.is_empty());
    app.stop().await;
    let app = spawn_app_in(tmp.path().to_path_buf(), jumps_study()).await;
    let fast = Client {
        addr: app.addr,
        ..fast.clone()
    };
    let after = fast.page().await.body;
    assert_eq!(page_kind(&after), "compare", "{after}");
    assert_eq!(
        hidden(&after, "lease"),
        lease,
        "the same lease after a restart"
    );
    assert_eq!(
        left_text(&after),
        left_text(&before),
        "the same dialogue on the left"
    );
    assert!(!left_text(&after).is_empty());
    let choice =
        if left_text(&after).contains("hello there") || left_text(&after).contains("farewell") {
            "left"
        } else {
            "right"
        };
    assert_eq!(
        submit(
            &fast,
            "/p/judge",
            &format!("&lease={lease}&choice={choice}&justification=sounds+more+polite")
        )
        .await,
        303
    );
    assert_eq!(page_kind(&fast.page().await.body), "completion");
    let leases = app.store.leases("eval-jumps").await.expect("leases");
    let done: Vec<_> = leases
        .iter()
        .filter(|l| l.state == LeaseState::Done)
        .collect();
    assert_eq!(done.len(), 1, "{leases:?}");
    assert_eq!(done[0].id, lease);
}

/// A rating of one dialogue whose bot turns are labelled, `None of these` exclusive and a label
/// required on every turn.
const LABELLED: &str = r#"id: labelled
title: Label the replies
flow:
  user:
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: rate
  judgments_per_item: 1
  items_per_worker: 1
  questions:
    - {id: overall, text: Overall?, kind: likert, points: 5}
  annotate:
    speaker: bot
    kind: checkboxes
    options: [Contradiction, Repetitive, None of these]
    exclusive: [None of these]
    required: true
  no_items: {text: "Done.", code: true}
  dialogues:
    - {id: d1, system: A, turns: [{speaker: user, text: hi}, {speaker: bot, text: hello there}, {speaker: user, text: and?}, {speaker: bot, text: hello there}]}
"#;

#[tokio::test]
async fn contradictory_or_missing_turn_labels_are_refused_next_to_the_turn() {
    let study = match load_text("labelled.yaml", LABELLED, StudySource::Dir(".".into())) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    let c = app
        .join("study=labelled&PROLIFIC_PID=w-lab&STUDY_ID=s&SESSION_ID=1")
        .await;
    let body = c.page().await.body;
    assert_eq!(page_kind(&body), "rate", "{body}");
    let lease = hidden(&body, "lease");
    let post = |extra: String| {
        let c = &c;
        let lease = lease.clone();
        async move {
            let step = c.step().await;
            c.post(
                "/p/judge",
                &format!("step={step}&lease={lease}&overall=4{extra}"),
            )
            .await
        }
    };

    // Turn 1: "Contradiction" with "None of these"; turn 3: nothing ticked.
    let res = post("&turn.0.1=Contradiction&turn.0.1=None+of+these".into()).await;
    assert_eq!(res.status, 422, "{}", res.body);
    let at = |turn: usize| {
        let marker = format!("data-testid=\"problem-turn.0.{turn}\"");
        let start = res
            .body
            .find(&marker)
            .unwrap_or_else(|| panic!("no problem at turn {turn}: {}", res.body));
        res.body[start..]
            .split("</p>")
            .next()
            .unwrap_or("")
            .to_string()
    };
    let contradiction = at(1);
    assert!(
        contradiction.contains("“None of these” cannot be ticked together with “Contradiction”"),
        "{contradiction}"
    );
    assert!(at(3).contains("Tick at least one option"), "{}", at(3));
    assert!(
        res.body.contains("value=\"Contradiction\" checked"),
        "the ticks are kept: {}",
        res.body
    );
    for l in log_of(&app).await {
        let kinds = log_kinds(&app, &l).await;
        assert!(
            !kinds.iter().any(|k| matches!(k, EventKind::Judged(_))),
            "nothing stored: {kinds:?}"
        );
    }

    // Consistent labels on every turn are stored.
    let res = post("&turn.0.1=Contradiction&turn.0.3=None+of+these".into()).await;
    assert_eq!(res.status, 303, "{}", res.body);
    let mut labels = vec![];
    for l in log_of(&app).await {
        for k in log_kinds(&app, &l).await {
            if let EventKind::Judged(j) = k {
                labels.extend(j.turns.iter().map(|t| (t.turn, t.labels.clone())));
            }
        }
    }
    assert_eq!(
        labels,
        [
            (1, vec!["Contradiction".to_string()]),
            (3, vec!["None of these".to_string()])
        ]
    );
    app.stop().await;
}

#[test]
fn an_exclusive_option_must_be_one_of_the_options() {
    let yaml = LABELLED.replace("exclusive: [None of these]", "exclusive: [None of thes]");
    let err = match load_text("labelled.yaml", &yaml, StudySource::Dir(".".into())) {
        Ok(_) => panic!("loads"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("`None of thes` is not one of the options"),
        "{err}"
    );
}
