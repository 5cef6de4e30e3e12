//! Replaying a finished session: the state at each step of `replay.json` (merged from its
//! chunks) is the engine's replay of the log's first k events, the last step is the session's
//! end state, only researchers may replay, an evaluation participant's log replays as its
//! answers and judgments, and the size of a long offshore session's replay is measured.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use wozkit_core::engine;
use wozkit_core::engine::{Command, Session};
use wozkit_core::event::{Actor, EndReason, MessageSource, Role};
use wozkit_core::event::{Event, EventKind};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_core::sim::{self, WizardPolicy};
use wozkit_server::auth::Access;
use wozkit_store::{NewEvent, NewSession, SessionFilter, SessionKind};

use crate::helpers::*;

/// A whole replay as the page loads it.
struct Fetched {
    steps: Vec<Value>,
    /// Bytes of each chunk.
    sizes: Vec<usize>,
    /// Milliseconds each chunk took to arrive.
    times: Vec<u128>,
    /// The first chunk (with the facts).
    first: Value,
}

/// Every step of a session's replay, fetched in chunks of `count` (all chunks followed by
/// `next`).
async fn fetch_all(app: &TestApp, cookie: &str, session: &str, count: u64) -> Fetched {
    let mut steps = vec![];
    let mut sizes = vec![];
    let mut times = vec![];
    let mut first = Value::Null;
    let mut from = Some(0u64);
    while let Some(f) = from {
        let asked = std::time::Instant::now();
        let res = app
            .http(
                "GET",
                &format!("/researcher/session/{session}/replay.json?from={f}&count={count}"),
                &[("Cookie", cookie)],
                "",
            )
            .await;
        times.push(asked.elapsed().as_millis());
        assert_eq!(res.status, 200, "chunk from {f}: {}", res.body);
        sizes.push(res.body.len());
        let chunk: Value = serde_json::from_str(&res.body).expect("replay.json is JSON");
        assert_eq!(chunk["from"], f);
        let got = chunk["steps"].as_array().expect("steps").clone();
        assert!(!got.is_empty() && got.len() as u64 <= count, "chunk size");
        assert_eq!(got[0]["k"], f, "a chunk starts where asked");
        if f == 0 {
            first = chunk.clone();
        }
        steps.extend(got);
        from = chunk["next"].as_u64();
    }
    Fetched {
        steps,
        sizes,
        times,
        first,
    }
}

/// Sets or removes (no value) the member at `path` of `root`.
fn apply_change(root: &mut Value, change: &Value) {
    let change = change.as_array().expect("a change is an array");
    let path = change[0].as_array().expect("a path");
    let (last, parents) = path.split_last().expect("a path names a member");
    let mut at = root;
    for key in parents {
        at = match key {
            Value::String(k) => &mut at[k.as_str()],
            Value::Number(i) => &mut at[i.as_u64().expect("an index") as usize],
            other => panic!("path member {other}"),
        };
    }
    match (last, change.get(1)) {
        (Value::String(k), Some(v)) => at[k.as_str()] = v.clone(),
        (Value::String(k), None) => {
            at.as_object_mut().expect("an object").remove(k);
        }
        (Value::Number(i), Some(v)) => at[i.as_u64().expect("an index") as usize] = v.clone(),
        other => panic!("change {other:?}"),
    }
}

/// The state `{"s", "d"}` of every step, as the page rebuilds it: a chunk's first step whole,
/// then each later step's changes applied in order.
fn merged(steps: &[Value], count: u64) -> Vec<(Value, Value)> {
    let mut out: Vec<(Value, Value)> = vec![];
    let mut state = Value::Null;
    for (i, step) in steps.iter().enumerate() {
        if (i as u64).is_multiple_of(count) {
            assert!(step.get("p").is_none(), "a chunk starts whole");
            state = json!({"s": step["s"], "d": step["d"]});
        } else {
            assert!(step.get("s").is_none(), "later steps send changes");
            for change in step["p"].as_array().expect("changes") {
                apply_change(&mut state, change);
            }
        }
        out.push((state["s"].clone(), state["d"].clone()));
    }
    out
}

/// The engine's own replay of the first `k` events, as JSON.
fn replayed(study: &LoadedStudy, session: &str, events: &[Event], k: usize) -> Value {
    serde_json::to_value(engine::replay(study, session, &events[..k])).expect("session as JSON")
}

#[tokio::test]
async fn a_played_session_replays_step_by_step_as_the_engine_folds_it() {
    let tiny = Tiny::default();
    let app = spawn_app(tiny.clone()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut wu = enter(&user, 0).await;
    let mut ww = enter(&wizard, 0).await;

    // An option, free text, a robot action, an approval that changes the world, the end.
    ww.cmd("w1", json!({"cmd": "say", "state": "greet"})).await;
    assert_eq!(ww.answer("w1").await["type"], "ack");
    wu.cmd(
        "u1",
        json!({"cmd": "text", "text": "Please send the robot"}),
    )
    .await;
    assert_eq!(wu.answer("u1").await["type"], "ack");
    ww.cmd(
        "w2",
        json!({"cmd": "act", "action": "move", "robot": "r1", "target": "tower"}),
    )
    .await;
    assert_eq!(ww.answer("w2").await["type"], "ack");
    app.wait_event(&session, |e| {
        matches!(e.kind, EventKind::ActionCompleted { .. })
    })
    .await;
    ww.cmd("w3", json!({"cmd": "say", "state": "ask"})).await;
    assert_eq!(ww.answer("w3").await["type"], "ack");
    wu.until(|v| v["type"] == "view" && v["view"]["lock"].is_object())
        .await;
    wu.cmd("u2", json!({"cmd": "approve"})).await;
    assert_eq!(wu.answer("u2").await["type"], "ack");
    ww.cmd("w4", json!({"cmd": "say", "state": "bye"})).await;
    assert_eq!(ww.answer("w4").await["type"], "ack");
    app.wait_event(&session, |e| {
        matches!(e.kind, EventKind::SessionEnded { .. })
    })
    .await;
    let last_view = ww
        .until(|v| v["type"] == "view" && v["view"]["ended"].is_object())
        .await["view"]
        .clone();
    let events = app.events(&session).await;
    let study = tiny.study();

    // Anonymous visitors and participants are refused; an observer account may replay.
    let path = format!("/researcher/session/{session}/replay.json");
    let anon = app.http("GET", &path, &[], "").await;
    assert_eq!(anon.status, 401, "{}", anon.body);
    let as_user = app
        .http("GET", &path, &[("Cookie", user.cookie.as_str())], "")
        .await;
    assert_eq!(as_user.status, 401, "a participant's cookie is no login");
    let page_path = format!("/researcher/session/{session}/replay");
    let anon_page = app.http("GET", &page_path, &[], "").await;
    assert_eq!(anon_page.status, 303, "the page sends a visitor to log in");
    assert!(
        anon_page
            .header("location")
            .is_some_and(|l| l.starts_with("/researcher/login"))
    );
    let observer = login_as(&app, Access::Observer).await;
    let page = app
        .http("GET", &page_path, &[("Cookie", observer.as_str())], "")
        .await;
    assert_eq!(page.status, 200);
    for id in [
        "replay-scrubber",
        "replay-play",
        "replay-step",
        "replay-world",
        "replay-transcript",
    ] {
        assert!(page.body.contains(&format!("id=\"{id}\"")), "#{id}");
    }
    assert!(page.body.contains("/assets/replay.js"));
    let log_page = app
        .http(
            "GET",
            &format!("/researcher/session/{session}"),
            &[("Cookie", observer.as_str())],
            "",
        )
        .await;
    assert!(
        log_page
            .body
            .contains(&format!("href=\"/researcher/session/{session}/replay\"")),
        "the session page links to its replay"
    );

    // Chunks of 4 steps, so states cross chunk boundaries.
    let count = 4;
    let Fetched { steps, first, .. } = fetch_all(&app, &observer, &session, count).await;
    assert_eq!(first["world"], true);
    assert_eq!(first["total"], events.len() as u64);
    assert_eq!(steps.len(), events.len() + 1, "step 0 and one per event");
    let states = merged(&steps, count);
    for (k, ((s, _), step)) in states.iter().zip(&steps).enumerate() {
        assert_eq!(step["k"], k as u64);
        assert_eq!(
            s.clone(),
            replayed(&study, &session, &events, k),
            "step {k}: the engine's replay of the first {k} events"
        );
        if k > 0 {
            assert_eq!(step["event"]["seq"], events[k - 1].seq);
            assert_eq!(
                step["event"]["kind"],
                serde_json::to_value(&events[k - 1]).expect("event")["kind"]
            );
        } else {
            assert!(step["event"].is_null());
        }
    }

    // The world changes where the log says: the robot's action runs, then it is at the tower;
    // the approval sets the variable.
    let at = |kind: &str| {
        steps
            .iter()
            .position(|s| s["event"]["kind"] == kind)
            .unwrap_or_else(|| panic!("a {kind} step"))
    };
    let started = at("action_started");
    let robot = &states[started].1["robots"][0];
    assert_eq!(robot["action"], "Move");
    assert_eq!(robot["location"], "base");
    let completed = at("action_completed");
    assert_eq!(states[completed].1["robots"][0]["location"], "tower");
    assert!(states[completed].1["robots"][0]["action"].is_null());
    let milestone = at("milestone");
    assert_eq!(
        states[milestone].1["milestones"],
        json!([{"id": "go", "label": "Go"}])
    );
    assert_eq!(states[milestone - 1].1["milestones"], json!([]));
    let set = at("world_set");
    assert_eq!(states[set - 1].0["world"]["fire_out"], false);
    assert_eq!(states[set].0["world"]["fire_out"], true);
    let said = at("state_entered");
    assert_eq!(states[said].1["wizard"]["state"], "greet");
    let wizard_then = &states[said].1["wizard"];
    assert!(
        wizard_then["option_order"]
            .as_array()
            .is_some_and(|o| o.iter().any(|o| o == "ask")),
        "the options the wizard was offered then: {wizard_then}"
    );
    assert_eq!(
        wizard_then["options"]["ask"]["text"],
        "May I send the robot?"
    );

    // The transcript: the option and the free text, told apart.
    let lines: Vec<&Value> = steps
        .iter()
        .filter(|s| s["line"]["kind"] == "message")
        .map(|s| &s["line"])
        .collect();
    assert_eq!(lines[0]["role"], "wizard");
    assert_eq!(lines[0]["via"], "option");
    assert!(lines[0]["label"].as_str().is_some());
    let free = lines
        .iter()
        .find(|l| l["text"] == "Please send the robot")
        .expect("the user's message");
    assert_eq!(free["via"], "free");
    assert_eq!(free["who"], "Operator");

    // The last step is the session's end state: as the engine folds the whole log, as the room
    // ended, and as the wizard's page last saw it.
    let (s_end, d_end) = states.last().expect("steps");
    assert_eq!(
        s_end.clone(),
        replayed(&study, &session, &events, events.len())
    );
    let record = app
        .store
        .session(&session)
        .await
        .expect("store")
        .expect("session");
    let end = record.ended.expect("ended");
    assert_eq!(d_end["ended"]["reason"], end.reason.as_str());
    assert_eq!(d_end["ended"]["reason"], last_view["ended"]["reason"]);
    assert_eq!(
        d_end["ended"]["goal_reached"],
        last_view["ended"]["goal_reached"]
    );
    assert_eq!(d_end["progress"], last_view["progress"]);
    assert_eq!(
        d_end["robots"][0]["location"],
        last_view["robots"][0]["location"]
    );
    assert_eq!(s_end["messages"], last_view["messages"]);

    // A step past the end is refused with what and where.
    let past = app
        .http(
            "GET",
            &format!("{path}?from={}", events.len() + 1),
            &[("Cookie", observer.as_str())],
            "",
        )
        .await;
    assert_eq!(past.status, 400);
    assert!(past.body.contains(&session), "{}", past.body);
}

const EVAL: &str = r#"id: eval-replay
title: Compare
flow:
  user:
    - {kind: consent}
    - {id: about, kind: questions, questions: [{id: native, text: Native speaker?, kind: choice, options: ["yes", "no"]}]}
    - {kind: compare}
    - {kind: completion}
evaluation:
  task: compare
  judgments_per_item: 1
  items_per_worker: 1
  pairs: {rule: all_systems}
  justification: {min_words: 2}
  dialogues:
    - {id: a1, system: A, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: hello there}]}
    - {id: b1, system: B, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: go away}]}
"#;

#[tokio::test]
async fn an_evaluation_participants_log_replays_as_its_answers_and_judgments() {
    let study = load_text("eval.yaml", EVAL, StudySource::Dir(".".into()))
        .unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().expect("temp dir");
    let app = spawn_app_in(tmp.path().to_path_buf(), study).await;
    let c = app
        .join("study=eval-replay&PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=1")
        .await;
    let post = |path: &'static str, extra: String| {
        let c = &c;
        async move {
            let step = c.step().await;
            c.post(path, &format!("step={step}{extra}")).await.status
        }
    };
    assert_eq!(post("/p/next", String::new()).await, 303);
    assert_eq!(post("/p/answers", "&native=yes".into()).await, 303);
    let body = c.page().await.body;
    assert_eq!(page_kind(&body), "compare", "{body}");
    let lease = hidden(&body, "lease");
    assert_eq!(
        post(
            "/p/judge",
            format!("&lease={lease}&choice=left&justification=more+polite+answer")
        )
        .await,
        303
    );
    let logs = app
        .store
        .list_sessions(&SessionFilter {
            kind: SessionKind::Participant,
            ..Default::default()
        })
        .await
        .expect("logs");
    let log = logs
        .iter()
        .find(|l| l.study_id == "eval-replay")
        .expect("the participant's log");
    let events = app.events(&log.id).await;

    let cookie = login_as(&app, Access::Observer).await;
    let Fetched { steps, first, .. } = fetch_all(&app, &cookie, &log.id, 250).await;
    assert_eq!(first["world"], false, "an evaluation log has no world");
    assert_eq!(first["kind"], "participant");
    assert_eq!(steps.len(), events.len() + 1);
    assert!(
        steps
            .iter()
            .all(|s| s.get("s").is_none() && s.get("d").is_none())
    );
    let lines: Vec<&Value> = steps
        .iter()
        .map(|s| &s["line"])
        .filter(|l| !l.is_null())
        .collect();
    let answers = lines
        .iter()
        .find(|l| l["kind"] == "answers")
        .expect("the questions page's answers");
    assert!(
        answers["text"]
            .as_str()
            .is_some_and(|t| t.contains("native") && t.contains("yes"))
    );
    let judged = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Judged(j) => Some(j.clone()),
            _ => None,
        })
        .expect("a judgment in the log");
    let judgment = lines
        .iter()
        .find(|l| l["kind"] == "judgment")
        .expect("the judgment's line");
    let text = judgment["text"].as_str().unwrap_or_default();
    assert!(text.contains(&judged.item), "{text}");
    assert!(
        text.contains(judged.choice.as_deref().expect("a choice")),
        "{text}"
    );
    assert!(text.contains("more polite answer"), "{text}");
}

/// A chat with a system under test replays as its transcript: no world, even in a study with a
/// room, the participant's turns and the system's replies (a bot) in order, the annotations.
#[tokio::test]
async fn a_chat_with_a_system_replays_as_its_transcript() {
    let tiny = Tiny::default();
    let tmp = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store");
    let id = "chat-1";
    store
        .create_session(NewSession {
            id: id.into(),
            study_id: "tiny".into(),
            study_version: "1".into(),
            seed: 1,
            created_at_ms: 1_000,
        })
        .await
        .expect("session");
    let me = Actor::Participant {
        role: Role::User,
        participant: Some("p1".into()),
    };
    let system = Actor::Bot {
        role: Role::Wizard,
        name: "model-a".into(),
    };
    let say = |role, text: &str| EventKind::Message {
        role,
        text: text.into(),
        source: MessageSource::Free,
    };
    let log = [
        (
            Actor::System,
            EventKind::ChatStarted {
                participant: "p1".into(),
                page: "chat".into(),
                item: "i1".into(),
                lease: "l1".into(),
                system: "model-a".into(),
                side: None,
                opponent: None,
            },
        ),
        (me.clone(), say(Role::User, "Where is the fire?")),
        (system.clone(), say(Role::Wizard, "In the east tower.")),
        (
            me.clone(),
            EventKind::TurnAnnotated {
                turn: 1,
                labels: vec!["helpful".into()],
                score: Some(4),
                feedback: None,
            },
        ),
    ];
    let new = log
        .into_iter()
        .enumerate()
        .map(|(i, (actor, kind))| NewEvent {
            actor,
            kind,
            at_ms: 1_000 + i as u64 * 500,
        })
        .collect();
    store.append(id, new).await.expect("append");
    store
        .end_session(id, EndReason::Finished, 3_000)
        .await
        .expect("end");
    store.close().await;
    drop(store);
    let app = spawn_app_in(tmp.path().to_path_buf(), tiny.study()).await;
    let cookie = login_as(&app, Access::Observer).await;
    let Fetched { steps, first, .. } = fetch_all(&app, &cookie, id, 2).await;
    assert_eq!(first["world"], false, "a chat has no world");
    assert_eq!(steps.len(), 5);
    assert!(
        steps
            .iter()
            .all(|s| s.get("s").is_none() && s.get("p").is_none())
    );
    let lines: Vec<&Value> = steps
        .iter()
        .map(|s| &s["line"])
        .filter(|l| !l.is_null())
        .collect();
    let texts: Vec<&str> = lines.iter().filter_map(|l| l["text"].as_str()).collect();
    assert_eq!(texts[1..3], ["Where is the fire?", "In the east tower."]);
    assert_eq!(lines[1]["who"], "Operator");
    assert_eq!(lines[2]["who"], "model-a (bot, Assistant)");
    assert_eq!(lines[2]["via"], "free");
    assert_eq!(lines[3]["kind"], "judgment");
    assert!(
        texts[3].contains("helpful") && texts[3].contains("score 4"),
        "{}",
        texts[3]
    );
    assert!(texts[0].contains("model-a"), "{}", texts[0]);
}

/// A long session: the simulated players of `wozkit simulate` (their moves, timers as the engine
/// asks), with most turns a free-text exchange between them, so the dialogue takes `turns`
/// turns before it may end; then aborted if it is still running. Each event with its time.
fn long_play(
    study: &LoadedStudy,
    seed: u64,
    turns: usize,
) -> (Session, Vec<(Actor, EventKind, u64)>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut s = Session::new(study, &format!("long-{seed}"));
    let mut events = vec![];
    let user = Actor::Bot {
        role: Role::User,
        name: "sim".into(),
    };
    let wizard = Actor::Bot {
        role: Role::Wizard,
        name: "sim".into(),
    };
    let mut run = |s: &mut Session, actor: &Actor, cmd: Command, now: u64, rng: &mut ChaCha8Rng| {
        if let Ok(step) = engine::step(study, s, actor, cmd, now, rng) {
            events.extend(step.events.into_iter().map(|(a, k)| (a, k, now)));
            *s = step.session;
        }
    };
    let mut now = 1_000u64;
    run(
        &mut s,
        &Actor::System,
        Command::Start { seed },
        now,
        &mut rng,
    );
    for (actor, role) in [(&user, Role::User), (&wizard, Role::Wizard)] {
        run(
            &mut s,
            actor,
            Command::Join { role, bot: true },
            now,
            &mut rng,
        );
    }
    for turn in 0..turns {
        if s.is_ended() {
            break;
        }
        now += rng.random_range(1000..4000);
        while let Some(t) = engine::next_wakeup(study, &s).filter(|t| *t <= now) {
            run(&mut s, &Actor::System, Command::Tick, t, &mut rng);
        }
        if s.is_ended() {
            break;
        }
        // The dialogue moves on only in the last tenth of the turns, and now and then before.
        let chat = turn < turns * 9 / 10 && rng.random_bool(0.97);
        if chat || s.lock.is_some() {
            let cmd = sim::user_move(study, &s, &mut rng).unwrap_or(Command::Text {
                text: format!("Turn {turn}: any news?"),
            });
            run(&mut s, &user, cmd, now, &mut rng);
        }
        if chat {
            let text = format!("Turn {turn}: still on it.");
            run(&mut s, &wizard, Command::Text { text }, now, &mut rng);
        } else if let Some(cmd) = sim::wizard_move(study, &s, WizardPolicy::Uniform, &mut rng) {
            run(&mut s, &wizard, cmd, now, &mut rng);
        }
    }
    if !s.is_ended() {
        let abort = Command::Abort {
            reason: EndReason::Aborted,
        };
        run(&mut s, &Actor::System, abort, now, &mut rng);
    }
    (s, events)
}

/// The size of a long session's replay: an offshore session of thousands of events
/// ([`long_play`]), stored as a finished session before the server starts (as an import or an
/// earlier run leaves it) and fetched in the page's chunks. Prints the figures and each chunk's
/// time; checks that the last step is the state the live steps reached.
#[tokio::test]
async fn a_long_offshore_session_replays_in_chunks_and_its_size_is_measured() {
    // The study's file itself: the same text `load_builtin` embeds, read at compile time here.
    let study = load_text(
        "offshore-emergency/study.yaml",
        include_str!("../../../wozkit-core/studies/offshore-emergency/study.yaml"),
        StudySource::Dir(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../wozkit-core/studies/offshore-emergency"
            )
            .into(),
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Four hours on the clock instead of the study's six minutes, so a long talk fits.
    let mut study = study;
    study.study.session.time_limit_s = 4 * 3600;
    let seed = 7;
    let (end_state, played_events) = long_play(&study, seed, 1500);
    let id = format!("long-{seed}");
    let tmp = tempfile::tempdir().expect("temp dir");
    // Stored before the server starts, as a finished session of an earlier run: a server that
    // starts recovers the live sessions it finds, and this one must already be over.
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store");
    store
        .create_session(NewSession {
            id: id.clone(),
            study_id: study.study.id.clone(),
            study_version: study.study.version.clone(),
            seed,
            created_at_ms: 0,
        })
        .await
        .expect("session");
    let new: Vec<NewEvent> = played_events
        .iter()
        .map(|(actor, kind, at_ms)| NewEvent {
            actor: actor.clone(),
            kind: kind.clone(),
            at_ms: *at_ms,
        })
        .collect();
    store.append(&id, new).await.expect("append");
    let (reason, _) = end_state.ended.expect("the played session ended");
    store
        .end_session(&id, reason, end_state.now_ms)
        .await
        .expect("end");
    store.close().await;
    drop(store);
    let app = spawn_app_in(tmp.path().to_path_buf(), study.clone()).await;
    let events = app.events(&id).await;
    let cookie = login_as(&app, Access::Observer).await;
    // The page asks for the server's default chunk (250 steps, `http/replay.rs`).
    let count = 250;
    let Fetched {
        steps,
        sizes,
        times,
        ..
    } = fetch_all(&app, &cookie, &id, count).await;
    assert_eq!(steps.len(), events.len() + 1);
    if let Ok(p) = std::env::var("REPLAY_DUMP") {
        std::fs::write(p, serde_json::to_string(&steps).unwrap_or_default()).ok();
    }
    let states = merged(&steps, count);
    let (s_end, _) = states.last().expect("steps");
    assert_eq!(
        s_end.clone(),
        serde_json::to_value(&end_state).expect("session"),
        "the last step is the state the live steps reached"
    );
    // The same steps with every state whole, for comparison.
    let whole: usize = states
        .iter()
        .map(|(s, d)| {
            serde_json::to_string(s).map_or(0, |t| t.len())
                + serde_json::to_string(d).map_or(0, |t| t.len())
        })
        .sum();
    let total: usize = sizes.iter().sum();
    let bytes =
        |v: Option<&Value>| v.map_or(0, |v| serde_json::to_string(v).map_or(0, |t| t.len()));
    let diffs: usize = steps
        .iter()
        .map(|s| bytes(s.get("s")) + bytes(s.get("d")) + bytes(s.get("p")))
        .sum();
    let event_bytes: usize = steps.iter().map(|s| bytes(s.get("event"))).sum();
    let minutes = events.last().map_or(0, |e| e.at_ms) as f64 / 60_000.0;
    println!(
        "replay size: offshore session of {} events ({minutes:.1} min of play): {} chunk(s) of ≤{count} steps \
         (slowest {} ms, debug build), \
         {total} bytes in all ({} per step, largest chunk {} bytes): events {event_bytes} bytes, \
         states as sent {diffs} bytes (the same states whole at every step: {whole} bytes)",
        events.len(),
        sizes.len(),
        times.iter().max().copied().unwrap_or(0),
        total / steps.len(),
        sizes.iter().max().copied().unwrap_or(0),
    );
    assert!(
        diffs < whole,
        "sending changes is smaller than whole states"
    );
}
