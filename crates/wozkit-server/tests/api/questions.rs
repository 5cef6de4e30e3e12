//! The questionnaire with one question of every kind: a wrong answer to any of them gives the
//! page back with the message inside that question's fieldset and every answer kept; a right
//! form stores typed answers and the order each shuffled question was shown in. A built-in
//! study's questionnaire still goes through.

use serde_json::{Value, json};
use wozkit_core::event::{EventKind, Role};
use wozkit_core::load::{StudySource, load_text};

use crate::helpers::{Client, TestApp, Tiny, enter, greet_and_end, paired, spawn_app_in};

const EVERY_KIND: &str = "survey:
  title: Every kind
  questions:
    - {id: mood, text: How do you feel?, kind: likert, points: 5, low: Bad, mid: So-so, high: Good}
    - {id: colour, text: Favourite colour?, kind: choice, options: [red, green, blue, violet], shuffle: true}
    - {id: tools, text: Which tools?, kind: multiple, options: [map, radio, drone], min_choices: 1, max_choices: 2}
    - {id: why, text: Why?, kind: text, min_words: 2, max_words: 20}
    - {id: age, text: Your age?, kind: number, min: 18, max: 120, integer: true}
    - id: sus
      text: About the system
      kind: matrix
      points: 5
      shuffle: true
      rows: [{id: easy, text: It was easy}, {id: complex, text: It was complex, reverse: true}]
    - {id: rank, text: Rank these, kind: ranking, options: [speed, safety, cost], shuffle: true}
    - {id: note, text: Anything else?, kind: comment}
";

/// The tiny study with `survey` (YAML from `survey:` on) as its questionnaire.
fn tiny_with(survey: &str) -> String {
    let yaml = Tiny::default().yaml();
    let start = yaml.find("survey:").unwrap_or(yaml.len());
    let end = yaml.find("payment:").unwrap_or(yaml.len());
    format!("{}{survey}{}", &yaml[..start], &yaml[end..])
}

/// A server with that study, and the user at its questionnaire: (app, user, session, temp dir).
async fn at_survey(yaml: &str) -> (TestApp, Client, String, tempfile::TempDir) {
    let study = match load_text("q.yaml", yaml, StudySource::Dir(".".into())) {
        Ok(s) => s,
        Err(e) => panic!("the study does not load:\n{e}"),
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    greet_and_end(&mut ww, &mut wu).await;
    let page = user.page().await.body;
    assert!(page.contains("data-page=\"survey\""), "{page}");
    (app, user, session, tmp)
}

/// `application/x-www-form-urlencoded` of the pairs.
fn encode<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k.as_ref()), enc(v.as_ref())))
        .collect::<Vec<_>>()
        .join("&")
}

fn valid() -> Vec<(&'static str, &'static str)> {
    vec![
        ("mood", "4"),
        ("colour", "green"),
        ("tools", "map"),
        ("tools", "drone"),
        ("why", "because it worked"),
        ("age", "33"),
        ("sus.easy", "5"),
        ("sus.complex", "2"),
        ("rank.0", "2"),
        ("rank.1", "1"),
        ("rank.2", "3"),
        ("note", ""),
    ]
}

/// The form of `step` with `valid()` answers, `name`'s values replaced by `values`.
fn with(step: &str, name: &str, values: &[&str]) -> String {
    let mut form: Vec<(&str, &str)> = vec![("step", step)];
    form.extend(valid().into_iter().filter(|(n, _)| *n != name));
    form.extend(values.iter().map(|v| (name, *v)));
    encode(&form)
}

/// The markup of question `id`: from its fieldset to the next question's.
fn question<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("data-testid=\"question-{id}\""))
        .unwrap_or_else(|| panic!("no question {id} in {page}"));
    let rest = &page[start..];
    let end = rest[1..]
        .find("<fieldset class=\"question")
        .map(|e| e + 1)
        .or_else(|| rest.find("</form>"))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The order the page shows `ids` in (each a test id present once).
fn page_order(page: &str, ids: &[String]) -> Vec<usize> {
    let mut at: Vec<(usize, usize)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let pos = page
                .find(&format!("data-testid=\"{id}\""))
                .unwrap_or_else(|| panic!("no {id} in the page"));
            (pos, i)
        })
        .collect();
    at.sort_unstable();
    at.into_iter().map(|(_, i)| i).collect()
}

#[tokio::test]
async fn a_wrong_answer_of_each_kind_is_shown_next_to_its_question_with_the_answers_kept() {
    let (mut app, user, session, _tmp) = at_survey(&tiny_with(EVERY_KIND)).await;
    let step = user.step().await;
    let long = "word ".repeat(401);
    let s = step.as_str();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "mood",
            with(s, "mood", &["9"]),
            "Choose a point from 1 to 5.",
        ),
        (
            "colour",
            with(s, "colour", &["purple"]),
            "Choose one of the options.",
        ),
        (
            "tools",
            with(s, "tools", &["map", "radio", "drone"]),
            "Choose between 1 and 2 options.",
        ),
        (
            "why",
            with(s, "why", &["yes"]),
            "Write between 2 and 20 words (you wrote 1 word).",
        ),
        (
            "age",
            with(s, "age", &["17"]),
            "Enter a whole number from 18 to 120.",
        ),
        (
            "sus",
            with(s, "sus.complex", &[]),
            "Please answer every row (1 row left).",
        ),
        (
            "rank",
            with(s, "rank.2", &["1"]),
            "Give each option a different rank from 1 to 3.",
        ),
        (
            "note",
            with(s, "note", &[&long]),
            "Please keep the answer under 2000 characters.",
        ),
    ];
    for (id, form, message) in &cases {
        let res = user.post("/p/survey", form).await;
        assert_eq!(res.status, 422, "{id}: {}", res.body);
        let page = &res.body;
        let own = question(page, id);
        assert!(own.contains(&format!("<p class=\"problem\" id=\"{id}-problem\" role=\"alert\" data-testid=\"problem-{id}\">{message}</p>")), "{id}: {own}");
        assert!(
            own.contains(&format!("{id}-problem\" aria-invalid=\"true\"")),
            "{id}: {own}"
        );
        assert_eq!(page.matches("class=\"problem\"").count(), 1, "{id}: {page}");
        // The other answers are still there.
        if *id != "why" {
            assert!(
                page.contains(">because it worked</textarea>"),
                "{id}: {page}"
            );
        }
        if *id != "age" {
            assert!(page.contains("value=\"33\""), "{id}");
        }
        if *id != "tools" {
            assert!(
                question(page, "tools").contains("data-testid=\"tools-2\" checked"),
                "{id}"
            );
        }
        if *id != "mood" {
            assert!(
                page.contains("data-testid=\"mood-4\" required checked"),
                "{id}"
            );
        }
    }
    // And the wrong answers themselves, so the participant can correct them.
    let res = user.post("/p/survey", &cases[3].1).await;
    assert!(res.body.contains(">yes</textarea>"));
    let res = user.post("/p/survey", &cases[2].1).await;
    assert!(question(&res.body, "tools").contains("data-testid=\"tools-1\" checked"));
    let res = user.post("/p/survey", &cases[6].1).await;
    assert!(question(&res.body, "rank").contains(
        "data-testid=\"rank.2\" required><option value=\"\">–</option><option value=\"1\" selected>"
    ));

    let stored = app
        .events(&session)
        .await
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::SurveyAnswered { .. }))
        .count();
    assert_eq!(stored, 0, "a refused form stores nothing");
    app.stop().await;
}

#[tokio::test]
async fn a_right_form_stores_typed_answers_and_the_orders_shown() {
    let (mut app, user, session, _tmp) = at_survey(&tiny_with(EVERY_KIND)).await;
    let page = user.page().await.body;
    // Every kind is there, as plain form controls.
    for control in [
        "type=\"radio\" name=\"mood\"",
        "type=\"radio\" name=\"colour\"",
        "type=\"checkbox\" name=\"tools\"",
        "<textarea name=\"why\"",
        "type=\"number\" name=\"age\"",
        "type=\"radio\" name=\"sus.easy\"",
        "<select name=\"rank.0\"",
        "<textarea name=\"note\"",
    ] {
        assert!(page.contains(control), "no {control} in {page}");
    }
    assert!(page.contains("<span class=\"plabel\">So-so</span>"));
    // The shuffled orders stay the same on reload.
    let colours: Vec<String> = (0..4).map(|i| format!("colour-{i}")).collect();
    let rows: Vec<String> = ["easy", "complex"]
        .iter()
        .map(|r| format!("row-sus.{r}"))
        .collect();
    let ranks: Vec<String> = (0..3).map(|i| format!("rank.{i}")).collect();
    let again = user.page().await.body;
    for ids in [&colours, &rows, &ranks] {
        assert_eq!(page_order(&page, ids), page_order(&again, ids));
    }

    let step = user.step().await;
    let mut body = vec![("step", step.as_str())];
    body.extend(valid());
    let res = user.post("/p/survey", &encode(&body)).await;
    assert_eq!(res.status, 303, "{}", res.body);

    let answers = app
        .events(&session)
        .await
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::SurveyAnswered {
                role: Role::User,
                answers,
            } => Some(answers),
            _ => None,
        })
        .expect("the answers are stored");
    assert_eq!(answers["mood"], json!(4));
    assert_eq!(answers["colour"], json!("green"));
    assert_eq!(answers["tools"], json!(["map", "drone"]));
    assert_eq!(answers["why"], json!("because it worked"));
    assert_eq!(answers["age"], json!(33));
    assert_eq!(answers["sus.easy"], json!(5));
    assert_eq!(answers["sus.complex"], json!(2));
    assert_eq!(answers["rank"], json!(["safety", "speed", "cost"]));
    assert!(
        !answers.contains_key("note"),
        "an empty comment is no answer"
    );
    // The orders stored are the ones the page showed.
    let shown = |options: &[&str], ids: &[String]| -> Value {
        json!(
            page_order(&page, ids)
                .into_iter()
                .map(|i| options[i])
                .collect::<Vec<_>>()
        )
    };
    assert_eq!(
        answers["colour:shown"],
        shown(&["red", "green", "blue", "violet"], &colours)
    );
    assert_eq!(answers["sus:shown"], shown(&["easy", "complex"], &rows));
    assert_eq!(
        answers["rank:shown"],
        shown(&["speed", "safety", "cost"], &ranks)
    );
    assert!(
        !answers.contains_key("tools:shown"),
        "only shuffled questions record an order"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_built_in_woz_questionnaire_still_goes_through() {
    let builtin = include_str!("../../../wozkit-core/studies/offshore-emergency/study.yaml");
    let start = builtin.find("\nsurvey:").map(|i| i + 1).unwrap_or(0);
    let end = builtin
        .find("\npayment:")
        .map(|i| i + 1)
        .unwrap_or(builtin.len());
    let (mut app, user, session, _tmp) = at_survey(&tiny_with(&builtin[start..end])).await;
    let page = user.page().await.body;
    assert_eq!(page.matches("class=\"likert\"").count(), 4);
    assert!(page.contains("<span class=\"plabel\">Very badly</span>"));
    let step = user.step().await;
    let form = encode(&[
        ("step", step.as_str()),
        ("collaboration", "6"),
        ("information_ease", "5"),
        ("task_difficulty", "2"),
        ("expertise", "4"),
        ("comments", "The robots were easy to follow."),
    ]);
    let res = user.post("/p/survey", &form).await;
    assert_eq!(res.status, 303, "{}", res.body);
    let answers = app
        .events(&session)
        .await
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::SurveyAnswered { answers, .. } => Some(answers),
            _ => None,
        })
        .expect("the answers are stored");
    assert_eq!(answers["task_difficulty"], json!(2));
    assert_eq!(
        answers["comments"],
        json!("The robots were easy to follow.")
    );
    assert_eq!(answers.len(), 5);
    app.stop().await;
}
