//! A split ConvLab-3 export of live sessions, from the store as `wozkit export --format convlab3
//! --split …` writes it: simulated sessions of every built-in dialogue study are written into a
//! SQLite store as a room writes them, exported in three parts, and the parts are checked to
//! union into one valid dataset: each part a folder with `data.zip` (`data/ontology.json`,
//! `data/dialogues.json`) and `dummy_data.json`, every dialogue's `data_split` its part, ids
//! `wozkit-<part>-<n>` numbered from 0 within the part, no id twice, the same ontology in every
//! part, every act and slot of every part in it, and every session in exactly one part.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use wozkit_core::load::load_builtin;
use wozkit_data::Format;
use wozkit_data::download::unzip_files;
use wozkit_data::stored::{ExportFormat, ExportOptions, NoProgress, SplitSpec, export_store};
use wozkit_store::{NewEvent, NewSession, Store};

const STUDIES: [&str; 3] = ["offshore-emergency", "restaurant-booking", "crosswoz-demo"];
const SEEDS: u64 = 5;
const PARTS: [&str; 3] = ["train", "validation", "test"];

/// Writes the simulated sessions; returns how many have messages (the ones a dataset holds).
async fn write_sessions(store: &dyn Store) -> usize {
    let mut with_messages = 0;
    for name in STUDIES {
        let study = load_builtin(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        for seed in 0..SEEDS {
            let played =
                wozkit_core::sim::play(&study, seed, wozkit_core::sim::WizardPolicy::Priors);
            let id = format!("{name}-{seed}");
            store
                .create_session(NewSession {
                    id: id.clone(),
                    study_id: name.into(),
                    study_version: "1".into(),
                    seed,
                    created_at_ms: 1_000,
                })
                .await
                .expect("session created");
            let events: Vec<NewEvent> = played
                .events
                .into_iter()
                .map(|(actor, kind, at_ms)| NewEvent { actor, kind, at_ms })
                .collect();
            if events
                .iter()
                .any(|e| matches!(e.kind, wozkit_core::event::EventKind::Message { .. }))
            {
                with_messages += 1;
            }
            store.append(&id, events).await.expect("events appended");
        }
    }
    with_messages
}

/// The part's `data/ontology.json` and `data/dialogues.json`, from its `data.zip`.
fn read_part(dir: &std::path::Path) -> (Value, Vec<Value>) {
    let zip =
        std::fs::read(dir.join("data.zip")).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let files: BTreeMap<String, Vec<u8>> = unzip_files(&zip).expect("a zip").into_iter().collect();
    let json = |name: &str| -> Value {
        let bytes = files
            .get(name)
            .unwrap_or_else(|| panic!("{}: {name} in data.zip", dir.display()));
        serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let dialogues = json("data/dialogues.json")
        .as_array()
        .cloned()
        .expect("a list of dialogues");
    assert!(
        dir.join("dummy_data.json").is_file(),
        "{}: dummy_data.json",
        dir.display()
    );
    (json("data/ontology.json"), dialogues)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convlab3_split_parts_union_into_one_valid_dataset() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = wozkit_store::open(&tmp.path().join("data").display().to_string())
        .await
        .expect("store");
    let sessions = write_sessions(store.as_ref()).await;
    assert!(sessions >= 10, "only {sessions} simulated sessions spoke");
    let out = tmp.path().join("convlab3");
    let options = ExportOptions {
        format: ExportFormat::Dataset(Format::ConvLab3),
        out: out.clone(),
        split: Some(SplitSpec::parse("train=0.6,validation=0.2,test=0.2", 7).expect("split")),
        study: None,
        include_test: false,
    };
    export_store(store.as_ref(), &options, &NoProgress)
        .await
        .expect("export");
    store.close().await;

    let mut ontologies = vec![];
    let mut ids = BTreeSet::new();
    let mut total = 0;
    let mut acts = 0;
    for part in PARTS {
        let (ontology, dialogues) = read_part(&out.join(part));
        assert!(!dialogues.is_empty(), "part {part} is empty");
        for (n, d) in dialogues.iter().enumerate() {
            assert_eq!(d["data_split"], part, "{}", d["dialogue_id"]);
            assert_eq!(d["dataset"], "wozkit");
            let id = d["dialogue_id"].as_str().expect("dialogue_id");
            assert_eq!(
                id,
                format!("wozkit-{part}-{n}"),
                "ids numbered within the part"
            );
            assert!(ids.insert(id.to_string()), "{id} twice");
            for turn in d["turns"].as_array().expect("turns") {
                for kind in ["categorical", "non-categorical", "binary"] {
                    for act in turn["dialogue_acts"][kind].as_array().into_iter().flatten() {
                        let (domain, intent) = (
                            act["domain"].as_str().expect("domain"),
                            act["intent"].as_str().expect("intent"),
                        );
                        assert!(
                            ontology["intents"].get(intent).is_some(),
                            "{id}: intent {intent} not in the ontology"
                        );
                        assert!(
                            ontology["domains"].get(domain).is_some(),
                            "{id}: domain {domain} not in the ontology"
                        );
                        acts += 1;
                        let slot = act["slot"].as_str().unwrap_or_default();
                        if !slot.is_empty() && domain != "general" {
                            assert!(
                                ontology["domains"][domain]["slots"].get(slot).is_some(),
                                "{id}: slot {domain}-{slot} not in the ontology"
                            );
                        }
                    }
                }
            }
        }
        total += dialogues.len();
        ontologies.push(ontology);
    }
    assert_eq!(total, sessions, "every session in exactly one part");
    assert!(acts > 0, "the parts hold no dialogue act to check");
    assert!(
        ontologies.windows(2).all(|w| w[0] == w[1]),
        "every part carries the whole export's ontology"
    );
}
