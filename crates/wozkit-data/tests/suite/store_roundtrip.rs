//! Round trips through the store: dataset files imported into a temporary SQLite data directory
//! with [`import_files`], exported with [`export_store`] and compared with the originals — the
//! path `wozkit import` / `wozkit export` take. Each check runs on `tests/fixtures/` always and
//! on the full corpora in `shared/corpora/` when they are there.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{Corpus, assert_same_json};
use wozkit_data::stored::{
    ExportFormat, ExportOptions, NoProgress, SplitSpec, StoreImportError, export_store,
    import_files,
};
use wozkit_data::{Format, Input};
use wozkit_store::Store;

async fn store(dir: &Path) -> Arc<dyn Store> {
    wozkit_store::open(&dir.display().to_string())
        .await
        .expect("open store")
}

async fn export(store: &dyn Store, format: ExportFormat, out: PathBuf) -> PathBuf {
    let options = ExportOptions {
        format,
        out: out.clone(),
        split: None,
        study: None,
        include_test: false,
    };
    export_store(store, &options, &NoProgress)
        .await
        .expect("export");
    out
}

fn read_json(path: &Path) -> serde_json::Value {
    Input::read(path).expect("read").json().expect("json")
}

async fn dataset_files_round_trip_through_the_store(corpus: &Corpus) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cases = [
        (Format::Taskmaster1, "taskmaster1/sample.json", "tm.json"),
        (Format::CrossWoz, "crosswoz/test.json.zip", "test.json.zip"),
        (
            Format::MultiWoz21,
            "multiwoz/test.json.zip",
            "mwoz.json.zip",
        ),
    ];
    for (i, (format, file, out)) in cases.into_iter().enumerate() {
        let data = tmp.path().join(format!("data{i}"));
        let store = store(&data).await;
        let summary = import_files(&*store, format, &[corpus.path(file)], &NoProgress)
            .await
            .expect("import");
        assert!(summary.sessions > 0 && summary.events > summary.sessions);
        let path = export(&*store, ExportFormat::Dataset(format), tmp.path().join(out)).await;
        let original = Input::read(corpus.path(file)).expect("read");
        let exported = Input::read(&path).expect("read export");
        match format {
            // sample.json is one conversation; the dataset layout is an array of them.
            Format::Taskmaster1 => assert_same_json(
                &serde_json::Value::Array(vec![original.json().expect("json")]),
                &exported.json().expect("json"),
                file,
            ),
            _ => assert_same_json(
                &original.json().expect("json"),
                &exported.json().expect("json"),
                file,
            ),
        }
        if format == Format::CrossWoz {
            let same = original.unzipped().expect("unzip") == exported.unzipped().expect("unzip");
            assert!(same, "crosswoz: the same bytes as the released test.json");
        }
        // Nothing was lost, so no sidecar.
        assert!(!wozkit_data::sidecar_path(&path).exists(), "{file}");
        store.close().await;
    }

    let data = tmp.path().join("convlab3");
    let store = store(&data).await;
    for dataset in ["multiwoz21", "crosswoz", "tm1"] {
        let file = corpus.path(&format!("convlab3_unified/{dataset}/dummy_data.json"));
        import_files(
            &*store,
            Format::ConvLab3,
            std::slice::from_ref(&file),
            &NoProgress,
        )
        .await
        .expect("import");
        let study = Some("import:convlab3".to_string());
        let out = tmp.path().join(format!("{dataset}.json"));
        let options = ExportOptions {
            format: ExportFormat::Dataset(Format::ConvLab3),
            out: out.clone(),
            split: None,
            study,
            include_test: false,
        };
        export_store(&*store, &options, &NoProgress)
            .await
            .expect("export");
        let exported = read_json(&out);
        let all = exported.as_array().expect("array");
        // The store now holds this file after the ones imported before, in import order.
        let original = std::fs::read(&file).expect("read");
        let original: serde_json::Value = serde_json::from_slice(&original).expect("json");
        let count = original.as_array().map_or(0, Vec::len);
        let tail = &all[all.len() - count..];
        assert_same_json(&original, &serde_json::Value::Array(tail.to_vec()), dataset);
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dataset_excerpts_round_trip_through_the_store() {
    dataset_files_round_trip_through_the_store(&Corpus::fixtures()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_datasets_round_trip_through_the_store() {
    let Some(corpus) = Corpus::full("full_datasets_round_trip_through_the_store") else {
        return;
    };
    dataset_files_round_trip_through_the_store(&corpus).await;
}

/// The ConvLab-3 excerpt is cut the same way as the full file, so one run on it suffices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convlab3_export_of_one_import_is_byte_identical() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = store(&tmp.path().join("data")).await;
    let file = Corpus::fixtures().path("convlab3_unified/tm1/dummy_data.json");
    import_files(
        &*store,
        Format::ConvLab3,
        std::slice::from_ref(&file),
        &NoProgress,
    )
    .await
    .expect("import");
    let out = export(
        &*store,
        ExportFormat::Dataset(Format::ConvLab3),
        tmp.path().join("tm1.json"),
    )
    .await;
    assert!(std::fs::read(&file).expect("read") == std::fs::read(out).expect("read"));
    store.close().await;
}

async fn crsarena_dialogues_and_votes_round_trip(corpus: &Corpus) {
    let tmp = tempfile::tempdir().expect("tempdir");
    for setting in ["open", "closed"] {
        let store = store(&tmp.path().join(setting)).await;
        let dialogues = corpus.path(&format!("crsarena_dial/crs_arena_dial_{setting}.json"));
        let votes = corpus.path(&format!("crsarena_dial/votes_{setting}.csv"));
        let paths = [dialogues.clone(), votes.clone()];
        import_files(&*store, Format::CrsArena, &paths, &NoProgress)
            .await
            .expect("import");
        let out = export(
            &*store,
            ExportFormat::Dataset(Format::CrsArena),
            tmp.path().join(format!("{setting}.json")),
        )
        .await;
        assert_same_json(&read_json(&dialogues), &read_json(&out), setting);
        let csv = export(
            &*store,
            ExportFormat::VotesCsv,
            tmp.path().join(format!("{setting}.csv")),
        )
        .await;
        let same = std::fs::read(&votes).expect("read") == std::fs::read(&csv).expect("read");
        assert!(same, "{setting}: the votes CSV comes back byte for byte");
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crsarena_synthetic_dialogues_and_votes_round_trip_through_the_store() {
    crsarena_dialogues_and_votes_round_trip(&Corpus::fixtures()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crsarena_full_dialogues_and_votes_round_trip_through_the_store() {
    let test = "crsarena_full_dialogues_and_votes_round_trip_through_the_store";
    let Some(corpus) = Corpus::full(test) else {
        return;
    };
    crsarena_dialogues_and_votes_round_trip(&corpus).await;
}

async fn crwiz_files_round_trip(corpus: &Corpus, folder: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = store(&tmp.path().join("data")).await;
    let paths = corpus.files(folder, ".shcn.data.json");
    import_files(&*store, Format::Crwiz, &paths, &NoProgress)
        .await
        .expect("import");
    let dir = export(
        &*store,
        ExportFormat::Dataset(Format::Crwiz),
        tmp.path().join("crwiz"),
    )
    .await;
    for path in &paths {
        let name = path.file_name().expect("name");
        let exported = std::fs::read(dir.join(name)).expect("exported file");
        assert!(std::fs::read(path).expect("read") == exported, "{name:?}");
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crwiz_synthetic_files_round_trip_through_the_store() {
    for folder in ["crwiz_mturk", "crwiz_lab"] {
        crwiz_files_round_trip(&Corpus::fixtures(), folder).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crwiz_full_lab_files_round_trip_through_the_store() {
    let Some(corpus) = Corpus::full("crwiz_full_lab_files_round_trip_through_the_store") else {
        return;
    };
    crwiz_files_round_trip(&corpus, "crwiz_lab").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reimporting_is_a_no_op_and_a_bad_file_writes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = store(&tmp.path().join("data")).await;
    let file = Corpus::fixtures().path("convlab3_unified/multiwoz21/dummy_data.json");
    let n = read_json(&file).as_array().map_or(0, Vec::len);
    let first = import_files(
        &*store,
        Format::ConvLab3,
        std::slice::from_ref(&file),
        &NoProgress,
    )
    .await
    .expect("import");
    assert_eq!((first.sessions, first.unchanged), (n, 0));
    let again = import_files(
        &*store,
        Format::ConvLab3,
        std::slice::from_ref(&file),
        &NoProgress,
    )
    .await
    .expect("re-import");
    assert_eq!((again.sessions, again.unchanged), (0, n));

    // The same ids with other content: a conflict, reported before anything is written.
    let mut changed = read_json(&file);
    changed[0]["turns"][0]["utterance"] = "changed".into();
    let changed_path = tmp.path().join("changed.json");
    std::fs::write(&changed_path, changed.to_string()).expect("write");
    let err = import_files(&*store, Format::ConvLab3, &[changed_path], &NoProgress)
        .await
        .expect_err("conflict");
    assert!(
        matches!(err, StoreImportError::Conflict { count: 1, .. }),
        "{err}"
    );

    // A good file followed by a broken one: nothing of either is written.
    let broken = tmp.path().join("broken.json");
    std::fs::write(&broken, "[{\"dialogue_id\": 1}]").expect("write");
    let good = Corpus::fixtures().path("convlab3_unified/tm1/dummy_data.json");
    let err = import_files(&*store, Format::ConvLab3, &[good, broken], &NoProgress)
        .await
        .expect_err("parse error");
    assert!(matches!(err, StoreImportError::Parse(_)), "{err}");
    let count = store
        .count_sessions(&wozkit_store::SessionFilter::default())
        .await
        .expect("count");
    assert_eq!(count, n as u64);
    store.close().await;
}

/// `sizes`: what `train=0.8,dev=0.1,test=0.1` gives for the open dialogues of `corpus`.
async fn splits_are_deterministic_and_cover_every_session(corpus: &Corpus, sizes: [usize; 3]) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = store(&tmp.path().join("data")).await;
    import_files(
        &*store,
        Format::CrsArena,
        &[corpus.path("crsarena_dial/crs_arena_dial_open.json")],
        &NoProgress,
    )
    .await
    .expect("import");
    let mut runs = Vec::new();
    for run in 0..2 {
        let options = ExportOptions {
            format: ExportFormat::Jsonl,
            out: tmp.path().join(format!("run{run}/all.jsonl")),
            split: Some(SplitSpec::parse("train=0.8,dev=0.1,test=0.1", 42).expect("split")),
            study: None,
            include_test: false,
        };
        let summary = export_store(&*store, &options, &NoProgress)
            .await
            .expect("export");
        assert_eq!(summary.files.len(), 3);
        let got: Vec<usize> = ["train", "dev", "test"]
            .iter()
            .map(|part| {
                let path = tmp.path().join(format!("run{run}/all.{part}.jsonl"));
                let text = std::fs::read_to_string(path).expect("part file");
                let mut ids: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.split("\"session\":\"").nth(1)?.split('"').next())
                    .collect();
                ids.dedup();
                ids.len()
            })
            .collect();
        assert_eq!(got, sizes);
        let train = std::fs::read(tmp.path().join(format!("run{run}/all.train.jsonl")));
        runs.push(train.expect("train"));
    }
    assert!(runs[0] == runs[1], "same seed, same split");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_splits_are_deterministic_and_cover_every_session() {
    // 10 dialogues: 8, 1 and 1.
    splits_are_deterministic_and_cover_every_session(&Corpus::fixtures(), [8, 1, 1]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_splits_are_deterministic_and_cover_every_session() {
    let Some(corpus) = Corpus::full("full_splits_are_deterministic_and_cover_every_session") else {
        return;
    };
    // 254 dialogues: 203.2, 25.4 and 25.4, the spare one to the earlier of the tied remainders.
    splits_are_deterministic_and_cover_every_session(&corpus, [203, 26, 25]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_import_stays_hidden_and_is_finished_by_running_it_again() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = store(&tmp.path().join("data")).await;
    // What a crash after the first `create_session` leaves: a live, empty session of the import.
    let new = wozkit_store::NewSession {
        id: "convlab3:multiwoz21-train-0".into(),
        study_id: "import:convlab3".into(),
        study_version: String::new(),
        seed: 0,
        created_at_ms: 0,
    };
    store.create_session(new).await.expect("create");
    let out = tmp.path().join("before.jsonl");
    let before = export(&*store, ExportFormat::Jsonl, out.clone()).await;
    assert_eq!(std::fs::read(before).expect("read").len(), 0, "hidden");

    let file = Corpus::fixtures().path("convlab3_unified/multiwoz21/dummy_data.json");
    let n = read_json(&file).as_array().map_or(0, Vec::len);
    let summary = import_files(
        &*store,
        Format::ConvLab3,
        std::slice::from_ref(&file),
        &NoProgress,
    )
    .await
    .expect("import");
    assert_eq!((summary.sessions, summary.resumed), (n, 1));
    let out = export(
        &*store,
        ExportFormat::Dataset(Format::ConvLab3),
        tmp.path().join("after.json"),
    )
    .await;
    assert!(std::fs::read(&file).expect("read") == std::fs::read(out).expect("read"));
    store.close().await;
}
