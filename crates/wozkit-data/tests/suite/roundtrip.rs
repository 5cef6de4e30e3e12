//! Round trips on dataset files: import then export gives back the original JSON (key order
//! included), and where the files were written by Python's `json.dump` with raw UTF-8, the
//! original bytes. Each check runs on the excerpts and synthetic files in `tests/fixtures/`
//! always, and on the full corpora in `shared/corpora/` when they are there.

use crate::common;

use common::{Corpus, assert_same_json, parse};
use wozkit_data::{
    Format, Input, export_convlab3, export_crosswoz, export_crsarena, export_crsarena_eval,
    export_crwiz, export_multiwoz21, export_taskmaster1, export_taskmaster1_conversation,
    export_votes_csv, import_convlab3, import_crosswoz, import_crsarena, import_crsarena_eval,
    import_crwiz, import_multiwoz21, import_taskmaster1, import_votes_csv, lost_events,
    write_zipped,
};

/// `sample.json` is checked in whole, so the full corpus has nothing more to offer here.
#[test]
fn taskmaster1_sample_round_trips() {
    let input = Corpus::fixtures().read("taskmaster1/sample.json");
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

fn crosswoz_round_trip(corpus: &Corpus, dialogues: usize, messages: usize) {
    let input = corpus.read("crosswoz/test.json.zip");
    let sessions = import_crosswoz(&input).expect("import");
    assert_eq!(sessions.len(), dialogues);
    assert_eq!(
        sessions.iter().map(|s| s.messages().count()).sum::<usize>(),
        messages
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
fn crosswoz_excerpt_round_trips_byte_for_byte() {
    crosswoz_round_trip(&Corpus::fixtures(), 5, 42);
}

#[test]
fn crosswoz_full_test_zip_round_trips_byte_for_byte() {
    let Some(corpus) = Corpus::full("crosswoz_full_test_zip_round_trips_byte_for_byte") else {
        return;
    };
    crosswoz_round_trip(&corpus, 500, 8476);
}

fn multiwoz21_round_trip(corpus: &Corpus, dialogues: usize, turns: usize) {
    let input = corpus.read("multiwoz/test.json.zip");
    let sessions = import_multiwoz21(&input).expect("import");
    assert_eq!(sessions.len(), dialogues);
    assert_eq!(
        sessions.iter().map(|s| s.messages().count()).sum::<usize>(),
        turns
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
fn multiwoz21_excerpt_round_trips() {
    multiwoz21_round_trip(&Corpus::fixtures(), 5, 30);
}

#[test]
fn multiwoz21_full_test_zip_round_trips() {
    let Some(corpus) = Corpus::full("multiwoz21_full_test_zip_round_trips") else {
        return;
    };
    multiwoz21_round_trip(&corpus, 1000, 14744);
}

fn convlab3_round_trip(corpus: &Corpus, dialogues: usize) {
    for dataset in ["multiwoz21", "crosswoz", "tm1"] {
        let input = corpus.read(&format!("convlab3_unified/{dataset}/dummy_data.json"));
        let sessions = import_convlab3(&input).expect("import");
        assert_eq!(sessions.len(), dialogues, "{dataset}");
        let mut out = Vec::new();
        export_convlab3(&sessions, &mut out).expect("export");
        assert_same_json(&input.json().expect("original"), &parse(&out), dataset);
        assert!(input.bytes() == out.as_slice(), "{dataset}: same bytes");
    }
}

#[test]
fn convlab3_excerpts_round_trip_byte_for_byte() {
    convlab3_round_trip(&Corpus::fixtures(), 2);
}

#[test]
fn convlab3_full_dummy_data_round_trips_byte_for_byte() {
    let Some(corpus) = Corpus::full("convlab3_full_dummy_data_round_trips_byte_for_byte") else {
        return;
    };
    convlab3_round_trip(&corpus, 10);
}

fn crsarena_dialogues_round_trip(corpus: &Corpus, open: usize, closed: usize) {
    for (file, count) in [
        ("crs_arena_dial_open.json", open),
        ("crs_arena_dial_closed.json", closed),
    ] {
        let input = corpus.read(&format!("crsarena_dial/{file}"));
        let sessions = import_crsarena(&input).expect("import");
        assert_eq!(sessions.len(), count, "{file}");
        let mut out = Vec::new();
        export_crsarena(&sessions, &mut out).expect("export");
        assert_same_json(&input.json().expect("original"), &parse(&out), file);
    }
}

#[test]
fn crsarena_synthetic_dialogues_round_trip() {
    crsarena_dialogues_round_trip(&Corpus::fixtures(), 10, 6);
}

#[test]
fn crsarena_full_dialogues_round_trip() {
    let Some(corpus) = Corpus::full("crsarena_full_dialogues_round_trip") else {
        return;
    };
    crsarena_dialogues_round_trip(&corpus, 254, 220);
}

fn crsarena_merged_and_eval_round_trip(corpus: &Corpus, evaluated: usize) {
    let input = corpus.read("crsarena_eval/sample_crs_arena_dial_with_votes.json");
    let sessions = import_crsarena(&input).expect("import merged");
    let mut out = Vec::new();
    export_crsarena(&sessions, &mut out).expect("export merged");
    assert_same_json(
        &input.json_lenient().expect("original"),
        &parse(&out),
        "merged sample",
    );

    let input = corpus.read("crsarena_eval/crs_arena_eval.json");
    let sessions = import_crsarena_eval(&input).expect("import eval");
    assert_eq!(sessions.len(), evaluated);
    let mut out = Vec::new();
    export_crsarena_eval(&sessions, &mut out).expect("export eval");
    assert_same_json(
        &input.json().expect("original"),
        &parse(&out),
        "crs_arena_eval.json",
    );
}

#[test]
fn crsarena_synthetic_merged_sample_and_eval_round_trip() {
    crsarena_merged_and_eval_round_trip(&Corpus::fixtures(), 6);
}

#[test]
fn crsarena_full_merged_sample_and_eval_round_trip() {
    let Some(corpus) = Corpus::full("crsarena_full_merged_sample_and_eval_round_trip") else {
        return;
    };
    crsarena_merged_and_eval_round_trip(&corpus, 467);
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

fn vote_csvs_round_trip(corpus: &Corpus, open: usize, closed: usize) {
    for (file, rows) in [("votes_open.csv", open), ("votes_closed.csv", closed)] {
        let input = corpus.read(&format!("crsarena_dial/{file}"));
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
fn synthetic_vote_csvs_round_trip_row_by_row() {
    vote_csvs_round_trip(&Corpus::fixtures(), 12, 14);
}

#[test]
fn full_vote_csvs_round_trip_row_by_row() {
    let Some(corpus) = Corpus::full("full_vote_csvs_round_trip_row_by_row") else {
        return;
    };
    vote_csvs_round_trip(&corpus, 81, 104);
}

fn crwiz_files_round_trip(corpus: &Corpus, mturk: usize, lab: usize) {
    let mut paths = corpus.files("crwiz_mturk", ".shcn.data.json");
    assert_eq!(paths.len(), mturk);
    let lab_paths = corpus.files("crwiz_lab", ".shcn.data.json");
    assert_eq!(lab_paths.len(), lab);
    paths.extend(lab_paths);
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
fn crwiz_synthetic_files_round_trip_byte_for_byte() {
    crwiz_files_round_trip(&Corpus::fixtures(), 6, 2);
}

#[test]
fn crwiz_full_files_round_trip_byte_for_byte() {
    let Some(corpus) = Corpus::full("crwiz_full_files_round_trip_byte_for_byte") else {
        return;
    };
    crwiz_files_round_trip(&corpus, 147, 63);
}

fn crwiz_labels_and_operator_text(corpus: &Corpus) {
    use wozkit_core::event::{EventKind, MessageSource, Role};
    use wozkit_core::model::ActType;
    let path = corpus.files("crwiz_mturk", ".shcn.data.json").remove(0);
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
}

#[test]
fn crwiz_synthetic_labels_keep_their_act_type_and_operator_text_is_split() {
    crwiz_labels_and_operator_text(&Corpus::fixtures());
}

#[test]
fn crwiz_full_labels_keep_their_act_type_and_operator_text_is_split() {
    let Some(corpus) =
        Corpus::full("crwiz_full_labels_keep_their_act_type_and_operator_text_is_split")
    else {
        return;
    };
    crwiz_labels_and_operator_text(&corpus);
}

/// The fixtures stand in for the full corpora only if they hold the quirks the exporters must
/// reproduce; regenerating them must not lose one.
#[test]
fn the_fixtures_hold_every_format_quirk_the_round_trips_rely_on() {
    let fixtures = Corpus::fixtures();
    let entries = |folder: &str| -> Vec<serde_json::Map<String, serde_json::Value>> {
        fixtures
            .files(folder, ".shcn.data.json")
            .iter()
            .flat_map(|p| {
                let file = Input::read(p).expect("read").json().expect("json");
                file["dialogue"].as_array().cloned().unwrap_or_default()
            })
            .filter_map(|e| e.as_object().cloned())
            .collect()
    };
    let position =
        |e: &serde_json::Map<String, serde_json::Value>, key: &str| e.keys().position(|k| k == key);
    let mturk = entries("crwiz_mturk");
    let before = |e: &serde_json::Map<_, _>, a, b| matches!((position(e, a), position(e, b)), (Some(x), Some(y)) if x < y);
    assert!(
        mturk.iter().any(|e| before(e, "user", "image")),
        "user before image"
    );
    assert!(
        mturk.iter().any(|e| before(e, "image", "user")),
        "image before user"
    );
    assert!(
        mturk.iter().any(|e| e["time"].as_f64() < Some(0.0)),
        "negative time"
    );
    assert!(
        mturk.iter().any(|e| e["current_state"] == "UNK"),
        "free text"
    );
    assert!(mturk.iter().any(|e| e["prompt"] == ""), "empty prompt");
    let joined = |e: &serde_json::Map<String, serde_json::Value>| {
        e.get("user")
            .and_then(|u| u.as_str())
            .is_some_and(|u| u.contains(". "))
    };
    assert!(
        mturk.iter().any(joined),
        "operator messages joined with \". \""
    );
    let lab = entries("crwiz_lab");
    assert!(
        lab.iter().any(|e| before(e, "nlu", "gesture")),
        "gesture after nlu"
    );
    assert!(
        lab.iter().any(|e| before(e, "gesture", "user")),
        "gesture before user"
    );

    let merged = fixtures.read("crsarena_eval/sample_crs_arena_dial_with_votes.json");
    assert!(String::from_utf8_lossy(merged.bytes()).contains(": NaN"));
    let open = fixtures.read("crsarena_dial/crs_arena_dial_open.json");
    assert!(String::from_utf8_lossy(open.bytes()).contains("\\u2013"));
    let votes = String::from_utf8_lossy(fixtures.read("crsarena_dial/votes_open.csv").bytes())
        .into_owned()
        + &String::from_utf8_lossy(fixtures.read("crsarena_dial/votes_closed.csv").bytes());
    assert!(
        votes.contains("\r\n") && votes.contains("\"\""),
        "CRLF rows, quoted quotes"
    );
    assert!(
        votes.replace("\r\n", "").contains('\n'),
        "a line break inside a field"
    );
}
