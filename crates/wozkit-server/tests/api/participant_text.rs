//! What participants read: a session of the built-in offshore study played over the real
//! sockets, and every frame the operator receives scanned for the study's internal names (action
//! ids, dialogue-act labels, state ids) and for Markdown backticks; the assistant's refusals are
//! plain text that names robots and actions by their labels. The waiting page keeps the
//! study's own words for its status, a study without robots shows no robot panels, and a label
//! that already says "(optional)" is not marked a second time. The wizard's action panel opens on
//! a combination the engine accepts, and says why when there is none.

use serde_json::{Value, json};
use wozkit_core::load::{LoadedStudy, StudySource, load_builtin, load_text};

use crate::helpers::{Tiny, enter, join_past_first_page, paired, spawn_app, spawn_app_in};

/// The offshore study, its emergency pinned to the defaults (the fire in the east tower): the
/// sessions here are scripted against known places.
fn offshore() -> LoadedStudy {
    let mut study = load_builtin("offshore-emergency").unwrap_or_else(|e| panic!("{e}"));
    wozkit_core::scenario::pin_defaults(&mut study.study);
    study
}

/// Every string in a frame with the key it sits under. Subtask ids are skipped: the page needs
/// them to find the labels, and two of them (`inspect`, `extinguish`) are spelled like actions.
fn strings<'a>(v: &'a Value, key: &str, out: &mut Vec<(String, &'a str)>) {
    if matches!(key, "subtask" | "subtasks" | "milestones") {
        return;
    }
    match v {
        Value::String(s) => out.push((key.to_string(), s)),
        Value::Array(a) => a.iter().for_each(|x| strings(x, key, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| strings(x, k, out)),
        _ => {}
    }
}

/// The study's internal names that the operator must never receive.
fn internal_names(study: &LoadedStudy) -> (Vec<String>, Vec<String>) {
    let st = &study.study;
    // Whole values: action and state ids (short words like `send` may appear inside sentences).
    let ids = st
        .actions
        .iter()
        .map(|a| a.id.clone())
        .chain(st.states.iter().map(|s| s.id.clone()))
        .collect();
    // Anywhere in a text: the dialogue-act labels of actions (`activate.robot`).
    let acts = st.actions.iter().filter_map(|a| a.act.clone()).collect();
    (ids, acts)
}

#[tokio::test]
async fn the_operator_reads_labels_never_ids_and_no_markdown() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let study = offshore();
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study.clone()).await;
    let (user, wizard, _session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;

    for (i, state) in [
        "intro_hello",
        "inform_alert_emergency",
        "request_pa_announcement",
    ]
    .iter()
    .enumerate()
    {
        let id = format!("s{i}");
        ww.cmd(&id, json!({"cmd": "say", "state": state})).await;
        assert_eq!(ww.answer(&id).await["type"], "ack", "saying {state}");
    }
    // The approval question arrives with its slot filled.
    let view = wu
        .until(|v| v["type"] == "view" && v["view"]["lock"].is_object())
        .await;
    assert_eq!(
        view["view"]["lock"]["prompt"],
        "Make a PA announcement telling the crew to leave the processing module east tower?"
    );
    wu.cmd("a", json!({"cmd": "approve"})).await;
    assert_eq!(wu.answer("a").await["type"], "ack");

    // Refusals the wizard can meet in the action panel, sent as commands.
    let refused = [
        // The quadcopter is at the base: the guard fails.
        json!({"cmd": "act", "action": "inspect", "robot": "qdc1"}),
        // It has no valve-closing capability.
        json!({"cmd": "act", "action": "emergency_shutdown", "robot": "qdc1"}),
        // A target for an action that takes none.
        json!({"cmd": "act", "action": "inspect", "robot": "hsk2", "target": "pu_et"}),
    ];
    let mut messages = vec![];
    for (i, cmd) in refused.into_iter().enumerate() {
        let id = format!("r{i}");
        ww.cmd(&id, cmd).await;
        let answer = ww.answer(&id).await;
        assert_eq!(answer["type"], "error", "{answer}");
        messages.push(answer["message"].as_str().unwrap_or_default().to_string());
    }
    assert_eq!(
        messages,
        [
            "quadcopter 1 must be in the alarm area first.",
            "quadcopter 1 cannot do “Close the gas valves”",
            "“Inspect the area” takes no target location",
        ]
    );

    ww.cmd(
        "go",
        json!({"cmd": "act", "action": "send", "robot": "qdc1", "target": "pu_et"}),
    )
    .await;
    assert_eq!(ww.answer("go").await["type"], "ack");
    let started = wu.event("action_started").await;
    assert_eq!(started["label"], "Send to location");
    let busy = wu
        .until(|v| v["type"] == "view" && v["view"]["robots"][2]["busy"] == true)
        .await;
    assert_eq!(busy["view"]["robots"][2]["action"], "Send to location");
    assert_eq!(
        busy["view"]["robots"][2]["target"],
        "processing module east tower"
    );

    // The wizard's panel gives its reasons in plain text too.
    let wizard_view = ww.last_view();
    let reasons: Vec<&str> = wizard_view["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["combos"].as_array().into_iter().flatten())
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(!reasons.is_empty());
    for r in &reasons {
        assert!(!r.contains('`'), "a reason with Markdown: {r}");
    }

    let (ids, acts) = internal_names(&study);
    let mut seen = vec![];
    for frame in &wu.seen {
        strings(frame, "", &mut seen);
    }
    assert!(seen.len() > 50, "the operator received too little to judge");
    for (key, text) in &seen {
        assert!(!text.contains('`'), "backtick under `{key}`: {text}");
        assert!(
            !ids.iter().any(|id| id == text),
            "internal id under `{key}`: {text}"
        );
        for act in &acts {
            assert!(
                !text.contains(act.as_str()),
                "act label under `{key}`: {text}"
            );
        }
    }
    app.stop().await;
}

/// The wizard's last view's action `id`.
fn action_of(view: &Value, id: &str) -> Value {
    view["actions"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["id"] == id))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn the_action_panel_opens_on_what_the_engine_accepts_and_says_why_not() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), offshore()).await;
    let (user, wizard, _session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let _wu = enter(&user, 0).await;
    for (i, state) in ["intro_hello", "inform_alert_emergency"].iter().enumerate() {
        let id = format!("s{i}");
        ww.cmd(&id, json!({"cmd": "say", "state": state})).await;
        assert_eq!(ww.answer(&id).await["type"], "ack", "saying {state}");
    }
    let open = ww
        .until(|v| v["type"] == "view" && action_of(&v["view"], "send")["pick"].is_object())
        .await;
    let send = action_of(&open["view"], "send");
    // The first robot to the first place is not it: a camera robot goes to the fire first.
    assert_eq!(send["combos"][0]["ok"], false, "{send}");
    assert_ne!(send["pick"]["robot"], send["combos"][0]["robot"], "{send}");
    let pick = send["pick"].clone();
    assert_eq!(pick["target"], "pu_et", "{send}");
    assert!(send["why_not"].is_null(), "{send}");
    ww.cmd(
        "go",
        json!({"cmd": "act", "action": "send", "robot": pick["robot"], "target": pick["target"]}),
    )
    .await;
    assert_eq!(ww.answer("go").await["type"], "ack", "the pick is accepted");

    // While that robot runs, sending is possible for no robot (the action is exclusive): no
    // pick, and the panel's sentence is the engine's own refusal.
    // (Views from before the alarm, also without a pick, may still be queued: wait for one
    // with the robot on its way.)
    let busy = ww
        .until(|v| {
            v["type"] == "view"
                && v["view"]["robots"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r["busy"] == true))
                && action_of(&v["view"], "send")["pick"].is_null()
        })
        .await;
    let send = action_of(&busy["view"], "send");
    let why = send["why_not"].as_str().unwrap_or_default().to_string();
    let c = &send["combos"][0];
    ww.cmd(
        "again",
        json!({"cmd": "act", "action": "send", "robot": c["robot"], "target": c["target"]}),
    )
    .await;
    let refused = ww.answer("again").await;
    assert_eq!(refused["type"], "error", "{refused}");
    let message = refused["message"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        !message.is_empty() && why.to_lowercase().contains(&message),
        "panel: {why}; engine: {message}"
    );
    app.stop().await;
}

/// The part of `body` from `start` up to the next `end`.
fn between<'a>(body: &'a str, start: &str, end: &str) -> &'a str {
    body.split(start)
        .nth(1)
        .and_then(|s| s.split(end).next())
        .unwrap_or_else(|| panic!("no `{start}` in the page:\n{body}"))
}

fn load(name: &str, yaml: &str) -> LoadedStudy {
    load_text(name, yaml, StudySource::Dir(".".into()))
        .unwrap_or_else(|e| panic!("{name} does not load:\n{e}"))
}

/// The tiny study's flows, with the study's own words on both waiting pages: a title for the
/// user, only a text of two paragraphs for the wizard.
const OWN_WAITING_WORDS: &str = r#"flow:
  user:
    - {kind: consent}
    - {kind: instructions}
    - {kind: waiting, title: "Finding your guide", text: "It takes a minute or two."}
    - {kind: room}
    - {kind: survey}
    - {kind: completion}
  wizard:
    - {kind: consent}
    - {kind: instructions}
    - kind: waiting
      text: |
        Please stay with us:
        a caller is on the way.

        You will hear a chime.
    - {kind: room}
    - {kind: survey}
    - {kind: completion}
"#;

#[tokio::test]
async fn the_waiting_status_keeps_the_studys_own_words() {
    let yaml = format!("{}{OWN_WAITING_WORDS}", Tiny::default().yaml());
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), load("own.yaml", &yaml)).await;
    let user = app.join("participant=alice&role=user").await;
    let wizard = app.join("participant=bob&role=wizard").await;
    user.accept_pages().await;
    wizard.accept_pages().await;

    let page = user.page().await.body;
    assert!(page.contains("<h1>Finding your guide</h1>"), "{page}");
    assert_eq!(
        between(&page, "data-waiting=\"", "\""),
        "Finding your guide"
    );
    // Only a text: its first paragraph, on one line.
    let page = wizard.page().await.body;
    assert_eq!(
        between(&page, "data-waiting=\"", "\""),
        "Please stay with us: a caller is on the way."
    );
    app.stop().await;

    // A study that sets no words leaves the phrase to the script.
    let mut app = spawn_app(Tiny::default()).await;
    let user = app.join("participant=carol&role=user").await;
    user.accept_pages().await;
    let page = user.page().await.body;
    assert_eq!(between(&page, "data-waiting=\"", "\""), "");
    // The script shows the study's words, and its own phrase only without them.
    let script = app.http("GET", "/assets/waiting.js", &[], "").await;
    assert_eq!(script.status, 200);
    assert!(script.body.contains("dataset.waiting"), "{}", script.body);
    app.stop().await;
}

/// The robot panels on both room pages of a study: (user page, wizard page).
async fn room_pages(study: LoadedStudy) -> (String, String) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    let (user, wizard, _session) = paired(&app).await;
    let pages = (user.page().await.body, wizard.page().await.body);
    app.stop().await;
    for page in [&pages.0, &pages.1] {
        assert!(page.contains("data-page=\"room\""), "not a room: {page}");
    }
    pages
}

#[tokio::test]
async fn robot_panels_only_in_a_study_with_robots() {
    let (user, wizard) = room_pages(offshore()).await;
    for page in [&user, &wizard] {
        assert!(page.contains("id=\"robots-panel\""), "{page}");
        assert!(page.contains("<h2>Robots</h2>"));
    }
    assert!(wizard.contains("id=\"action-panel\"") && wizard.contains("Robot actions"));
    assert!(!user.contains("id=\"action-panel\""));

    // The tiny study without its robot and its action.
    let yaml = Tiny::default().yaml();
    let yaml: String = yaml
        .lines()
        .filter(|l| !l.starts_with("  robot_kinds:") && !l.starts_with("  robots:"))
        .collect::<Vec<_>>()
        .join("\n");
    let (head, tail) = yaml
        .split_once("actions:")
        .expect("the tiny study has actions");
    let tail = &tail[tail.find("goal:").expect("a goal after the actions")..];
    let study = load("plain.yaml", &format!("{head}{tail}"));
    assert!(study.study.world.robots.is_empty() && study.study.actions.is_empty());
    let (user, wizard) = room_pages(study).await;
    assert!(wizard.contains("id=\"options-panel\""), "{wizard}");
    // The page hands room.js every interface word of its catalogue (the strings block, not
    // shown); what the page shows is the rest.
    let shown = |page: &str| -> String {
        let (before, block) = page
            .split_once("<script type=\"application/json\" id=\"strings\">")
            .expect("the room page hands its script its words");
        let after = block
            .split_once("</script>")
            .map(|(_, a)| a)
            .unwrap_or_default();
        format!("{before}{after}")
    };
    let (user, wizard) = (shown(&user), shown(&wizard));
    for page in [&user, &wizard] {
        for word in [
            "robots-panel",
            "action-panel",
            "Robots",
            "Robot actions",
            "battery",
        ] {
            assert!(
                !page.contains(word),
                "`{word}` in a study without robots:\n{page}"
            );
        }
    }
}

const OPTIONAL_MARKS: &str = r#"id: optional-marks
title: Optional marks
flow:
  user:
    - {kind: consent}
    - id: about
      kind: questions
      questions:
        - {id: said, text: "Anything else? (Optional) ", kind: comment}
        - {id: plain, text: "Anything more?", kind: comment}
        - {id: age, text: "Your age", kind: number}
    - {kind: compare}
    - {kind: completion}
evaluation:
  task: compare
  judgments_per_item: 1
  items_per_worker: 1
  pairs: {rule: all_systems}
  justification: {required: false, prompt: "Why that one? (optional)"}
  dialogues:
    - {id: a1, system: A, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: hello there}]}
    - {id: b1, system: B, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: go away}]}
"#;

#[tokio::test]
async fn a_label_that_says_optional_is_not_marked_again() {
    const MARK: &str = "<span class=\"muted\">(optional)</span>";
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(
        tmp.path().to_path_buf(),
        load("optional.yaml", OPTIONAL_MARKS),
    )
    .await;
    let c = join_past_first_page(
        &app,
        "study=optional-marks&PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=1",
    )
    .await;

    let page = c.page().await.body;
    let legend = |id: &str| {
        between(
            &page,
            &format!("data-testid=\"question-{id}\""),
            "</legend>",
        )
        .to_string()
    };
    let said = legend("said");
    assert!(said.contains("Anything else? (Optional)"), "{said}");
    assert!(!said.contains(MARK), "marked twice: {said}");
    assert!(
        legend("plain").contains(MARK),
        "an optional question unmarked"
    );
    assert!(!legend("age").contains(MARK), "a required question marked");
    assert!(!page.to_lowercase().contains("(optional) <span"), "{page}");

    let step = c.step().await;
    let res = c.post("/p/answers", &format!("step={step}&age=30")).await;
    assert_eq!(res.status, 303, "{}", res.body);
    let page = c.page().await.body;
    let reason = between(&page, "data-testid=\"question-justification\"", "</legend>");
    assert!(reason.contains("Why that one? (optional)"), "{page}");
    assert!(!reason.contains(MARK), "marked twice: {reason}");
    app.stop().await;
}

/// The task stays in the room after pairing: the guest of `restaurant-booking` (no drawn goal)
/// has their instructions open beside the chat, the wizard has theirs folded; a `crosswoz-demo`
/// user, whose goal panel comes from the drawn goal, gets no second copy.
#[tokio::test]
async fn the_room_keeps_each_roles_task_on_screen() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let study = load_builtin("restaurant-booking").unwrap_or_else(|e| panic!("{e}"));
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    let (user, wizard, _session) = paired(&app).await;
    let room = user.page().await.body;
    assert!(
        room.contains("<details id=\"task-panel\" class=\"panel\" data-testid=\"task-panel\" open><summary>Your task</summary>"),
        "{room}"
    );
    assert!(
        room.contains("Italian food, in the old town, for 4 people"),
        "{room}"
    );
    let room = wizard.page().await.body;
    assert!(
        room.contains("<details id=\"task-panel\" class=\"panel\" data-testid=\"task-panel\"><summary>Your task</summary>"),
        "{room}"
    );
    app.stop().await;

    let tmp = tempfile::tempdir().expect("temp dir");
    let study = load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let mut app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    let (user, wizard, _session) = paired(&app).await;
    assert!(!user.page().await.body.contains("task-panel"));
    assert!(
        wizard
            .page()
            .await
            .body
            .contains("<summary>你的任务</summary>")
    );
    app.stop().await;
}
