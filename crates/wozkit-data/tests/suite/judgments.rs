//! Evaluation studies in a store: participant logs holding ratings, comparisons, gold, surplus
//! and onboarding answers. Checks the judgments export (JSON Lines and CSV) field by field, the
//! report's evaluation section against reference values from SciPy and `krippendorff` (the
//! `judgments` case of `tests/reference/golden.json`, written by `make_golden.py` from the same
//! judgment table this test stores), and that dialogue exports and reports leave the logs out.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::event::{
    Actor, EndReason, EventKind, ItemPool, Judgment, MessageSource, Role, ScreenReason, TurnLabel,
};
use wozkit_data::report::html::render_html;
use wozkit_data::report::{ReportOptions, build_report};
use wozkit_data::stored::{ExportFormat, ExportOptions, NoProgress, export_store};
use wozkit_store::{NewEvent, NewParticipant, NewSession, Platform, Store, TEST_KEY};

fn golden() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference/golden.json");
    let text = std::fs::read_to_string(path).expect("golden.json");
    let golden: Value = serde_json::from_str(&text).expect("golden.json is JSON");
    golden["judgments"].clone()
}

#[track_caller]
fn close(actual: Option<f64>, expected: &Value, what: &str) {
    let expected = expected
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: no golden"));
    let actual = actual.unwrap_or_else(|| panic!("{what}: undefined"));
    assert!(
        (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0),
        "{what}: {actual} != {expected}"
    );
}

/// One participant and their log; appends go through [`Log::push`].
struct Log {
    id: String,
    participant: String,
    /// Time of the next event.
    clock: u64,
    events: Vec<NewEvent>,
}

impl Log {
    fn actor(&self) -> Actor {
        Actor::Participant {
            role: Role::User,
            participant: Some(self.participant.clone()),
        }
    }

    fn push(&mut self, kind: EventKind, after_ms: u64) {
        self.clock += after_ms;
        let actor = self.actor();
        self.events.push(NewEvent {
            actor,
            kind,
            at_ms: self.clock,
        });
    }

    /// Claims and judges an item `seconds` after the claim.
    fn judge(&mut self, mut judgment: Judgment, seconds: u64) {
        self.clock += 1_000;
        judgment.claimed_at_ms = self.clock;
        judgment.lease = format!("lease-{}-{}", self.participant, judgment.item);
        let claim = EventKind::ItemClaimed {
            page: judgment.page.clone(),
            item: judgment.item.clone(),
            lease: judgment.lease.clone(),
            dialogues: judgment.dialogues.clone(),
            systems: judgment.systems.clone(),
            pool: judgment.pool,
            claimed_at_ms: self.clock,
            expires_at_ms: self.clock + 600_000,
        };
        self.push(claim, 0);
        self.push(EventKind::Judged(Box::new(judgment)), seconds * 1_000);
    }
}

fn judgment(item: &str, dialogues: &[&str], golden: &Value) -> Judgment {
    let systems = dialogues
        .iter()
        .map(|d| {
            golden["dialogue_system"][*d]
                .as_str()
                .expect("system")
                .to_string()
        })
        .collect();
    Judgment {
        page: if dialogues.len() == 2 {
            "compare"
        } else {
            "rate"
        }
        .into(),
        item: item.into(),
        lease: String::new(),
        pool: ItemPool::Item,
        dialogues: dialogues.iter().map(|d| d.to_string()).collect(),
        systems,
        choice: None,
        justification: None,
        answers: IndexMap::new(),
        turns: Vec::new(),
        counted: true,
        surplus: false,
        gold_correct: None,
        claimed_at_ms: 0,
        void: false,
    }
}

fn answers(pairs: &[(&str, Value)]) -> IndexMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// Seconds each judgment takes: varied so medians mean something.
fn seconds(i: usize) -> u64 {
    5 + (i as u64 * 7) % 23
}

fn log<'a>(logs: &'a mut BTreeMap<String, Log>, w: &str) -> &'a mut Log {
    logs.entry(w.to_string()).or_insert_with(|| Log {
        id: format!("plog-{w}"),
        participant: w.to_string(),
        clock: 1_000_000,
        events: vec![NewEvent {
            actor: Actor::Participant {
                role: Role::User,
                participant: Some(w.to_string()),
            },
            kind: EventKind::ParticipantLogStarted {
                participant: w.to_string(),
                study: "eval".into(),
                study_version: "1".into(),
            },
            at_ms: 1_000_000,
        }],
    })
}

/// Every worker's log, with the judgments of the golden table plus gold, surplus, onboarding,
/// screening and a returned item; `wt` is a test participant whose ratings would change every
/// number.
fn logs(golden: &Value) -> BTreeMap<String, Log> {
    let mut logs: BTreeMap<String, Log> = BTreeMap::new();
    log(&mut logs, "w1").push(
        EventKind::OnboardingDone {
            passed: true,
            correct: 2,
            total: 2,
            answers: answers(&[("q1", json!("a")), ("q2", json!(2))]),
        },
        500,
    );
    let mut i = 0;
    for r in golden["ratings"].as_array().expect("ratings") {
        let [w, item, dialogue, _, fluency, engaging] = r.as_array().expect("row").as_slice()
        else {
            panic!("rating row {r}");
        };
        let mut j = judgment(
            item.as_str().expect("item"),
            &[dialogue.as_str().expect("dialogue")],
            golden,
        );
        j.answers = answers(&[
            ("fluency", fluency.clone()),
            ("engaging", engaging.clone()),
            ("comment", json!("fine")),
        ]);
        log(&mut logs, w.as_str().expect("worker")).judge(j, seconds(i));
        i += 1;
    }
    for c in golden["comparisons"].as_array().expect("comparisons") {
        let [w, item, left, right, chosen] = c.as_array().expect("row").as_slice() else {
            panic!("comparison row {c}");
        };
        let (left, right) = (left.as_str().expect("left"), right.as_str().expect("right"));
        let item = item.as_str().expect("item");
        let mut j = judgment(item, &[left, right], golden);
        j.choice = chosen.as_str().map(str::to_string);
        j.justification = Some(format!("{item} reads better"));
        j.turns = vec![TurnLabel {
            dialogue: left.into(),
            turn: 1,
            labels: vec!["repetitive".into()],
            score: Some(2),
        }];
        log(&mut logs, w.as_str().expect("worker")).judge(j, seconds(i));
        i += 1;
    }
    // Gold items and a surplus judgment: none of them may move the ratings or the grid.
    for (w, correct) in [("w1", true), ("w2", false), ("w2", true)] {
        let mut j = judgment(&format!("gold-{w}-{correct}"), &["d1"], golden);
        j.pool = ItemPool::Gold;
        j.counted = false;
        j.gold_correct = Some(correct);
        j.answers = answers(&[("fluency", json!(1)), ("engaging", json!(1))]);
        log(&mut logs, w).judge(j, 3);
    }
    let mut surplus = judgment("r3", &["d3"], golden);
    surplus.counted = false;
    surplus.surplus = true;
    surplus.answers = answers(&[("fluency", json!(1)), ("engaging", json!(1))]);
    log(&mut logs, "w2").judge(surplus, 40);
    log(&mut logs, "w2").push(
        EventKind::ItemReturned {
            item: "r9".into(),
            lease: "lease-w2-r9".into(),
            given: vec![],
        },
        100,
    );
    log(&mut logs, "w5").push(
        EventKind::OnboardingDone {
            passed: false,
            correct: 0,
            total: 2,
            answers: answers(&[("q1", json!("b")), ("q2", json!(5))]),
        },
        500,
    );
    log(&mut logs, "w5").push(
        EventKind::ScreenedOut {
            reason: ScreenReason::Onboarding,
        },
        10,
    );
    let mut tried = judgment("r1", &["d1"], golden);
    tried.answers = answers(&[("fluency", json!(1)), ("engaging", json!(5))]);
    log(&mut logs, "wt").judge(tried, 1);
    logs
}

/// A store with one played dialogue and every worker's log.
async fn store(golden: &Value) -> (tempfile::TempDir, Arc<dyn Store>, BTreeMap<String, Log>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(&dir.path().display().to_string())
        .await
        .expect("open store");
    dialogue(&*store).await;
    let logs = logs(golden);
    for (w, log) in &logs {
        let mut external_ids = BTreeMap::new();
        if w == "wt" {
            external_ids.insert(TEST_KEY.to_string(), "1".to_string());
        }
        store
            .create_participant(NewParticipant {
                id: w.clone(),
                token_hash: format!("hash-{w}"),
                study_id: "eval".into(),
                platform: Platform::Prolific,
                worker_id: Some(format!("PROLIFIC-{w}")),
                external_ids,
                flow_step: "0".into(),
                created_at_ms: 1_000,
            })
            .await
            .expect("create participant");
        store
            .open_participant_log(NewSession {
                id: log.id.clone(),
                study_id: "eval".into(),
                study_version: "1".into(),
                seed: 0,
                created_at_ms: 1_000,
            })
            .await
            .expect("open log");
        store
            .append(&log.id, log.events.clone())
            .await
            .expect("append to log");
    }
    (dir, store, logs)
}

async fn dialogue(store: &dyn Store) {
    store
        .create_session(NewSession {
            id: "dlg-1".into(),
            study_id: "eval".into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: 1_000,
        })
        .await
        .expect("create session");
    let kinds = [
        EventKind::SessionStarted {
            study: "eval".into(),
            study_version: "1".into(),
            seed: 0,
            initial_state: "start".into(),
        },
        EventKind::Message {
            role: Role::User,
            text: "hello".into(),
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
    store.append("dlg-1", events).await.expect("append");
}

async fn export(store: &dyn Store, format: &str, include_test: bool) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let options = ExportOptions {
        format: ExportFormat::parse(format).expect("format"),
        out: out.clone(),
        split: None,
        study: Some("eval".into()),
        include_test,
    };
    export_store(store, &options, &NoProgress)
        .await
        .expect("export");
    std::fs::read_to_string(&out).expect("read export")
}

fn jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

#[tokio::test]
async fn judgments_jsonl_has_one_line_per_judgment_and_onboarding_answer() {
    let golden = golden();
    let (_dir, store, _) = store(&golden).await;
    let rows = jsonl(&export(&*store, "judgments-jsonl", false).await);
    let ratings = golden["ratings"].as_array().expect("ratings").len();
    let comparisons = golden["comparisons"].as_array().expect("comparisons").len();
    // + 3 gold, 1 surplus, 2 + 2 onboarding answers; the test participant left out.
    assert_eq!(rows.len(), ratings + comparisons + 3 + 1 + 4);
    assert!(rows.iter().all(|r| r["participant"] != "wt"));

    let row = |item: &str, worker: &str| -> &Value {
        rows.iter()
            .find(|r| r["item"] == item && r["participant"] == worker)
            .unwrap_or_else(|| panic!("no row for {item} by {worker}"))
    };
    // w2 saw c1 with the human dialogue on the left and chose it.
    let c = row("c1", "w2");
    assert_eq!(c["study"], "eval");
    assert_eq!(c["log"], "plog-w2");
    assert_eq!(c["worker_id"], "PROLIFIC-w2");
    assert_eq!(c["page"], "compare");
    assert_eq!(c["pool"], "item");
    assert_eq!(
        (&c["gold"], &c["onboarding"], &c["surplus"], &c["counted"]),
        (&json!(false), &json!(false), &json!(false), &json!(true))
    );
    assert_eq!(
        (&c["left"], &c["left_system"]),
        (&json!("d5"), &json!("human"))
    );
    assert_eq!(
        (&c["right"], &c["right_system"]),
        (&json!("d1"), &json!("bot_a"))
    );
    assert_eq!(
        (&c["choice"], &c["choice_system"]),
        (&json!("d5"), &json!("human"))
    );
    assert_eq!(c["dialogue"], Value::Null);
    assert_eq!(c["justification"], "c1 reads better");
    assert_eq!(c["lease"], "lease-w2-c1");
    assert_eq!(
        c["turns"],
        json!([{"dialogue": "d5", "turn": 1, "labels": ["repetitive"], "score": 2}])
    );
    let claimed = c["claimed_at_ms"].as_u64().expect("claimed");
    let submitted = c["submitted_at_ms"].as_u64().expect("submitted");
    assert_eq!(
        c["seconds"].as_f64(),
        Some((submitted - claimed) as f64 / 1000.0)
    );
    assert!(submitted > claimed);

    let r = row("r2", "w3");
    assert_eq!(
        (&r["dialogue"], &r["system"]),
        (&json!("d2"), &json!("bot_b"))
    );
    assert_eq!(r["left"], Value::Null);
    assert_eq!(r["choice_system"], Value::Null);
    assert_eq!(
        r["answers"],
        json!({"fluency": 2, "engaging": 1, "comment": "fine"})
    );

    let g = row("gold-w2-false", "w2");
    assert_eq!(
        (&g["pool"], &g["gold"], &g["counted"]),
        (&json!("gold"), &json!(true), &json!(false))
    );
    assert_eq!(g["gold_correct"], false);
    let s = rows
        .iter()
        .find(|r| r["surplus"] == true)
        .expect("surplus row");
    assert_eq!(
        (&s["item"], &s["participant"], &s["counted"]),
        (&json!("r3"), &json!("w2"), &json!(false))
    );

    let onboarding: Vec<&Value> = rows.iter().filter(|r| r["onboarding"] == true).collect();
    assert_eq!(onboarding.len(), 4);
    let q2 = row("q2", "w5");
    assert_eq!(q2["onboarding"], true);
    assert_eq!(q2["answers"], json!({"q2": 5}));
    assert_eq!(q2["gold_correct"], false);
    assert_eq!(q2["lease"], Value::Null);

    let with_tests = jsonl(&export(&*store, "judgments-jsonl", true).await);
    assert_eq!(with_tests.len(), rows.len() + 1);
    assert!(with_tests.iter().any(|r| r["participant"] == "wt"));
}

#[tokio::test]
async fn judgments_csv_has_a_column_per_answer_key() {
    let golden = golden();
    let (_dir, store, _) = store(&golden).await;
    let text = export(&*store, "judgments-csv", false).await;
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .expect("header")
        .iter()
        .map(str::to_string)
        .collect();
    let answer_columns: Vec<&str> = header
        .iter()
        .filter_map(|h| h.strip_prefix("answer."))
        .collect();
    assert_eq!(
        answer_columns,
        ["comment", "engaging", "fluency", "q1", "q2"]
    );
    assert_eq!(header.first().map(String::as_str), Some("study"));
    assert_eq!(header.last().map(String::as_str), Some("gold_correct"));
    let rows: Vec<BTreeMap<String, String>> = reader
        .records()
        .map(|r| {
            let r = r.expect("record");
            header
                .iter()
                .cloned()
                .zip(r.iter().map(str::to_string))
                .collect()
        })
        .collect();
    let expected = jsonl(&export(&*store, "judgments-jsonl", false).await);
    assert_eq!(rows.len(), expected.len());
    let row = |item: &str, worker: &str| {
        rows.iter()
            .find(|r| r["item"] == item && r["participant"] == worker)
            .unwrap_or_else(|| panic!("no row for {item} by {worker}"))
    };
    let c = row("c3", "w1");
    assert_eq!(c["left"], "d4");
    assert_eq!(c["left_system"], "bot_b");
    assert_eq!(c["choice"], "d3");
    assert_eq!(c["choice_system"], "bot_a");
    assert_eq!(c["counted"], "true");
    assert_eq!(c["void"], "false");
    assert_eq!(c["gold"], "false");
    assert_eq!(c["dialogue"], "");
    assert_eq!(c["answer.fluency"], "");
    assert_eq!(c["worker_id"], "PROLIFIC-w1");
    let turns: Value = serde_json::from_str(&c["turns"]).expect("turns JSON");
    assert_eq!(turns[0]["labels"], json!(["repetitive"]));
    let r = row("r1", "w2");
    assert_eq!(r["answer.fluency"], "5");
    assert_eq!(r["answer.engaging"], "3");
    assert_eq!(r["answer.comment"], "fine");
    assert_eq!(r["turns"], "[]");
    assert_eq!(r["gold_correct"], "");
    let j = expected
        .iter()
        .find(|e| e["item"] == "r1" && e["participant"] == "w2")
        .expect("same row in JSON Lines");
    assert_eq!(
        r["seconds"],
        j["seconds"].as_f64().expect("seconds").to_string()
    );
    assert_eq!(r["claimed_at_ms"], j["claimed_at_ms"].to_string());
    let q1 = row("q1", "w1");
    assert_eq!(
        (q1["onboarding"].as_str(), q1["answer.q1"].as_str()),
        ("true", "a")
    );
    assert_eq!(q1["gold_correct"], "true");
}

#[tokio::test]
async fn report_numbers_match_scipy_and_krippendorff() {
    let golden = golden();
    let (_dir, store, logs) = store(&golden).await;
    let report = build_report(&*store, &ReportOptions::default())
        .await
        .expect("report");
    assert_eq!(report.sessions, 1, "participant logs are not dialogues");
    let j = report.judgments.as_ref().expect("judgments section");
    let ratings = golden["ratings"].as_array().expect("ratings").len();
    let comparisons = golden["comparisons"].as_array().expect("comparisons").len();
    assert_eq!(j.participant_logs, 5, "the test participant is left out");
    assert_eq!(j.counted, ratings + comparisons);
    assert_eq!(j.judgments, ratings + comparisons + 4);

    let expected = golden["rating_stats"].as_object().expect("rating stats");
    assert_eq!(j.ratings.len(), expected.len());
    for (system, questions) in expected {
        for (question, e) in questions.as_object().expect("questions") {
            let r = &j.ratings[system][question];
            let what = format!("{system} {question}");
            assert_eq!(r.n as u64, e["n"].as_u64().expect("n"), "{what}");
            close(r.mean, &e["mean"], &format!("{what} mean"));
            close(r.sd, &e["sd"], &format!("{what} sd"));
            close(r.ci_low, &e["ci_low"], &format!("{what} ci_low"));
            close(r.ci_high, &e["ci_high"], &format!("{what} ci_high"));
        }
        assert_eq!(j.ratings[system].len(), 2, "the comment is not a rating");
    }

    let grid = golden["win_rates"].as_array().expect("win rates");
    assert_eq!(j.win_rates.len(), grid.len());
    for (pair, e) in j.win_rates.iter().zip(grid) {
        assert_eq!(
            (pair.a.as_str(), pair.b.as_str()),
            (e["a"].as_str().expect("a"), e["b"].as_str().expect("b"))
        );
        assert_eq!(pair.a_wins, e["a_wins"].as_u64().expect("a wins"));
        assert_eq!(pair.b_wins, e["b_wins"].as_u64().expect("b wins"));
        assert_eq!(pair.ties, 0);
        close(pair.a_win_rate, &e["a_win_rate"], "win rate");
        close(pair.p, &e["p"], "binomial p");
    }

    for (question, alpha) in golden["rating_alpha"].as_object().expect("alpha") {
        let a = &j.rating_agreement[question];
        close(a.krippendorff_alpha, alpha, &format!("alpha {question}"));
        assert_eq!(a.units, 4);
    }
    let comparison = j
        .comparison_agreement
        .as_ref()
        .expect("comparison agreement");
    close(
        comparison.krippendorff_alpha,
        &golden["comparison_alpha"],
        "alpha comparisons",
    );
    assert_eq!(comparison.units, 3);

    // Workers: recomputed here from the logs as written.
    assert_eq!(
        j.workers
            .iter()
            .map(|w| w.participant.as_str())
            .collect::<Vec<_>>(),
        ["w1", "w2", "w3", "w4"]
    );
    for w in &j.workers {
        let log = &logs[&w.participant];
        let mut secs: Vec<f64> = Vec::new();
        let (mut gold, mut correct) = (0, 0);
        for pair in log.events.windows(2) {
            if let (EventKind::ItemClaimed { .. }, EventKind::Judged(judged)) =
                (&pair[0].kind, &pair[1].kind)
            {
                secs.push((pair[1].at_ms - pair[0].at_ms) as f64 / 1000.0);
                if judged.pool == ItemPool::Gold {
                    gold += 1;
                    correct += usize::from(judged.gold_correct == Some(true));
                }
            }
        }
        secs.sort_by(f64::total_cmp);
        let n = secs.len();
        let median = if n % 2 == 1 {
            secs[n / 2]
        } else {
            (secs[n / 2 - 1] + secs[n / 2]) / 2.0
        };
        assert_eq!(w.judgments, n, "{}", w.participant);
        assert_eq!(w.median_seconds, Some(median), "{}", w.participant);
        assert_eq!(
            (w.gold_judged, w.gold_correct),
            (gold, correct),
            "{}",
            w.participant
        );
        assert_eq!(
            w.gold_accuracy,
            (gold > 0).then(|| correct as f64 / gold as f64),
            "{}",
            w.participant
        );
        assert_eq!(
            w.straight_lining,
            w.participant == "w4",
            "{}",
            w.participant
        );
        assert_eq!(w.worker_id, Some(format!("PROLIFIC-{}", w.participant)));
    }
    assert_eq!(j.workers[1].gold_accuracy, Some(0.5));

    assert_eq!((j.onboarding.taken, j.onboarding.passed), (2, 1));
    assert_eq!(
        j.screened_out,
        BTreeMap::from([("onboarding".to_string(), 1)])
    );
    assert_eq!((j.surplus, j.returned), (1, 1));

    let json = serde_json::to_value(&report).expect("report JSON");
    assert!(json["judgments"]["win_rates"].is_array());
    let html = render_html(&report);
    assert!(html.contains("Evaluation judgments"), "section on the page");
    assert!(html.contains("Pairwise comparisons (ACUTE-Eval)"));

    let with_tests = ReportOptions {
        include_test: true,
        ..ReportOptions::default()
    };
    let tried = build_report(&*store, &with_tests).await.expect("report");
    let t = tried.judgments.expect("judgments section");
    assert_eq!(t.participant_logs, 6);
    assert_eq!(t.ratings["bot_a"]["fluency"].n, 7);
}

#[tokio::test]
async fn dialogue_exports_and_reports_leave_participant_logs_out() {
    let golden = golden();
    let (_dir, store, logs) = store(&golden).await;
    let sessions: HashSet<String> = jsonl(&export(&*store, "jsonl", true).await)
        .iter()
        .map(|e| e["session"].as_str().expect("session").to_string())
        .collect();
    assert_eq!(sessions, HashSet::from(["dlg-1".to_string()]));
    let dataset = export(&*store, "taskmaster1", true).await;
    assert!(dataset.contains("hello"));
    for log in logs.values() {
        assert!(!dataset.contains(&log.id), "{} in {dataset}", log.id);
    }
    // A store without judgments reports as before: no judgments section at all.
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = wozkit_store::open(&dir.path().display().to_string())
        .await
        .expect("open store");
    dialogue(&*plain).await;
    let report = build_report(&*plain, &ReportOptions::default())
        .await
        .expect("report");
    assert!(report.judgments.is_none());
    let json = serde_json::to_value(&report).expect("report JSON");
    assert!(json.get("judgments").is_none());
    assert!(!render_html(&report).contains("Evaluation judgments"));
}

#[tokio::test]
async fn judgments_refuse_a_split() {
    let golden = golden();
    let (dir, store, _) = store(&golden).await;
    let options = ExportOptions {
        format: ExportFormat::JudgmentsCsv,
        out: dir.path().join("j.csv"),
        split: Some(wozkit_data::stored::SplitSpec::parse("train=0.5,test=0.5", 0).expect("split")),
        study: None,
        include_test: false,
    };
    let err = export_store(&*store, &options, &NoProgress)
        .await
        .expect_err("a split of judgments");
    assert!(err.to_string().contains("--split"), "{err}");
}
