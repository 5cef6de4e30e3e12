//! The questionnaire under concurrent submissions: one answer set per participant and
//! questionnaire, whatever the number of submissions racing (a double click, two tabs); and a
//! questionnaire per role: the user and the wizard of one session answer their own questions.

use futures_util::future::join_all;
use serde_json::json;
use wozkit_core::event::EventKind;

use wozkit_core::event::Role;
use wozkit_core::load::{StudySource, load_text};

use crate::helpers::{Tiny, enter, greet_and_end, paired, spawn_app, spawn_app_in};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submissions_store_one_answer_set() {
    const SUBMISSIONS: usize = 10;
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    greet_and_end(&mut ww, &mut wu).await;
    assert!(user.page().await.body.contains("data-page=\"survey\""));
    let step = user.step().await;

    // Every submission carries a different answer, so the stored one tells which won.
    let forms: Vec<String> = (0..SUBMISSIONS)
        .map(|i| format!("step={step}&q1={}", 1 + i % 5))
        .collect();
    let responses = join_all(forms.iter().map(|f| user.post("/p/survey", f))).await;
    for res in &responses {
        assert_eq!(res.status, 303, "{}", res.body);
        assert_eq!(res.header("location").as_deref(), Some("/p"));
    }
    let page = user.page().await.body;
    assert!(page.contains("data-testid=\"completion-code\""), "{page}");

    let answers: Vec<_> = app
        .events(&session)
        .await
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::SurveyAnswered { .. }))
        .collect();
    assert_eq!(answers.len(), 1, "{answers:#?}");

    // A late resubmission (the back button) changes nothing either.
    let late = user.post("/p/survey", &format!("step={step}&q1=1")).await;
    assert_eq!(late.status, 303);
    let again = app.events(&session).await;
    let count = again
        .iter()
        .filter(|e| matches!(e.kind, EventKind::SurveyAnswered { .. }))
        .count();
    assert_eq!(count, 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_completion_pages_issue_one_code_event() {
    const LOADS: usize = 10;
    let mut app = spawn_app(Tiny::default()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    greet_and_end(&mut ww, &mut wu).await;
    let step = user.step().await;
    // Submitted without following the redirect, so the completion page is not opened yet.
    let res = user.post("/p/survey", &format!("step={step}&q1=3")).await;
    assert_eq!(res.status, 303);

    let pages = join_all((0..LOADS).map(|_| user.page())).await;
    for page in &pages {
        assert_eq!(page.status, 200);
        assert!(page.body.contains("data-testid=\"completion-code\""));
    }
    let issued = app
        .events(&session)
        .await
        .into_iter()
        .filter(|e| matches!(&e.kind, EventKind::CompletionIssued { role, .. } if *role == wozkit_core::event::Role::User))
        .count();
    assert_eq!(issued, 1);
    app.stop().await;
}

/// The tiny study with a questionnaire of each role's own: both have a question `clear` (worded
/// differently), and each has one the other does not.
fn tiny_per_role() -> String {
    let yaml = Tiny::default().yaml();
    let start = yaml.find("survey:").unwrap_or(yaml.len());
    let end = yaml.find("payment:").unwrap_or(yaml.len());
    let survey = r#"survey:
  user:
    title: About the task
    questions:
      - {id: clear, text: Were the messages clear?, kind: likert, points: 5}
      - {id: again, text: Would you work with this assistant again?, kind: choice, options: [sure, never]}
  wizard:
    title: About the interface
    questions:
      - {id: clear, text: Was the state of the robots clear from the panel?, kind: likert, points: 7}
      - {id: workload, text: How demanding was it?, kind: likert, points: 7, reverse: true}
"#;
    format!("{}{survey}{}", &yaml[..start], &yaml[end..])
}

#[tokio::test]
async fn the_user_and_the_wizard_answer_their_own_questionnaires() {
    let study = match load_text("roles.yaml", &tiny_per_role(), StudySource::Dir(".".into())) {
        Ok(s) => s,
        Err(e) => panic!("the study does not load:\n{e}"),
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    greet_and_end(&mut ww, &mut wu).await;
    ww.until_type("ended").await;

    let user_page = user.page().await.body;
    let wizard_page = wizard.page().await.body;
    for (page, own, other) in [
        (
            &user_page,
            "Would you work with this assistant again?",
            "How demanding was it?",
        ),
        (
            &wizard_page,
            "How demanding was it?",
            "Would you work with this assistant again?",
        ),
    ] {
        assert!(page.contains("data-page=\"survey\""), "{page}");
        assert!(page.contains(own), "{page}");
        assert!(!page.contains(other), "{page}");
    }
    assert!(
        user_page.contains("Were the messages clear?"),
        "{user_page}"
    );
    assert!(wizard_page.contains("Was the state of the robots clear from the panel?"));
    // The same id on a different scale: seven points for the wizard, five for the user.
    assert!(
        wizard_page.contains("data-testid=\"clear-7\""),
        "{wizard_page}"
    );
    assert!(
        !user_page.contains("data-testid=\"clear-7\""),
        "{user_page}"
    );

    // The wizard's form is checked against the wizard's questions: the user's answers alone
    // leave the wizard's workload unanswered.
    let wstep = wizard.step().await;
    let wrong = wizard
        .post("/p/survey", &format!("step={wstep}&clear=3&again=sure"))
        .await;
    assert_eq!(wrong.status, 422, "{}", wrong.body);
    assert!(
        wrong.body.contains("data-testid=\"problem-workload\""),
        "{}",
        wrong.body
    );

    let ustep = user.step().await;
    let res = user
        .post("/p/survey", &format!("step={ustep}&clear=4&again=never"))
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    let res = wizard
        .post("/p/survey", &format!("step={wstep}&clear=6&workload=2"))
        .await;
    assert_eq!(res.status, 303, "{}", res.body);

    let mut stored: Vec<(Role, serde_json::Value)> = app
        .events(&session)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::SurveyAnswered { role, answers } => Some((
                role,
                serde_json::to_value(answers).expect("answers as JSON"),
            )),
            _ => None,
        })
        .collect();
    stored.sort_by_key(|(role, _)| *role);
    assert_eq!(
        stored,
        [
            (Role::User, json!({"clear": 4, "again": "never"})),
            (Role::Wizard, json!({"clear": 6, "workload": 2})),
        ]
    );
    app.stop().await;
}

/// The room is its log's one writer while it is in memory: after the end, with the room still
/// lingering for the user's open page, the questionnaire's answers and the completion code go
/// into the log through the room, which folds them and sends them on to the user's page (a
/// write beside the room would reach the log and not the page, and leave the room's fold
/// behind it).
#[tokio::test]
async fn answers_after_the_end_are_written_through_the_lingering_room() {
    let tunables = wozkit_server::Tunables {
        room_linger_ms: 60_000,
        ..crate::helpers::fast()
    };
    let mut app = crate::helpers::spawn_app_tuned(Tiny::default(), tunables).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;
    greet_and_end(&mut ww, &mut wu).await;

    let step = user.step().await;
    let res = user.post("/p/survey", &format!("step={step}&q1=4")).await;
    assert_eq!(res.status, 303, "{}", res.body);
    let answered = wu.event("survey_answered").await;
    assert_eq!(answered["answers"]["q1"], 4, "{answered}");
    assert!(
        user.page()
            .await
            .body
            .contains("data-testid=\"completion-code\"")
    );
    let issued = wu.event("completion_issued").await;
    assert_eq!(issued["role"], "user");

    // Each arrived once, in log order, right after what the room had written before them.
    let events = app.events(&session).await;
    let at = |seq: &serde_json::Value| seq.as_u64().expect("seq") as usize;
    assert!(matches!(
        events[at(&answered["seq"]) - 1].kind,
        EventKind::SurveyAnswered { .. }
    ));
    assert_eq!(at(&issued["seq"]), at(&answered["seq"]) + 1);
    assert_eq!(events.len(), at(&issued["seq"]));
    // The wizard is sent neither: they are the user's.
    assert!(
        ww.seen
            .iter()
            .all(|v| v["event"]["kind"] != "survey_answered"
                && v["event"]["kind"] != "completion_issued")
    );
    app.stop().await;
}
