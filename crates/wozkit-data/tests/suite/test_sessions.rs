//! Test sessions (a participant marked `test`, as `/try` and lab links with `test=1` make them)
//! are left out of `report` and `export` unless `include_test` asks for them.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_data::report::{ReportOptions, build_report};
use wozkit_data::stored::{ExportFormat, ExportOptions, NoProgress, export_store};
use wozkit_store::{
    NewEvent, NewParticipant, NewSession, ParticipantPatch, Platform, Store, TEST_KEY,
};

/// A played session with one lab participant, marked as a test when `test`.
async fn session(store: &dyn Store, id: &str, test: bool) {
    store
        .create_session(NewSession {
            id: id.into(),
            study_id: "live".into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: 1_000,
        })
        .await
        .expect("create session");
    let mut external_ids = BTreeMap::new();
    if test {
        external_ids.insert(TEST_KEY.to_string(), "1".to_string());
    }
    let participant = format!("{id}-p");
    store
        .create_participant(NewParticipant {
            id: participant.clone(),
            token_hash: format!("hash-{id}"),
            study_id: "live".into(),
            platform: Platform::Lab,
            worker_id: None,
            external_ids,
            flow_step: "0".into(),
            created_at_ms: 1_000,
        })
        .await
        .expect("create participant");
    store
        .update_participant(
            &participant,
            ParticipantPatch {
                session_id: Some(Some(id.into())),
                role: Some(Some(Role::User)),
                ..ParticipantPatch::default()
            },
        )
        .await
        .expect("place participant");
    let kinds = [
        EventKind::SessionStarted {
            study: "live".into(),
            study_version: "1".into(),
            seed: 0,
            initial_state: "start".into(),
        },
        EventKind::Message {
            role: Role::User,
            text: format!("hello from {id}"),
            source: MessageSource::Free,
        },
        EventKind::SessionEnded {
            reason: EndReason::Terminal,
            goal_reached: true,
        },
    ];
    let events = kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| NewEvent {
            actor: Actor::System,
            kind,
            at_ms: 1_000 + i as u64,
        })
        .collect();
    store.append(id, events).await.expect("append");
}

async fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(&dir.path().display().to_string())
        .await
        .expect("open store");
    session(&*store, "real", false).await;
    session(&*store, "tried", true).await;
    (dir, store)
}

#[tokio::test]
async fn report_leaves_test_sessions_out_unless_asked() {
    let (_dir, store) = store().await;
    let default = build_report(&*store, &ReportOptions::default())
        .await
        .expect("report");
    assert_eq!(default.sessions, 1);
    let all = ReportOptions {
        include_test: true,
        ..ReportOptions::default()
    };
    let with_tests = build_report(&*store, &all).await.expect("report");
    assert_eq!(with_tests.sessions, 2);
}

/// The store ids of the sessions a JSON Lines export wrote.
async fn exported(store: &dyn Store, include_test: bool) -> HashSet<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("events.jsonl");
    let options = ExportOptions {
        format: ExportFormat::Jsonl,
        out: out.clone(),
        split: None,
        study: None,
        include_test,
    };
    export_store(store, &options, &NoProgress)
        .await
        .expect("export");
    std::fs::read_to_string(&out)
        .expect("read export")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            v["session"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

#[tokio::test]
async fn export_leaves_test_sessions_out_unless_asked() {
    let (_dir, store) = store().await;
    assert_eq!(
        exported(&*store, false).await,
        HashSet::from(["real".into()])
    );
    assert_eq!(
        exported(&*store, true).await,
        HashSet::from(["real".into(), "tried".into()])
    );
}

#[tokio::test]
async fn a_dataset_export_leaves_test_sessions_out_too() {
    let (_dir, store) = store().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("dialogues.json");
    let format = ExportFormat::parse("taskmaster1").expect("a format");
    for (include_test, written) in [(false, 1), (true, 2)] {
        let options = ExportOptions {
            format,
            out: out.clone(),
            split: None,
            study: None,
            include_test,
        };
        let summary = export_store(&*store, &options, &NoProgress)
            .await
            .expect("export");
        assert_eq!(summary.sessions_written, written);
        let text = std::fs::read_to_string(&out).expect("read export");
        assert_eq!(text.contains("hello from tried"), include_test, "{text}");
    }
}
