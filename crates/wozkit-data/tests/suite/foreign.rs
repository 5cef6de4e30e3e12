//! Exports of a live wizard-of-oz session (not imported from any dataset) into every format: the
//! importer reads each file back, the messages survive, and whatever the file cannot hold is in
//! the sidecar.

use crate::common;

use indexmap::IndexMap;
use serde_json::json;
use wozkit_core::event::{
    Actor, EVENT_SCHEMA_VERSION, EndReason, Event, EventKind, MessageSource, Role,
};
use wozkit_core::model::ActType;
use wozkit_data::sidecar::SidecarLine;
use wozkit_data::{
    Format, ImportedSession, Input, export_jsonl, export_survey_csv, export_votes_csv, formats,
    import_jsonl, import_votes_csv, lost_events, read_sidecar, votes, write_sidecar,
};

fn live_session() -> ImportedSession {
    let id = "5f0c7a52-live";
    let participant = |role| Actor::Participant {
        role,
        participant: Some(format!("p-{}", role.as_str())),
    };
    let message = |role, text: &str, source| EventKind::Message {
        role,
        text: text.into(),
        source,
    };
    let state = MessageSource::State {
        state: "s_intro".into(),
        label: "intro_hello".into(),
        act_type: ActType::Interaction,
        template: 1,
    };
    let okay = MessageSource::Fixed {
        id: "okay".into(),
        label: "okay".into(),
        act_type: ActType::Interaction,
    };
    let world: IndexMap<String, serde_json::Value> = [("emergency".to_string(), json!("fire"))]
        .into_iter()
        .collect();
    let answers: IndexMap<String, serde_json::Value> = [
        ("sentiment".to_string(), json!("satisfied")),
        ("ease".to_string(), json!(4)),
    ]
    .into_iter()
    .collect();
    let kinds = vec![
        (
            Actor::System,
            EventKind::SessionStarted {
                study: "offshore".into(),
                study_version: "1".into(),
                seed: 7,
                initial_state: "start".into(),
            },
        ),
        (
            Actor::System,
            EventKind::ClockStarted {
                deadline_ms: 1_000_360_000,
            },
        ),
        (
            participant(Role::User),
            message(Role::User, "Hello? Anyone there", MessageSource::Free),
        ),
        (Actor::System, EventKind::WorldSet { values: world }),
        (
            participant(Role::Wizard),
            message(Role::Wizard, "Hi, I am Fred.", state),
        ),
        (
            Actor::System,
            EventKind::SubtaskEntered {
                subtask: "inspect".into(),
            },
        ),
        (
            participant(Role::User),
            message(Role::User, "send husky 1. now", MessageSource::Free),
        ),
        (
            participant(Role::User),
            message(Role::User, "Thanks", MessageSource::Free),
        ),
        (
            participant(Role::Wizard),
            message(Role::Wizard, "Okay", okay),
        ),
        (
            Actor::System,
            EventKind::MediaShown {
                media: "move".into(),
                file: "move.gif".into(),
            },
        ),
        (
            participant(Role::Wizard),
            message(Role::Wizard, "On its way", MessageSource::Free),
        ),
        (
            participant(Role::User),
            EventKind::SurveyAnswered {
                role: Role::User,
                answers,
            },
        ),
        (
            Actor::System,
            EventKind::SessionEnded {
                reason: EndReason::Finished,
                goal_reached: true,
            },
        ),
    ];
    let events = kinds
        .into_iter()
        .enumerate()
        .map(|(i, (actor, kind))| Event {
            v: EVENT_SCHEMA_VERSION,
            session: id.into(),
            seq: i as u64 + 1,
            at_ms: 1_000_000_000 + 1000 * i as u64,
            actor,
            kind,
        })
        .collect();
    ImportedSession {
        id: id.into(),
        events,
    }
}

fn texts(session: &ImportedSession) -> Vec<(Role, String)> {
    session
        .messages()
        .map(|(r, t)| (r, t.to_string()))
        .collect()
}

#[test]
fn every_format_reads_back_a_live_session_and_the_sidecar_keeps_the_rest() {
    let session = live_session();
    let original = texts(&session);
    for format in Format::ALL {
        let mut out = Vec::new();
        formats::export(format, std::slice::from_ref(&session), &mut out).expect("export");
        let back = formats::import(format, &Input::new("live.json", out)).expect("reimport");
        assert_eq!(back.len(), 1, "{format:?}");
        let back = texts(&back[0]);
        match format {
            // The user first, consecutive messages of a speaker merged with a space.
            Format::MultiWoz21 | Format::CrossWoz | Format::ConvLab3 => {
                let mut shaped: Vec<(Role, String)> = vec![];
                for (role, text) in original.iter().skip_while(|(r, _)| *r != Role::User) {
                    match shaped.last_mut() {
                        Some((r, t)) if r == role => {
                            t.push(' ');
                            t.push_str(text);
                        }
                        _ => shaped.push((*role, text.clone())),
                    }
                }
                if format != Format::ConvLab3 && shaped.len() % 2 == 1 {
                    shaped.push((Role::Wizard, String::new()));
                }
                assert_eq!(back, shaped, "{format:?}");
            }
            // No entry before the first wizard message; operator text re-split on ". ".
            Format::Crwiz => {
                let expected: Vec<(Role, String)> = [
                    (Role::Wizard, "Hi, I am Fred."),
                    (Role::User, "send husky 1"),
                    (Role::User, "now"),
                    (Role::User, "Thanks"),
                    (Role::Wizard, "Okay"),
                    (Role::Wizard, "On its way"),
                ]
                .into_iter()
                .map(|(r, t)| (r, t.to_string()))
                .collect();
                assert_eq!(back, expected);
            }
            _ => assert_eq!(back, original, "{format:?}"),
        }

        let mut sidecar = Vec::new();
        let lines =
            write_sidecar(format, std::slice::from_ref(&session), &mut sidecar).expect("sidecar");
        assert_eq!(lines, 1);
        let lines: Vec<SidecarLine> = read_sidecar(&Input::new("sidecar", sidecar)).expect("read");
        let lost: Vec<u64> = lines[0].events.iter().map(|e| e.seq).collect();
        // Every event carries a timestamp, so nothing comes back unchanged: all go to the sidecar.
        assert_eq!(lost.len(), session.events.len(), "{format:?}");
    }
}

#[test]
fn plain_messages_stay_in_the_file_and_only_the_rest_goes_to_the_sidecar() {
    let mut session = live_session();
    for event in &mut session.events {
        if let EventKind::Message { role, .. } = &event.kind {
            event.at_ms = 0;
            event.actor = Actor::Participant {
                role: *role,
                participant: None,
            };
        }
    }
    let lost_seqs = |format| -> Vec<u64> {
        lost_events(format, &session)
            .iter()
            .map(|e| e.seq)
            .collect()
    };
    // Not messages: 1, 2, 4, 6, 10, 12, 13. Labelled wizard messages: 5 (state), 9 (fixed).
    assert_eq!(
        lost_seqs(Format::Taskmaster1),
        vec![1, 2, 4, 5, 6, 9, 10, 12, 13]
    );
    // CRWIZ keeps the fixed option `okay` but not state `s_intro` (it reads labels back as
    // states named after the label), drops the message before the first wizard message, and
    // the operator group whose ". " join would split differently.
    assert_eq!(
        lost_seqs(Format::Crwiz),
        vec![1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 13]
    );
}

#[test]
fn a_crwiz_export_keeps_labels_world_and_time() {
    let session = live_session();
    let mut out = Vec::new();
    formats::export(Format::Crwiz, std::slice::from_ref(&session), &mut out).expect("export");
    let file: serde_json::Value = serde_json::from_slice(&out).expect("json");
    let entries = file["dialogue"].as_array().expect("entries");
    assert_eq!(entries[0]["current_state"], "intro_hello");
    assert_eq!(entries[0]["situation_db"], r#"{"emergency": "fire"}"#);
    assert_eq!(entries[0]["time"], json!(356.0));
    assert_eq!(entries[0]["user"], "send husky 1. now. Thanks");
    assert_eq!(entries[1]["current_state"], "okay");
    assert_eq!(entries[1]["subtask"], "inspect");
    assert_eq!(entries[1]["image"], "move.gif");
    assert_eq!(entries[2]["current_state"], "UNK");
    assert_eq!(file["condition"], "offshore");
}

#[test]
fn wizard_state_labels_are_not_written_as_dataset_acts() {
    let session = live_session();
    let export = |format| {
        let mut out = Vec::new();
        formats::export(format, std::slice::from_ref(&session), &mut out).expect("export");
        serde_json::from_slice::<serde_json::Value>(&out).expect("json")
    };
    let crosswoz = export(Format::CrossWoz);
    let turn = &crosswoz[&session.id]["messages"][1];
    assert_eq!(
        turn["dialog_act"],
        json!([]),
        "a state label is no CrossWOZ act"
    );
    assert_eq!(turn["sys_state"]["酒店"]["selectedResults"], json!([]));
    let convlab = export(Format::ConvLab3);
    assert_eq!(convlab[0]["original_id"], json!(session.id));
    let acts = &convlab[0]["turns"][1]["dialogue_acts"]["binary"];
    assert_eq!(acts, &json!([]));
    let multiwoz = export(Format::MultiWoz21);
    let log = multiwoz[&session.id]["log"].as_array().expect("log");
    assert_eq!(log.len() % 2, 0);
    assert_eq!(log[1]["dialog_act"], json!({}), "no made-up general act");
    let arena = export(Format::CrsArena);
    assert_eq!(arena[0]["metadata"], json!({"sentiment": "satisfied"}));
    assert_eq!(
        arena[0]["conversation"][2]["utterance ID"],
        json!(format!("wizard-{}_2", session.id))
    );
}

#[test]
fn sessions_from_another_dataset_lose_only_what_the_target_cannot_hold() {
    let input = common::Corpus::fixtures().read("taskmaster1/sample.json");
    let sessions = wozkit_data::import_taskmaster1(&input).expect("import");
    // Taskmaster-1's own annotations go to the sidecar; the plain messages do not.
    let lost = lost_events(Format::ConvLab3, &sessions[0]);
    assert!(!lost.is_empty());
    assert!(lost.iter().all(
        |e| matches!(&e.kind, EventKind::Annotation { key, .. } if key.starts_with("taskmaster1."))
    ));
    let mut out = Vec::new();
    formats::export(Format::ConvLab3, &sessions, &mut out).expect("export");
    let back = formats::import(Format::ConvLab3, &Input::new("x.json", out)).expect("reimport");
    assert_eq!(texts(&back[0]), texts(&sessions[0]));
}

#[test]
fn the_event_log_round_trips_through_jsonl() {
    let sessions = vec![live_session()];
    let mut out = Vec::new();
    export_jsonl(&sessions, &mut out).expect("export");
    assert_eq!(
        out.iter().filter(|&&b| b == b'\n').count(),
        sessions[0].events.len()
    );
    let back = import_jsonl(&Input::new("log.jsonl", out)).expect("import");
    assert_eq!(back, sessions);
}

#[test]
fn votes_and_survey_answers_export_as_csv() {
    let mut session = live_session();
    let vote = json!({"session_id": "2024-09-13 02:57:16", "user_id": "u1", "crs1": "a", "crs2": "b",
        "vote": "a", "feedback": "line one\n\"quoted\", comma"});
    let seq = session.events.len() as u64 + 1;
    session.events.push(Event {
        v: EVENT_SCHEMA_VERSION,
        session: session.id.clone(),
        seq,
        at_ms: 0,
        actor: Actor::System,
        kind: EventKind::Annotation {
            key: "vote".into(),
            value: vote,
        },
    });
    let sessions = vec![session];
    let mut out = Vec::new();
    export_votes_csv(&sessions, &mut out).expect("votes");
    let back = import_votes_csv(&Input::new("votes.csv", out)).expect("reimport");
    assert_eq!(
        votes(&back).expect("votes"),
        votes(&sessions).expect("votes")
    );
    assert_eq!(votes(&back).expect("votes")[0].score(), 1.0);

    let mut out = Vec::new();
    export_survey_csv(&sessions, &mut out).expect("survey");
    let text = String::from_utf8(out).expect("utf8");
    assert_eq!(
        text,
        "session,role,item,value\n5f0c7a52-live,user,sentiment,satisfied\n5f0c7a52-live,user,ease,4\n"
    );
}
