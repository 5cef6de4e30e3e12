//! Round trips on the real corpora in `shared/corpora/`: import then export gives back the
//! original JSON (key order included), and where the corpus was written by Python's `json.dump`
//! with raw UTF-8, the original bytes.

mod common;

use common::{assert_same_json, corpus, files, parse, read};
use wozkit_data::{
    Format, Input, export_convlab3, export_crosswoz, export_crsarena, export_crsarena_eval,
    export_crwiz, export_multiwoz21, export_taskmaster1, export_taskmaster1_conversation,
    export_votes_csv, import_convlab3, import_crosswoz, import_crsarena, import_crsarena_eval,
    import_crwiz, import_multiwoz21, import_taskmaster1, import_votes_csv, lost_events,
    write_zipped,
};

#[test]
fn taskmaster1_sample_round_trips() {
    let input = read("taskmaster1/sample.json");
    let sessions = import_taskmaster1(&input).expect("import");
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].messages().count(), 20);
    let mut out = Vec::new();
    export_taskmaster1_conversation(&sessions[0], &mut out).expect("export");
    let original = input.json().expect("original");
    assert_same_json(&original, &parse(&out), "sample.json");

    // The dataset layout (an array) holds the same conversation.
    let mut array = Vec::new();
    export_taskmaster1(&sessions, &mut array).expect("export array");
    let reimported = import_taskmaster1(&Input::new("array.json", array)).expect("reimport");
    assert_eq!(reimported, sessions);
}

#[test]
fn crosswoz_test_zip_round_trips_byte_for_byte() {
    let input = read("crosswoz/test.json.zip");
    let sessions = import_crosswoz(&input).expect("import");
    assert_eq!(sessions.len(), 500);
    assert_eq!(
        sessions.iter().map(|s| s.messages().count()).sum::<usize>(),
        8476
    );
    let mut zipped = Vec::new();
    write_zipped(&mut zipped, "test.json", |w| export_crosswoz(&sessions, w)).expect("export");
    let exported = Input::new("exported.zip", zipped)
        .unzipped()
        .expect("unzip export");
    let original = input.unzipped().expect("unzip original");
    assert_same_json(&parse(&original), &parse(&exported), "crosswoz test.json");
    assert!(original == exported, "same bytes as the released test.json");
    assert!(
        sessions
            .iter()
            .all(|s| lost_events(Format::CrossWoz, s).is_empty())
    );
}

#[test]
fn multiwoz21_test_zip_round_trips() {
    let input = read("multiwoz/test.json.zip");
    let sessions = import_multiwoz21(&input).expect("import");
    assert_eq!(sessions.len(), 1000);
    assert_eq!(
        sessions.iter().map(|s| s.messages().count()).sum::<usize>(),
        14744
    );
    let mut zipped = Vec::new();
    write_zipped(&mut zipped, "test.json", |w| {
        export_multiwoz21(&sessions, w)
    })
    .expect("export");
    let exported = Input::new("exported.zip", zipped)
        .json()
        .expect("unzip export");
    assert_same_json(
        &input.json().expect("original"),
        &exported,
        "multiwoz test.json",
    );
}

#[test]
fn convlab3_dummy_data_round_trips_byte_for_byte() {
    for dataset in ["multiwoz21", "crosswoz", "tm1"] {
        let input = read(&format!("convlab3_unified/{dataset}/dummy_data.json"));
        let sessions = import_convlab3(&input).expect("import");
        assert_eq!(sessions.len(), 10, "{dataset}");
        let mut out = Vec::new();
        export_convlab3(&sessions, &mut out).expect("export");
        assert_same_json(&input.json().expect("original"), &parse(&out), dataset);
        assert!(input.bytes() == out.as_slice(), "{dataset}: same bytes");
    }
}

#[test]
fn crsarena_dialogues_round_trip() {
    for (file, count) in [
        ("crs_arena_dial_open.json", 254),
        ("crs_arena_dial_closed.json", 220),
    ] {
        let input = read(&format!("crsarena_dial/{file}"));
        let sessions = import_crsarena(&input).expect("import");
        assert_eq!(sessions.len(), count, "{file}");
        let mut out = Vec::new();
        export_crsarena(&sessions, &mut out).expect("export");
        assert_same_json(&input.json().expect("original"), &parse(&out), file);
    }
}

#[test]
fn crsarena_merged_sample_and_eval_round_trip() {
    let input = read("crsarena_eval/sample_crs_arena_dial_with_votes.json");
    let sessions = import_crsarena(&input).expect("import merged");
    let mut out = Vec::new();
    export_crsarena(&sessions, &mut out).expect("export merged");
    assert_same_json(
        &input.json_lenient().expect("original"),
        &parse(&out),
        "merged sample",
    );

    let input = read("crsarena_eval/crs_arena_eval.json");
    let sessions = import_crsarena_eval(&input).expect("import eval");
    assert_eq!(sessions.len(), 467);
    let mut out = Vec::new();
    export_crsarena_eval(&sessions, &mut out).expect("export eval");
    assert_same_json(
        &input.json().expect("original"),
        &parse(&out),
        "crs_arena_eval.json",
    );
}

#[test]
fn merged_nan_feedback_is_read_and_written_as_null() {
    let text = r#"[{"conversation ID": "a_u", "agent": {"id": "a", "type": "AGENT"},
        "user": {"id": "u", "type": "USER"}, "conversation": [], "metadata": {},
        "vote_result": {"result": "tie", "details": {"crs1": "a", "crs2": "b", "vote": "tie", "feedback": NaN}}}]"#;
    let sessions = import_crsarena(&Input::new("merged.json", text)).expect("import");
    let mut out = Vec::new();
    export_crsarena(&sessions, &mut out).expect("export");
    let exported = parse(&out);
    assert_eq!(
        exported[0]["vote_result"]["details"]["feedback"],
        serde_json::Value::Null
    );
}

#[test]
fn vote_csvs_round_trip_row_by_row() {
    for (file, rows) in [("votes_open.csv", 81), ("votes_closed.csv", 104)] {
        let input = read(&format!("crsarena_dial/{file}"));
        let sessions = import_votes_csv(&input).expect("import");
        assert_eq!(sessions.len(), rows, "{file}");
        let mut out = Vec::new();
        export_votes_csv(&sessions, &mut out).expect("export");
        let records = |bytes: &[u8]| -> Vec<csv::StringRecord> {
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(false)
                .from_reader(bytes);
            reader
                .records()
                .collect::<Result<_, _>>()
                .expect("valid CSV")
        };
        assert_eq!(records(input.bytes()), records(&out), "{file}");
        assert!(input.bytes() == out.as_slice(), "{file}: same bytes");
    }
}

#[test]
fn crwiz_files_round_trip_byte_for_byte() {
    let mut paths = files("crwiz_mturk", ".shcn.data.json");
    assert_eq!(paths.len(), 147);
    paths.extend(files("crwiz_lab", ".shcn.data.json"));
    for path in paths {
        let input = Input::read(&path).expect("read");
        let sessions = import_crwiz(&input).expect("import");
        let mut out = Vec::new();
        export_crwiz(&sessions, &mut out).expect("export");
        let name = path.display().to_string();
        assert_same_json(&input.json().expect("original"), &parse(&out), &name);
        assert!(input.bytes() == out.as_slice(), "{name}: same bytes");
        assert!(
            lost_events(Format::Crwiz, &sessions[0]).is_empty(),
            "{name}"
        );
    }
}

#[test]
fn crwiz_labels_keep_their_act_type_and_operator_text_is_split() {
    use wozkit_core::event::{EventKind, MessageSource, Role};
    use wozkit_core::model::ActType;
    let path = files("crwiz_mturk", ".shcn.data.json").remove(0);
    let original = Input::read(&path).expect("read").json().expect("json");
    let session = import_crwiz(&Input::read(&path).expect("read"))
        .expect("import")
        .remove(0);
    let entries = original["dialogue"].as_array().expect("entries");
    let wizard: Vec<&MessageSource> = session
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Message {
                role: Role::Wizard,
                source,
                ..
            } => Some(source),
            _ => None,
        })
        .collect();
    assert_eq!(wizard.len(), entries.len());
    for (entry, source) in entries.iter().zip(&wizard) {
        let label = entry["current_state"].as_str().expect("label");
        match wozkit_data::crwiz_act_type(label) {
            Some(act_type) => assert_eq!(source.act(), Some((label, act_type))),
            None => assert_eq!(**source, MessageSource::Free),
        }
    }
    let users: usize = entries
        .iter()
        .filter_map(|e| e["user"].as_str())
        .map(|u| u.split(". ").count())
        .sum();
    assert_eq!(
        session.messages().filter(|(r, _)| *r == Role::User).count(),
        users
    );
    assert!(
        wizard
            .iter()
            .any(|s| s.act().map(|a| a.1) == Some(ActType::Update))
    );
    assert!(corpus("crwiz_mturk").is_dir());
}
