//! `wozkit simulate-users` against a scripted stand-in of an OpenAI-compatible user model that
//! follows its goal: it says the goal's sentences one per turn, then ends with `[END]`. The
//! dialogues are ordinary sessions in the store, marked simulated by their user's seat, left out
//! of the payment table and present in the exports.

use std::path::Path;

use crate::common::{self, wozkit};
use serde_json::{Value, json};
use wozkit_core::event::{Actor, EventKind, MessageSource, Role};
use wozkit_core::simulated_users::is_simulated;

/// The goal and the turn asked for, read from a prompt written by the default template.
fn goal_and_turn(prompt: &str) -> (&str, usize) {
    let goal = prompt
        .split_once("goal:\n")
        .and_then(|(_, rest)| rest.split_once("\n\nSay what"))
        .map(|(goal, _)| goal)
        .unwrap_or("");
    let turn: usize = prompt
        .rsplit_once("(turn ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(1);
    (goal, turn)
}

/// The stand-in's answer to a prompt written by the default template: goal sentence `turn`,
/// or `Thank you, that is all. [END]` once every sentence is said.
fn answer(prompt: &str) -> String {
    let (goal, turn) = goal_and_turn(prompt);
    match goal.lines().nth(turn - 1) {
        Some(line) => format!("I am looking for this. {line}"),
        None => "Thank you, that is all. [END]".into(),
    }
}

/// Serves chat completions on a local port in a thread of its own; returns the base URL. A
/// `broken` stand-in answers with JSON that holds no reply.
fn spawn_user(broken: bool) -> String {
    common::chat_completions_server(move |prompt| {
        if broken {
            json!({"oops": "no choices"})
        } else {
            json!({"choices": [{"message": {"role": "assistant", "content": answer(prompt)}}]})
        }
    })
}

/// Runs `f` on a snapshot of the store at `data`.
fn with_store<T>(data: &Path, f: impl AsyncFnOnce(&dyn wozkit_store::Store) -> T) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = wozkit_store::open_snapshot(data.to_str().unwrap())
            .await
            .unwrap();
        let out = f(store.as_ref()).await;
        store.close().await;
        out
    })
}

/// Every judgment in `study`'s participant logs.
fn judgments(data: &Path, study: &str) -> Vec<wozkit_core::event::Judgment> {
    with_store(data, async |store| {
        let filter = wozkit_store::SessionFilter {
            study_id: Some(study.to_string()),
            kind: wozkit_store::SessionKind::Participant,
            ..Default::default()
        };
        let mut out = vec![];
        for log in store.list_sessions(&filter).await.unwrap() {
            for e in store.events(&log.id, 0).await.unwrap() {
                if let EventKind::Judged(j) = e.kind {
                    out.push(*j);
                }
            }
        }
        out
    })
}

/// `(choice, justification)` of every judgment in `study`'s participant logs.
fn votes(data: &Path, study: &str) -> Vec<(Option<String>, Option<String>)> {
    judgments(data, study)
        .into_iter()
        .map(|j| (j.choice, j.justification))
        .collect()
}

/// The answers of every judgment in `study`'s participant logs.
fn answers(data: &Path, study: &str) -> Vec<serde_json::Map<String, Value>> {
    judgments(data, study)
        .into_iter()
        .map(|j| j.answers.into_iter().collect())
        .collect()
}

/// Every session's events in the store at `data`.
fn sessions(data: &Path, ids: &[String]) -> Vec<Vec<wozkit_core::event::Event>> {
    with_store(data, async |store| {
        let mut out = vec![];
        for id in ids {
            out.push(store.events(id, 0).await.unwrap());
        }
        out
    })
}

#[test]
fn simulated_users_play_a_grounded_woz_study_to_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = spawn_user(false);
    let user = format!("goal-follower={url}#scripted");
    let (code, out, err) = wozkit(&[
        "simulate-users",
        "crosswoz-demo",
        "--user",
        &user,
        "--dialogues",
        "3",
        "--concurrency",
        "3",
        "--seed",
        "7",
        "--pace-ms",
        "20-40",
        "--data",
        data.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["dialogues"], 3);
    assert_eq!(summary["failed"], json!([]));
    assert_eq!(summary["goals"]["scored"], 3);
    let ids: Vec<String> = summary["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3);
    let logs = sessions(&data, &ids);
    for (id, events) in ids.iter().zip(&logs) {
        assert!(is_simulated(events), "{id} is not marked simulated");
        assert!(
            matches!(
                events.last().map(|e| &e.kind),
                Some(EventKind::SessionEnded { .. })
            ),
            "{id} did not end"
        );
        // The user's first message is the stand-in's answer to the first prompt, which showed
        // the session's own goal: its first sentence.
        let goal = events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::GoalGenerated { goal, .. } => Some(goal.clone()),
                _ => None,
            })
            .expect("a generated goal");
        let study = wozkit_core::load::load_builtin("crosswoz-demo").unwrap();
        let text = study.study.goals.as_ref().and_then(|g| g.text.as_ref());
        let first_sentence = wozkit_core::goals::describe(&goal, text)[0].clone();
        let first_user = events
            .iter()
            .find_map(|e| match (&e.actor, &e.kind) {
                (
                    Actor::Bot { name, .. },
                    EventKind::Message {
                        role: Role::User,
                        text,
                        ..
                    },
                ) => {
                    assert_eq!(name, "simulated:goal-follower");
                    Some(text.clone())
                }
                _ => None,
            })
            .expect("the simulated user spoke");
        assert_eq!(
            first_user,
            format!("I am looking for this. {first_sentence}")
        );
    }

    // Nobody is paid for a simulated session: the table has its header only.
    let payments = dir.path().join("payments.csv");
    let (code, _, err) = wozkit(&[
        "payments",
        "--data",
        data.to_str().unwrap(),
        "--out",
        payments.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let table = std::fs::read_to_string(&payments).unwrap();
    assert_eq!(table.lines().count(), 1, "{table}");

    // The report is about people unless asked: then the three dialogues and their goals count.
    let report = |extra: &[&str]| {
        let path = dir.path().join("report.json");
        let mut args = vec!["report", "--data", data.to_str().unwrap()];
        args.extend_from_slice(&["--json", path.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let (code, _, err) = wozkit(&args);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<Value>(&std::fs::read_to_string(&path).unwrap()).unwrap()
    };
    assert_eq!(report(&[])["sessions"], 0);
    let with = report(&["--include-simulated"]);
    assert_eq!(with["sessions"], 3);
    assert!(with["goal_scores"].is_object(), "{}", with["goal_scores"]);

    // The session logs say who played the user.
    let logs_path = dir.path().join("logs.jsonl");
    let (code, _, err) = wozkit(&[
        "export",
        "--format",
        "log",
        "--data",
        data.to_str().unwrap(),
        "--out",
        logs_path.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let logged: Vec<Value> = std::fs::read_to_string(&logs_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(logged.len(), 3);
    assert!(
        logged
            .iter()
            .all(|l| l["simulated_user"] == "goal-follower")
    );

    // The exports hold them.
    let export = dir.path().join("crosswoz.json");
    let (code, _, err) = wozkit(&[
        "export",
        "--format",
        "crosswoz",
        "--data",
        data.to_str().unwrap(),
        "--out",
        export.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let exported: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    let exported = exported
        .as_object()
        .expect("crosswoz is an object by dialogue id");
    assert_eq!(
        exported.len(),
        3,
        "{:?}",
        exported.keys().collect::<Vec<_>>()
    );
}

#[test]
fn a_bad_user_or_system_flag_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let endpoint = "u=http://127.0.0.1:9/v1";
    for (study, flags, said) in [
        (
            "crosswoz-demo",
            &["--user", "nobody"][..],
            "simulated user `nobody`: write --user nobody=URL[#MODEL]",
        ),
        (
            "rate-dialogues",
            &["--user", endpoint][..],
            "has neither a WoZ room nor a chat or arena page",
        ),
        (
            "bot-chat-demo",
            &["--user", endpoint, "--system", "x=http://127.0.0.1:9/v1"][..],
            "is a chat study: its own systems answer the simulated user",
        ),
        // A system under test the study does not declare, given without its endpoint.
        (
            "crosswoz-demo",
            &["--user", endpoint, "--system", "nothing"][..],
            "--system nothing: the study declares no system of that name",
        ),
    ] {
        let mut args = vec!["simulate-users", study];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--data", data.to_str().unwrap()]);
        let (code, _, err) = wozkit(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
}

#[test]
fn a_user_endpoint_without_replies_stops_the_user_with_a_warning_and_the_dialogues_still_end() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let user = format!("mute={}#scripted", spawn_user(true));
    let (code, out, err) = wozkit(&[
        "simulate-users",
        "crosswoz-demo",
        "--user",
        &user,
        "--dialogues",
        "2",
        "--pace-ms",
        "20-40",
        "--data",
        data.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["failed"], json!([]));
    // The user never spoke for itself (a lock's answer is the scripted rule's), and says why.
    assert!(
        err.contains("the simulated user could not answer and stops"),
        "{err}"
    );
    assert!(err.contains("no `choices[0].message.content`"), "{err}");
    let ended: u64 = summary["ended"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(ended, 2, "{summary}");
}

/// A stand-in system under test: it greets, then answers every user message with a question.
/// A `broken` one answers with JSON that holds no reply.
fn spawn_system(broken: bool) -> String {
    common::chat_completions_server(move |_| {
        if broken {
            json!({"oops": "no choices"})
        } else {
            json!({"choices": [{"message": {"role": "assistant",
                "content": "I can help with that. What else should I know?"}}]})
        }
    })
}

#[test]
fn a_system_under_test_plays_the_wizard_against_simulated_users_with_goals() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let user = format!("goal-follower={}#scripted", spawn_user(false));
    // Two dialogues of crosswoz-demo with `system` as the wizard: the summary and the stderr.
    let play = |system: &str, data: &Path| {
        let (code, out, err) = wozkit(&[
            "simulate-users",
            "crosswoz-demo",
            "--user",
            &user,
            "--system",
            system,
            "--dialogues",
            "2",
            "--seed",
            "3",
            "--pace-ms",
            "20-40",
            "--data",
            data.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
        (serde_json::from_str::<Value>(&out).unwrap(), err)
    };
    let system = format!("assistant={}#test-model", spawn_system(false));
    let (summary, _) = play(&system, &data);
    assert_eq!(summary["wizard"], "system:assistant");
    assert_eq!(summary["failed"], json!([]));
    assert_eq!(summary["goals"]["scored"], 2, "{summary}");
    let ids: Vec<String> = summary["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    for (id, events) in ids.iter().zip(sessions(&data, &ids)) {
        let said: Vec<(&Actor, Role, &str, &MessageSource)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Message { role, text, source } => {
                    Some((&e.actor, *role, text.as_str(), source))
                }
                _ => None,
            })
            .collect();
        // The system opens, and every wizard message is its free text.
        assert_eq!(
            said.first().map(|m| m.1),
            Some(Role::Wizard),
            "{id}: {said:?}"
        );
        for (actor, role, text, source) in &said {
            if *role == Role::Wizard {
                assert!(
                    matches!(actor, Actor::Bot { name, .. } if name == "system:assistant"),
                    "{id}: {actor:?}"
                );
                assert_eq!(*text, "I can help with that. What else should I know?");
                assert_eq!(**source, MessageSource::Free);
            }
        }
        // Every user message is answered before the next one.
        let users = said.iter().filter(|m| m.1 == Role::User).count();
        let wizards = said.iter().filter(|m| m.1 == Role::Wizard).count();
        assert!(users >= 1 && wizards >= users, "{id}: {said:?}");
        assert!(
            said.windows(2)
                .all(|w| !(w[0].1 == Role::User && w[1].1 == Role::User)),
            "{id}: the user spoke twice without an answer: {said:?}"
        );
        assert!(
            matches!(
                events.last().map(|e| &e.kind),
                Some(EventKind::SessionEnded { .. })
            ),
            "{id} did not end"
        );
    }

    // A system that cannot answer ends each dialogue, saying why.
    let broken = format!("mute={}#test-model", spawn_system(true));
    let (summary, err) = play(&broken, &dir.path().join("data-broken"));
    assert_eq!(summary["ended"], json!({"aborted": 2}), "{summary}");
    assert!(err.contains("could not answer; the dialogue ends"), "{err}");
}

/// A stand-in simulated user for chat pages: message `turn` quotes the start of the goal (the
/// page's own words) and the last reply it saw; from turn 5 on it ends with `[END]`. Asked for
/// an arena's vote, it says `both_bad` (which the crowd's policy without noise never says) and,
/// as the reason, how many replies it was shown on each side. Asked a question after the
/// conversation, it answers each of `bot-chat-demo`'s three scales differently, in the ways a
/// model writes a number (alone, in a sentence, with the point's label), and a question it does
/// not know with 1.
fn chat_answer(prompt: &str) -> String {
    if prompt.contains("Rate each of these statements") {
        // A matrix: the statements by number, in an order of the model's own.
        assert!(
            prompt.contains("1. It understood me\n2. It was quick"),
            "{prompt}"
        );
        return "2: 2\n1: 5".into();
    }
    if prompt.contains("Order these options from best to worst") {
        // A ranking: all options but one (the last is implied), with the model's numbering.
        return "1. Suggestions\n2. Opening hours".into();
    }
    if prompt.contains("answer this question about the conversation") {
        assert!(
            prompt.contains("assistant: ") && prompt.contains("Answer with one number from 1 to 5"),
            "the answer prompt shows the conversation and the scale: {prompt}"
        );
        return if prompt.contains("How helpful") {
            "4".into()
        } else if prompt.contains("chat with it again") {
            "I would say 3.".into()
        } else if prompt.contains("human-like") {
            "2 (fairly machine-like)".into()
        } else {
            "1".into()
        };
    }
    if let Some((_, sides)) = prompt.split_once("The conversation with the assistant on the left:")
    {
        let (left, right) = sides
            .split_once("The conversation with the assistant on the right:")
            .unwrap_or((sides, ""));
        let replies = |text: &str| {
            text.lines()
                .filter(|l| l.starts_with("assistant: "))
                .count()
        };
        return format!(
            "Both bad.\nleft {} replies, right {} replies",
            replies(left),
            replies(right)
        );
    }
    let (goal, turn) = goal_and_turn(prompt);
    if turn >= 5 {
        return "Thanks, that is all. [END]".into();
    }
    let opening: String = goal.chars().take(24).collect();
    format!("Message {turn} about: {opening}")
}

#[test]
fn simulated_users_chat_with_a_chat_studys_systems_through_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = common::chat_completions_server(
        |prompt| json!({"choices": [{"message": {"role": "assistant", "content": chat_answer(prompt)}}]}),
    );
    let user = format!("reader={url}#scripted");
    for study in ["bot-chat-demo", "arena-demo"] {
        let (code, out, err) = wozkit(&[
            "simulate-users",
            study,
            "--user",
            &user,
            "--dialogues",
            "3",
            "--concurrency",
            "2",
            "--data",
            data.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(code, 0, "{study}: stdout: {out}\nstderr: {err}");
        let summary: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(summary["failed"], json!([]), "{study}: {summary}");
        assert_eq!(summary["wizard"], "study-systems");
        assert_eq!(
            summary["participants_without_item"], 0,
            "{study}: {summary}"
        );
        // One conversation per participant on the chat page, two (one per side) in a battle.
        let per = if study == "arena-demo" { 2 } else { 1 };
        let ids: Vec<String> = summary["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        assert_eq!(ids.len(), 3 * per, "{study}: {summary}");
        assert_eq!(summary["ended"], json!({"finished": 3 * per}), "{study}");
        for (id, events) in ids.iter().zip(sessions(&data, &ids)) {
            assert!(
                is_simulated(&events),
                "{study}: {id} is not marked simulated"
            );
            let said: Vec<(Role, String)> = wozkit_core::event::messages(&events)
                .map(|(r, t)| (r, t.to_string()))
                .collect();
            // Five messages, each answered by the system: the fifth is what the stand-in wrote
            // before its stop phrase, and the page allows the end after it (from three or four
            // messages on).
            let mine: Vec<&String> = said
                .iter()
                .filter(|(r, _)| *r == Role::User)
                .map(|(_, t)| t)
                .collect();
            assert_eq!(mine.len(), 5, "{study}: {id}: {said:?}");
            assert_eq!(mine[4], "Thanks, that is all.", "{study}: {id}");
            assert_eq!(said.len(), 10, "{study}: {id}: {said:?}");
            // The page's own words reached the simulated user as its goal.
            let title = if study == "arena-demo" {
                "Chat with"
            } else {
                "Chat with the library"
            };
            assert!(
                mine[0].starts_with(&format!("Message 1 about: {title}")),
                "{study}: {id}: {}",
                mine[0]
            );
        }
        assert_eq!(summary["user_messages"], 15 * per, "{study}");
        if study == "bot-chat-demo" {
            // The questions after the conversation are the simulated user's answers too.
            let answered = answers(&data, study);
            assert_eq!(answered.len(), 3, "{answered:?}");
            for a in answered {
                assert_eq!(
                    (&a["helpful"], &a["engaging"], &a["human_like"]),
                    (&json!(4), &json!(3), &json!(2)),
                    "{a:?}"
                );
            }
        }
        if study == "arena-demo" {
            // Each vote is the simulated user's, cast after seeing both full conversations.
            let votes = votes(&data, study);
            assert_eq!(votes.len(), 3, "{votes:?}");
            for (choice, why) in votes {
                assert_eq!(choice.as_deref(), Some("both_bad"));
                assert_eq!(why.as_deref(), Some("left 5 replies, right 5 replies"));
            }
        }
    }
    // Nobody is paid for a simulated participant, not even with the test participants.
    let payments = dir.path().join("payments.csv");
    let (code, _, err) = wozkit(&[
        "payments",
        "--data",
        data.to_str().unwrap(),
        "--out",
        payments.to_str().unwrap(),
        "--include-test",
    ]);
    assert_eq!(code, 0, "{err}");
    let table = std::fs::read_to_string(&payments).unwrap();
    assert_eq!(table.lines().count(), 1, "{table}");
}

/// A matrix and a ranking after the conversation are the simulated user's answers too, read
/// from the model's lines (`wozkit_core::simulated_users::read_answer`), not the crowd's policy.
#[test]
fn simulated_users_answer_a_matrix_and_a_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let yaml = include_str!("../../../wozkit-core/studies/bot-chat-demo/study.yaml")
        .replace("id: bot-chat-demo", "id: bot-chat-matrix")
        .replace(
            "  no_items:\n",
            "    - id: ux\n      text: About the assistant\n      kind: matrix\n      points: 5\n      \
             rows: [{id: understood, text: It understood me}, {id: quick, text: It was quick}]\n    \
             - id: best\n      text: What did it do best?\n      kind: ranking\n      \
             options: [Borrowing, Suggestions, Opening hours]\n  no_items:\n",
        );
    let study = dir.path().join("study.yaml");
    std::fs::write(&study, yaml).unwrap();
    let url = common::chat_completions_server(
        |prompt| json!({"choices": [{"message": {"role": "assistant", "content": chat_answer(prompt)}}]}),
    );
    let (code, out, err) = wozkit(&[
        "simulate-users",
        study.to_str().unwrap(),
        "--user",
        &format!("reader={url}#scripted"),
        "--dialogues",
        "2",
        "--data",
        data.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["failed"], json!([]), "{summary}");
    let answered = answers(&data, "bot-chat-matrix");
    assert_eq!(answered.len(), 2, "{answered:?}");
    for a in answered {
        assert_eq!(a["helpful"], json!(4), "{a:?}");
        // A matrix's rows are stored one key each.
        assert_eq!(
            (&a["ux.understood"], &a["ux.quick"]),
            (&json!(5), &json!(2)),
            "{a:?}"
        );
        assert_eq!(
            a["best"],
            json!(["Suggestions", "Opening hours", "Borrowing"]),
            "{a:?}"
        );
    }
}
