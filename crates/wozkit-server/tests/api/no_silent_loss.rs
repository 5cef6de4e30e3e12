//! Nothing a participant ticked or typed is dropped without a word by a button that ends the
//! page, per page kind. The buttons that end a page while something may still be pending in
//! another part of it send that part along (`form=`/`formaction`): a skip keeps what was given on
//! the item in the log (`ItemReturned.given`); a submit with a turn or a span typed and not added
//! is refused with a message, what was typed kept in its box. A turn refused for what it says
//! keeps its text too.
//!
//! The other page kinds are covered where they are tested: the chat and arena pages refuse an
//! unsent message at "End the conversation" and store the labels ticked on the last reply
//! (`chat::live_reply_labels_follow_the_rules_and_the_end_keeps_what_was_ticked_or_typed`); the
//! questions, survey and onboarding pages send everything in one form and refuse a missing or
//! wrong answer next to its question with the answers kept (`questions.rs`, `survey.rs`,
//! `evaluation.rs`); the turn-act page's skip keeps the ticked acts (`turn_acts.rs`).

use wozkit_core::event::EventKind;
use wozkit_core::load::{LoadedStudy, StudySource, load_text};

use crate::helpers::{Client, TestApp, hidden, page_kind, spawn_app_in, urlencoding};

fn study(text: &str) -> LoadedStudy {
    load_text("study.yaml", text, StudySource::Dir(".".into())).unwrap_or_else(|e| panic!("{e}"))
}

/// A server with the study `text` alone and one Prolific worker `pid` in it, on its first page
/// (a `kind` page).
async fn one_worker(
    text: &str,
    pid: &str,
    kind: &str,
) -> (TestApp, tempfile::TempDir, Client, String) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let study = study(text);
    let id = study.study.id.clone();
    let app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    let c = app
        .join(&format!(
            "study={id}&PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID=1"
        ))
        .await;
    let body = c.page().await.body;
    assert_eq!(page_kind(&body), kind, "{body}");
    (app, tmp, c, body)
}

/// The item a page shows (`data-item`).
fn item_of(body: &str) -> String {
    body.split("data-item=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the item")
        .to_string()
}

/// Every event of the participant logs.
async fn logged(app: &TestApp) -> Vec<EventKind> {
    let filter = wozkit_store::SessionFilter {
        kind: wozkit_store::SessionKind::Participant,
        ..Default::default()
    };
    let mut out = vec![];
    for s in app.store.list_sessions(&filter).await.expect("logs") {
        out.extend(app.events(&s.id).await.into_iter().map(|e| e.kind));
    }
    out
}

/// Every skip's item and what it kept.
async fn skips(app: &TestApp) -> Vec<(String, Vec<(String, String)>)> {
    logged(app)
        .await
        .into_iter()
        .filter_map(|k| match k {
            EventKind::ItemReturned { item, given, .. } => Some((item, given)),
            _ => None,
        })
        .collect()
}

/// How many judgments the participant logs hold.
async fn judged(app: &TestApp) -> usize {
    logged(app)
        .await
        .iter()
        .filter(|k| matches!(k, EventKind::Judged(_)))
        .count()
}

/// Whether the button `button` (a `data-testid`) belongs to the same form as `submit`: it sits
/// between `submit` and the end of its form, or names that form with `form=`.
fn sends_the_form_of(body: &str, submit: &str, button: &str, form_id: Option<&str>) -> bool {
    let tag = |id: &str| format!("data-testid=\"{id}\"");
    let Some(at) = body.find(&tag(submit)) else {
        return false;
    };
    let end = body[at..].find("</form>").map_or(body.len(), |e| at + e);
    let inside = body[at..end].contains(&tag(button));
    let named = form_id.is_some_and(|f| {
        body.split("<button")
            .any(|b| b.contains(&tag(button)) && b.contains(&format!("form=\"{f}\"")))
    });
    inside || named
}

const RATE: &str = r#"id: rate-skip
title: Rate
flow:
  user:
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: rate
  judgments_per_item: 1
  items_per_worker: 2
  questions:
    - {id: overall, text: Overall?, kind: likert, points: 5}
    - {id: why, text: Why?, kind: text}
  annotate:
    speaker: bot
    kind: checkboxes
    options: [Contradiction, Repetitive, None of these]
    exclusive: [None of these]
  dialogues:
    - {id: d1, system: A, turns: [{speaker: user, text: hi}, {speaker: bot, text: hello there}]}
    - {id: d2, system: B, turns: [{speaker: user, text: hi}, {speaker: bot, text: go away}]}
"#;

#[tokio::test]
async fn a_skipped_rating_keeps_in_the_log_what_was_ticked_and_typed() {
    let (mut app, _tmp, c, body) = one_worker(RATE, "w-skip", "rate").await;
    assert!(
        sends_the_form_of(&body, "judge-submit", "judge-skip", None),
        "the skip button is not part of the rating's form: {body}"
    );
    let item = item_of(&body);
    let lease = hidden(&body, "lease");
    let step = c.step().await;
    // What the browser sends when Skip is pressed after a tick, a scale and a reason.
    let res = c
        .post(
            "/p/skip",
            &format!(
                "step={step}&lease={lease}&turn.0.1=Repetitive&overall=2&why={}",
                urlencoding("it says hello twice")
            ),
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    let skipped = skips(&app).await;
    assert_eq!(
        skipped,
        [(
            item.clone(),
            vec![
                ("turn.0.1".to_string(), "Repetitive".to_string()),
                ("overall".into(), "2".into()),
                ("why".into(), "it says hello twice".into()),
            ]
        )],
        "the skip keeps what was given, not the form's own fields"
    );

    // A skip with nothing given keeps nothing.
    let body = c.page().await.body;
    assert_eq!(page_kind(&body), "rate", "{body}");
    let next = hidden(&body, "lease");
    assert_ne!(next, lease, "a new item after the skip");
    let step = c.step().await;
    let res = c
        .post("/p/skip", &format!("step={step}&lease={next}&why=+"))
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    let skipped = skips(&app).await;
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[1].1.is_empty(), "{skipped:?}");
    app.stop().await;
}

const WRITE: &str = r#"id: sd-pending
title: Write
flow:
  user:
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: self_dialog
  judgments_per_item: 1
  items_per_worker: 2
  self_dialog:
    min_turns: 2
    max_turns: 3
    max_chars: 40
    scenarios:
      - {id: pizza-1, instructions: "Order a pizza."}
      - {id: taxi-1, instructions: "Book a taxi."}
"#;

/// The text in the next turn's box.
fn next_box(body: &str) -> String {
    body.split("id=\"sd-text\"")
        .nth(1)
        .and_then(|s| s.split('>').nth(1))
        .and_then(|s| s.split("</textarea").next())
        .unwrap_or_default()
        .to_string()
}

async fn turn(c: &Client, lease: &str, index: usize, speaker: &str, text: &str) -> (u16, String) {
    let res = c
        .post(
            "/p/self-dialog/turn",
            &format!(
                "lease={lease}&index={index}&speaker={speaker}&text={}",
                urlencoding(text)
            ),
        )
        .await;
    (res.status, res.body)
}

#[tokio::test]
async fn a_turn_typed_and_not_added_is_refused_at_submit_kept_in_its_box_and_kept_at_a_skip() {
    let (mut app, _tmp, c, body) = one_worker(WRITE, "w-write", "self-dialog").await;
    let lease = hidden(&body, "lease");

    // A turn refused for what it says keeps its text in the box.
    let long = "This turn is far longer than the forty characters allowed.";
    let (status, body) = turn(&c, &lease, 0, "USER", long).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(next_box(&body), long, "the refused turn is kept: {body}");

    assert_eq!(turn(&c, &lease, 0, "USER", "A pizza, please.").await.0, 303);
    assert_eq!(turn(&c, &lease, 1, "ASSISTANT", "Which size?").await.0, 303);
    let body = c.page().await.body;
    for button in ["sd-submit", "judge-skip"] {
        assert!(
            sends_the_form_of(&body, "sd-add", button, Some("sd-next")),
            "{button} does not send the next turn's form: {body}"
        );
    }

    // Submit while the third turn is typed and not added: refused, the text kept, nothing
    // stored; what the browser sends is the next turn's form.
    let typed = "Large, with olives.";
    let res = c
        .post(
            "/p/self-dialog/submit",
            &format!(
                "lease={lease}&index=2&speaker=USER&text={}",
                urlencoding(typed)
            ),
        )
        .await;
    assert_eq!(res.status, 422, "{}", res.body);
    assert!(
        res.body
            .contains("You have written a turn that is not added yet"),
        "{}",
        res.body
    );
    assert_eq!(next_box(&res.body), typed, "{}", res.body);
    assert!(
        judged(&app).await == 0,
        "nothing is submitted while a turn is pending"
    );
    // With the box empty the dialogue is submitted.
    let res = c
        .post(
            "/p/self-dialog/submit",
            &format!("lease={lease}&index=2&speaker=USER&text="),
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    assert_eq!(judged(&app).await, 1);

    // The second scenario: a skip with a turn typed keeps it in the log.
    let body = c.page().await.body;
    assert_eq!(page_kind(&body), "self-dialog", "{body}");
    let second = hidden(&body, "lease");
    let item = item_of(&body);
    let res = c
        .post(
            "/p/skip",
            &format!(
                "lease={second}&index=0&speaker=USER&text={}",
                urlencoding("A taxi")
            ),
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    let skipped = skips(&app).await;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].0, item);
    assert!(
        skipped[0]
            .1
            .contains(&("text".to_string(), "A taxi".to_string())),
        "{skipped:?}"
    );
    app.stop().await;
}

const SPANS: &str = r#"id: sp-pending
title: Spans
flow:
  user:
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: spans
  judgments_per_item: 1
  items_per_worker: 1
  spans:
    slots: [pizza.size, pizza.topping]
  dialogues:
    - {id: d1, system: writer, turns: [{speaker: user, text: "A large pizza with olives."}, {speaker: bot, text: "Sure."}]}
"#;

#[tokio::test]
async fn a_span_typed_and_not_marked_is_refused_at_submit_with_what_was_typed_kept() {
    let (mut app, _tmp, c, body) = one_worker(SPANS, "w-spans", "spans").await;
    let lease = hidden(&body, "lease");
    for button in ["sp-submit", "judge-skip"] {
        assert!(
            sends_the_form_of(&body, "sp-add", button, Some("sp-mark")),
            "{button} does not send the marking form: {body}"
        );
    }
    let mark = |form: String| {
        let c = &c;
        async move { c.post("/p/spans/mark", &form).await }
    };
    let res = mark(format!(
        "lease={lease}&turn=0&text=large&start=&end=&slot=pizza.size"
    ))
    .await;
    assert_eq!(res.status, 303, "{}", res.body);

    // Submit with a second span's words typed: refused, the words, turn and slot kept.
    let res = c
        .post(
            "/p/spans/submit",
            &format!("lease={lease}&turn=0&text=olives&start=&end=&slot=pizza.topping"),
        )
        .await;
    assert_eq!(res.status, 422, "{}", res.body);
    assert!(
        res.body.contains("You have a span that is not marked yet"),
        "{}",
        res.body
    );
    assert!(
        res.body.contains("id=\"sp-words\" value=\"olives\""),
        "the words are kept: {}",
        res.body
    );
    assert!(
        res.body.contains("value=\"pizza.topping\" selected"),
        "the slot is kept: {}",
        res.body
    );
    assert!(judged(&app).await == 0);
    let res = c
        .post(
            "/p/spans/submit",
            &format!("lease={lease}&turn=0&text=&start=&end=&slot=pizza.size"),
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    assert_eq!(judged(&app).await, 1);
    app.stop().await;
}
