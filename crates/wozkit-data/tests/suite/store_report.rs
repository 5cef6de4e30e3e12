//! The report over imported dataset files, checked against numbers recomputed here straight from
//! the raw files (CRWIZ JSON, CRSArena dialogues and vote CSVs, CRSArena-Eval ratings). Each check
//! runs on the synthetic files in `tests/fixtures/` always, and on the full corpora in
//! `shared/corpora/` (all 147 CRWIZ MTurk dialogues, both CRSArena settings) when they are there.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use common::Corpus;
use serde_json::Value;
use wozkit_data::report::html::render_html;
use wozkit_data::report::{Filter, Report, ReportOptions, build_report};
use wozkit_data::stats::correlation::pearson;
use wozkit_data::stats::rating::{Outcome, bradley_terry};
use wozkit_data::stored::{NoProgress, import_files};
use wozkit_data::{Format, crwiz_act_type};
use wozkit_store::Store;

async fn imported(dir: &Path, format: Format, paths: &[std::path::PathBuf]) -> Arc<dyn Store> {
    let store = wozkit_store::open(&dir.display().to_string())
        .await
        .expect("open store");
    import_files(&*store, format, paths, &NoProgress)
        .await
        .expect("import");
    store
}

fn close(a: Option<f64>, b: f64, what: &str) {
    let a = a.unwrap_or_else(|| panic!("{what}: undefined"));
    assert!(
        (a - b).abs() < 1e-9 * b.abs().max(1.0),
        "{what}: {a} != {b}"
    );
}

fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Per-session numbers of one raw CRWIZ file.
struct RawCrwiz {
    turns: f64,
    user_turns: f64,
    wizard_turns: f64,
    words_per_user_turn: Option<f64>,
    typed_percent: f64,
    type_counts: [f64; 4],
    success: bool,
}

fn raw_crwiz(path: &Path, labels: &mut HashMap<String, usize>) -> RawCrwiz {
    let file: Value = serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json");
    let entries = file["dialogue"].as_array().expect("entries");
    let (mut users, mut words, mut typed, mut types) = (0.0, 0.0, 0.0, [0.0; 4]);
    let mut success = false;
    for entry in entries {
        let label = entry["current_state"].as_str().expect("label");
        let names = ["request", "interaction", "action", "update"];
        match crwiz_act_type(label) {
            Some(t) => {
                let name = format!("{t:?}").to_lowercase();
                let i = names.iter().position(|n| *n == name).expect("known type");
                types[i] += 1.0;
                *labels.entry(label.to_string()).or_default() += 1;
            }
            None => typed += 1.0,
        }
        if let Some(user) = entry["user"].as_str() {
            for segment in user.split(". ") {
                users += 1.0;
                words += segment.split_whitespace().count() as f64;
            }
        }
        success |= entry["subtask"] == "assess_damage";
    }
    let wizard = entries.len() as f64;
    RawCrwiz {
        turns: wizard + users,
        user_turns: users,
        wizard_turns: wizard,
        words_per_user_turn: (users > 0.0).then(|| words / users),
        typed_percent: typed / wizard * 100.0,
        type_counts: types,
        success,
    }
}

async fn crwiz_report_matches_the_raw_files(corpus: &Corpus) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let paths = corpus.files("crwiz_mturk", ".shcn.data.json");
    let store = imported(&tmp.path().join("data"), Format::Crwiz, &paths).await;
    let report = build_report(&*store, &ReportOptions::default())
        .await
        .expect("report");

    let mut labels = HashMap::new();
    let raw: Vec<RawCrwiz> = paths.iter().map(|p| raw_crwiz(p, &mut labels)).collect();
    assert_eq!(report.sessions, paths.len());
    let check = |values: Vec<f64>, stat: &wozkit_data::report::summary::MeanSd, what: &str| {
        let (mean, sd) = mean_sd(&values);
        close(stat.mean, mean, what);
        close(stat.sd, sd, what);
        assert_eq!(stat.n, values.len(), "{what}");
    };
    let i = &report.interaction;
    check(raw.iter().map(|r| r.turns).collect(), &i.turns, "turns");
    check(
        raw.iter().map(|r| r.user_turns).collect(),
        &i.user_turns,
        "user turns",
    );
    check(
        raw.iter().map(|r| r.wizard_turns).collect(),
        &i.wizard_turns,
        "wizard turns",
    );
    let words: Vec<f64> = raw.iter().filter_map(|r| r.words_per_user_turn).collect();
    check(words, &i.user_words_per_turn, "words per user turn");
    let typed: Vec<f64> = raw.iter().map(|r| r.typed_percent).collect();
    check(typed, &i.wizard_typed_percent, "typed %");

    let totals: Vec<f64> = (0..4)
        .map(|t| raw.iter().map(|r| r.type_counts[t]).sum())
        .collect();
    let labelled: f64 = totals.iter().sum();
    assert_eq!(report.labelled_wizard_turns as f64, labelled);
    for (t, name) in ["request", "interaction", "action", "update"]
        .iter()
        .enumerate()
    {
        close(report.da_types[*name], totals[t] / labelled * 100.0, name);
    }
    let mut top: Vec<(&String, &usize)> = labels.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let expected: Vec<(String, usize)> = top
        .iter()
        .take(10)
        .map(|(l, n)| ((*l).clone(), **n))
        .collect();
    let got: Vec<(String, usize)> = report.top_acts["wizard"]
        .iter()
        .map(|a| (a.label.clone(), a.count))
        .collect();
    assert_eq!(got, expected);

    let success: Vec<f64> = raw.iter().map(|r| f64::from(u8::from(r.success))).collect();
    assert_eq!(report.outcome_known, paths.len());
    assert_eq!(
        report.outcome_reached,
        success.iter().filter(|s| **s == 1.0).count()
    );
    for (t, name) in ["request", "interaction", "action", "update"]
        .iter()
        .enumerate()
    {
        let counts: Vec<f64> = raw.iter().map(|r| r.type_counts[t]).collect();
        let expected = pearson(&success, &counts).expect("defined");
        let got = report.correlations[*name].pearson.expect("pearson");
        close(Some(got.r), expected.r, name);
        close(Some(got.p), expected.p, name);
    }
    assert!(report.questionnaire.is_empty() && report.votes == 0);

    let html = render_html(&report);
    let (top_label, _) = expected.first().expect("a labelled wizard turn");
    assert!(html.contains("<svg") && html.contains(top_label.as_str()));
    assert!(!html.contains("<script"));
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crwiz_report_matches_the_raw_synthetic_files() {
    crwiz_report_matches_the_raw_files(&Corpus::fixtures()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crwiz_report_matches_the_raw_full_mturk_files() {
    let Some(corpus) = Corpus::full("crwiz_report_matches_the_raw_full_mturk_files") else {
        return;
    };
    crwiz_report_matches_the_raw_files(&corpus).await;
}

fn raw_votes(corpus: &Corpus) -> Vec<csv::StringRecord> {
    let mut rows = Vec::new();
    for setting in ["open", "closed"] {
        let path = corpus.path(&format!("crsarena_dial/votes_{setting}.csv"));
        let mut reader = csv::Reader::from_path(path).expect("csv");
        rows.extend(reader.records().map(|r| r.expect("row")));
    }
    // Cast order: the `session_id` column holds the time of the vote.
    rows.sort_by(|a, b| a[0].cmp(&b[0]));
    rows
}

async fn crsarena_report_matches_the_raw_votes_and_dialogues(corpus: &Corpus) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut paths = Vec::new();
    for setting in ["open", "closed"] {
        paths.push(corpus.path(&format!("crsarena_dial/crs_arena_dial_{setting}.json")));
        paths.push(corpus.path(&format!("crsarena_dial/votes_{setting}.csv")));
    }
    let store = imported(&tmp.path().join("data"), Format::CrsArena, &paths).await;
    let report: Report = build_report(&*store, &ReportOptions::default())
        .await
        .expect("report");

    let rows = raw_votes(corpus);
    assert_eq!(report.votes, rows.len());
    // Elo, written out independently: K = 16, start 1000, tie = 0.5.
    let mut elo: HashMap<String, f64> = HashMap::new();
    let mut pairs: BTreeMap<(String, String), [u64; 3]> = BTreeMap::new();
    let mut outcomes = Vec::new();
    for row in &rows {
        let (a, b, vote) = (&row[2], &row[3], &row[4]);
        let score = if vote == a {
            1.0
        } else if vote == b {
            0.0
        } else {
            0.5
        };
        let ra = *elo.entry(a.to_string()).or_insert(1000.0);
        let rb = *elo.entry(b.to_string()).or_insert(1000.0);
        let expected = 1.0 / (1.0 + 10f64.powf((rb - ra) / 400.0));
        elo.insert(a.to_string(), ra + 16.0 * (score - expected));
        elo.insert(b.to_string(), rb - 16.0 * (score - expected));
        let (key, s) = if a < b {
            ((a.to_string(), b.to_string()), score)
        } else {
            ((b.to_string(), a.to_string()), 1.0 - score)
        };
        let counts = pairs.entry(key).or_default();
        counts[if s == 1.0 {
            0
        } else if s == 0.0 {
            1
        } else {
            2
        }] += 1;
        outcomes.push(Outcome {
            first: a.to_string(),
            second: b.to_string(),
            score,
        });
    }
    // One leaderboard, every vote from the one imported source.
    let board = report.leaderboard.as_ref().expect("leaderboard");
    let sources: Vec<(&str, usize)> = board
        .sources
        .iter()
        .map(|s| (s.source.as_str(), s.votes))
        .collect();
    assert_eq!(sources, [("import:votes-csv", rows.len())]);
    let board = &board.board;
    assert_eq!(board.votes, rows.len());
    let system = |name: &str| {
        board
            .systems
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no row for {name}"))
    };
    assert_eq!(board.systems.len(), elo.len());
    for (name, rating) in &elo {
        close(Some(system(name).elo), *rating, name);
    }
    let got: Vec<((String, String), [u64; 3])> = board
        .grid
        .iter()
        .map(|w| ((w.a.clone(), w.b.clone()), [w.a_wins, w.b_wins, w.ties]))
        .collect();
    assert_eq!(got, pairs.into_iter().collect::<Vec<_>>());
    let fit = bradley_terry(&outcomes).expect("fit");
    for (name, strength) in &fit.strength {
        let s = system(name);
        let value = s.bt_strength.expect("strength");
        close(Some(value), *strength, name);
        let (lo, hi) = (s.ci_low.expect("low"), s.ci_high.expect("high"));
        assert!(
            lo <= hi && lo <= value + 1e-9 && value <= hi + 1e-9,
            "{name}"
        );
    }

    // Satisfaction per agent, from the dialogues' metadata.
    let mut satisfied: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut dialogue_count = 0;
    for setting in ["open", "closed"] {
        let path = corpus.path(&format!("crsarena_dial/crs_arena_dial_{setting}.json"));
        let dialogues: Value =
            serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json");
        let dialogues = dialogues.as_array().expect("list");
        dialogue_count += dialogues.len();
        for d in dialogues {
            let agent = d["agent"]["id"].as_str().expect("agent").to_string();
            let entry = satisfied.entry(agent).or_default();
            entry.0 += 1;
            entry.1 += u64::from(d["metadata"]["sentiment"] == "satisfied");
        }
    }
    let got: BTreeMap<String, (u64, u64)> = report
        .satisfaction
        .iter()
        .map(|(s, v)| (s.clone(), (v.dialogues, v.satisfied)))
        .collect();
    assert_eq!(got, satisfied);
    assert_eq!(report.sessions, dialogue_count);
    assert!(report.agreement["votes"].units > 0);

    // Filtering to the vote sessions keeps the votes and drops the dialogues.
    let options = ReportOptions {
        filters: vec![Filter::parse("format=votes-csv").expect("filter")],
        ..ReportOptions::default()
    };
    let votes_only = build_report(&*store, &options).await.expect("report");
    assert_eq!((votes_only.sessions, votes_only.votes), (0, rows.len()));
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crsarena_report_matches_the_raw_synthetic_votes_and_dialogues() {
    crsarena_report_matches_the_raw_votes_and_dialogues(&Corpus::fixtures()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crsarena_report_matches_the_raw_full_votes_and_dialogues() {
    let test = "crsarena_report_matches_the_raw_full_votes_and_dialogues";
    let Some(corpus) = Corpus::full(test) else {
        return;
    };
    crsarena_report_matches_the_raw_votes_and_dialogues(&corpus).await;
}

async fn crsarena_eval_ratings_fill_the_questionnaire(corpus: &Corpus) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = corpus.path("crsarena_eval/crs_arena_eval.json");
    let store = imported(
        &tmp.path().join("data"),
        Format::CrsArena,
        std::slice::from_ref(&path),
    )
    .await;
    let report = build_report(&*store, &ReportOptions::default())
        .await
        .expect("report");
    let raw: Value = serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json");
    let overall: Vec<f64> = raw
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|d| d["dial_level_aggregated"]["dialogue_overall"].as_f64())
        .collect();
    let q = report
        .questionnaire
        .iter()
        .find(|q| q.item == "dialogue_overall")
        .expect("item");
    let (mean, sd) = mean_sd(&overall);
    close(q.overall.mean, mean, "dialogue_overall mean");
    close(q.overall.sd, sd, "dialogue_overall sd");
    assert_eq!(q.overall.n, overall.len());
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crsarena_eval_synthetic_ratings_fill_the_questionnaire() {
    crsarena_eval_ratings_fill_the_questionnaire(&Corpus::fixtures()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crsarena_eval_full_ratings_fill_the_questionnaire() {
    let Some(corpus) = Corpus::full("crsarena_eval_full_ratings_fill_the_questionnaire") else {
        return;
    };
    crsarena_eval_ratings_fill_the_questionnaire(&corpus).await;
}
