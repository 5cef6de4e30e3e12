//! `wozkit export --mapping STUDY`: the sessions of a study that is not built in get the acts
//! its `datasets:` mapping gives the wizard's states, and Taskmaster-1's `instruction_id` its
//! mapped scenario; without the flag the store has no definition of the study, so its states
//! are no acts and the instruction id is the study id.

use crate::annotated;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_core::model::ActType;
use wozkit_store::{NewEvent, NewSession};

use annotated::export_json;

const STUDY: &str = "pilot-booking";

/// A copy of the built-in restaurant study under another id (so no built-in mapping applies).
fn study_copy(dir: &Path) -> PathBuf {
    let from =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../wozkit-core/studies/restaurant-booking");
    let to = dir.join("study");
    for sub in ["", "data", "media"] {
        std::fs::create_dir_all(to.join(sub)).expect("mkdir");
        for entry in std::fs::read_dir(from.join(sub)).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_file() {
                std::fs::copy(&path, to.join(sub).join(path.file_name().unwrap())).expect("copy");
            }
        }
    }
    let yaml = std::fs::read_to_string(to.join("study.yaml")).expect("study.yaml");
    let yaml = yaml.replacen("id: restaurant-booking", &format!("id: {STUDY}"), 1);
    std::fs::write(to.join("study.yaml"), yaml).expect("write");
    to
}

async fn fill(data: &Path) {
    let store = wozkit_store::open(&data.display().to_string())
        .await
        .expect("open store");
    store
        .create_session(NewSession {
            id: "s1".into(),
            study_id: STUDY.into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: 1_000,
        })
        .await
        .expect("create session");
    let said = |role: Role, text: &str, source: MessageSource| NewEvent {
        actor: Actor::Participant {
            role,
            participant: None,
        },
        kind: EventKind::Message {
            role,
            text: text.into(),
            source,
        },
        at_ms: 1_000,
    };
    let state = |id: &str| MessageSource::State {
        state: id.into(),
        label: id.into(),
        act_type: ActType::Request,
        template: 0,
    };
    let events = vec![
        NewEvent {
            actor: Actor::System,
            kind: EventKind::SessionStarted {
                study: STUDY.into(),
                study_version: "1".into(),
                seed: 0,
                initial_state: "start".into(),
            },
            at_ms: 1_000,
        },
        said(
            Role::User,
            "A table for dinner, please.",
            MessageSource::Free,
        ),
        said(Role::Wizard, "Which part of town?", state("request_area")),
        said(Role::User, "The old town.", MessageSource::Free),
        said(
            Role::Wizard,
            "Sorry, could you repeat that?",
            MessageSource::Fixed {
                id: "repeat".into(),
                label: "repeat".into(),
                act_type: ActType::Interaction,
            },
        ),
    ];
    store.append("s1", events).await.expect("append");
    store
        .end_session("s1", EndReason::Finished, 2_000)
        .await
        .expect("end");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_study_given_with_mapping_writes_its_mapped_acts_and_scenario() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    fill(&data).await;
    let study = study_copy(dir.path());
    let study = study.display().to_string();
    let with = export_json(
        "multiwoz21",
        &data,
        &dir.path().join("with.json"),
        STUDY,
        &["--mapping", &study],
    );
    let log = with["s1"]["log"].as_array().expect("log");
    assert_eq!(
        log[1]["dialog_act"],
        json!({"Restaurant-Request": [["Area", "?"]]})
    );
    assert_eq!(log[3]["dialog_act"], json!({}), "`repeat` maps onto no act");
    let without = export_json(
        "multiwoz21",
        &data,
        &dir.path().join("without.json"),
        STUDY,
        &[],
    );
    for turn in without["s1"]["log"].as_array().expect("log") {
        assert_eq!(turn["dialog_act"], json!({}), "no mapping, no act");
    }
    let tm: Value = export_json(
        "taskmaster1",
        &data,
        &dir.path().join("tm.json"),
        STUDY,
        &["--mapping", &study],
    );
    assert_eq!(tm[0]["instruction_id"], "restaurant-table-1");
    let tm = export_json(
        "taskmaster1",
        &data,
        &dir.path().join("tm2.json"),
        STUDY,
        &[],
    );
    assert_eq!(tm[0]["instruction_id"], STUDY);
}
