//! Model judges beside people, through the store: people's comparisons in their participant logs
//! and two scripted judges' answers in the judges' own logs (as `wozkit judge` writes them), both
//! always choosing the dialogue shown first, one of them asked in both orders. Checks that the
//! judgments exports carry the judges' answers as `kind` `model` without changing any human
//! number, and the report's `judge_agreement` figures worked out by hand.

use std::collections::BTreeMap;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Value, json};
use wozkit_core::event::{Actor, EventKind, ItemPool, Judgment, ModelJudgment, Role};
use wozkit_data::report::evaluation::RankingOptions;
use wozkit_data::report::html::render_html;
use wozkit_data::report::judge_agreement::{JudgeSummary, QuestionKind};
use wozkit_data::report::{Filter, ReportOptions, build_report};
use wozkit_data::stored::{ExportFormat, ExportOptions, NoProgress, export_store};
use wozkit_store::{NewEvent, NewSession, Store};

const STUDY: &str = "cmp";

/// The items: id and their dialogues' systems in the item's order (the judge's first order).
const ITEMS: [(&str, &str, &str); 4] = [
    ("c1", "alpha", "beta"),
    ("c2", "alpha", "beta"),
    ("c3", "beta", "alpha"),
    ("c4", "beta", "alpha"),
];

/// The system each worker chose per item (people see the item's order). Majorities: c1 alpha,
/// c2 beta, c3 beta, c4 beta.
const CHOICES: [(&str, [&str; 4]); 3] = [
    ("w1", ["alpha", "beta", "beta", "beta"]),
    ("w2", ["alpha", "beta", "beta", "alpha"]),
    ("w3", ["beta", "alpha", "beta", "beta"]),
];

fn dialogue(item: &str, system: &str) -> String {
    format!("{item}-{system}")
}

async fn append(store: &dyn Store, log: &str, events: Vec<(u64, Actor, EventKind)>) {
    store
        .open_participant_log(NewSession {
            id: log.into(),
            study_id: STUDY.into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: 1_000,
        })
        .await
        .expect("open log");
    let events = events
        .into_iter()
        .map(|(at_ms, actor, kind)| NewEvent { actor, kind, at_ms })
        .collect();
    store.append(log, events).await.expect("append");
}

/// The people's logs, then a judge's log when `judges` is set.
async fn store(judges: bool) -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(&dir.path().display().to_string())
        .await
        .expect("open store");
    for (w, choices) in CHOICES {
        let actor = Actor::Participant {
            role: Role::User,
            participant: Some(w.into()),
        };
        let mut events = vec![(
            1_000,
            actor.clone(),
            EventKind::ParticipantLogStarted {
                participant: w.into(),
                study: STUDY.into(),
                study_version: "1".into(),
            },
        )];
        for (i, ((item, left, right), chosen)) in ITEMS.iter().zip(choices).enumerate() {
            let at = 10_000 + i as u64 * 1_000;
            events.push((
                at,
                actor.clone(),
                EventKind::Judged(Box::new(Judgment {
                    page: "compare".into(),
                    item: item.to_string(),
                    lease: format!("lease-{w}-{item}"),
                    pool: ItemPool::Item,
                    dialogues: vec![dialogue(item, left), dialogue(item, right)],
                    systems: vec![left.to_string(), right.to_string()],
                    choice: Some(dialogue(item, chosen)),
                    justification: None,
                    answers: IndexMap::new(),
                    turns: Vec::new(),
                    counted: true,
                    surplus: false,
                    gold_correct: None,
                    claimed_at_ms: at - 500,
                    void: false,
                })),
            ));
        }
        append(&*store, &format!("plog-{w}"), events).await;
    }
    if judges {
        for (judge, swap) in [("lefty", false), ("lefty-swap", true)] {
            append(
                &*store,
                &format!("judge-{STUDY}-{judge}"),
                judge_log(judge, swap),
            )
            .await;
        }
    }
    (dir, store)
}

/// A judge that always answers `A` (the dialogue shown first), in both orders when `swap`.
fn judge_log(judge: &str, swap: bool) -> Vec<(u64, Actor, EventKind)> {
    let mut events = vec![(
        50_000,
        Actor::System,
        EventKind::JudgeLogStarted {
            judge: judge.into(),
            study: STUDY.into(),
            model: "scripted".into(),
            url: "http://127.0.0.1:1/v1".into(),
        },
    )];
    let mut at = 50_000;
    for (item, left, right) in ITEMS {
        let orders: &[bool] = if swap { &[false, true] } else { &[false] };
        for &swapped in orders {
            let mut shown = [(dialogue(item, left), left), (dialogue(item, right), right)];
            if swapped {
                shown.reverse();
            }
            at += 100;
            events.push((
                at,
                Actor::System,
                EventKind::ModelJudged(Box::new(ModelJudgment {
                    judge: judge.into(),
                    item: item.into(),
                    question: "choice".into(),
                    dialogues: shown.iter().map(|(d, _)| d.clone()).collect(),
                    systems: shown.iter().map(|(_, s)| s.to_string()).collect(),
                    swapped,
                    answer: Some(json!(shown[0].0)),
                    reply: "[[A]]".into(),
                    failure: None,
                    tokens: 10,
                })),
            ));
        }
        // A failed answer is stored too, and stays out of every export and number.
        at += 100;
        events.push((
            at,
            Actor::System,
            EventKind::ModelJudged(Box::new(ModelJudgment {
                judge: judge.into(),
                item: item.into(),
                question: "choice".into(),
                dialogues: vec![dialogue(item, left), dialogue(item, right)],
                systems: vec![left.into(), right.into()],
                swapped: false,
                answer: None,
                reply: "both are fine".into(),
                failure: Some("the reply names none of A, B".into()),
                tokens: 10,
            })),
        ));
    }
    events
}

async fn export(store: &dyn Store, format: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let options = ExportOptions {
        format: ExportFormat::parse(format).expect("format"),
        out: out.clone(),
        split: None,
        study: Some(STUDY.into()),
        include_test: false,
    };
    export_store(store, &options, &NoProgress)
        .await
        .expect("export");
    std::fs::read_to_string(&out).expect("read export")
}

fn options() -> ReportOptions {
    let defaults = ReportOptions::default();
    ReportOptions {
        filters: vec![Filter::parse(&format!("study={STUDY}")).expect("filter")],
        ranking: RankingOptions {
            bootstrap: 300,
            seed: 5,
            ..defaults.ranking
        },
        ..defaults
    }
}

#[tokio::test]
async fn model_judgments_are_exported_beside_human_ones_and_count_towards_nothing() {
    let (_plain_dir, plain) = store(false).await;
    let (_dir, store) = store(true).await;

    let rows: Vec<Value> = export(&*store, "judgments-jsonl")
        .await
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let human: Vec<&Value> = rows.iter().filter(|r| r["kind"] == "human").collect();
    let model: Vec<&Value> = rows.iter().filter(|r| r["kind"] == "model").collect();
    assert_eq!(human.len(), 12);
    assert_eq!(
        model.len(),
        4 + 8,
        "answered ones only, both orders of the swapping judge"
    );
    assert!(
        human
            .iter()
            .all(|r| r["judge"].is_null() && r["counted"] == true)
    );
    let swapped = model
        .iter()
        .find(|r| r["judge"] == "lefty-swap" && r["item"] == "c1" && r["swapped"] == true)
        .expect("c1 swapped");
    assert_eq!(swapped["study"], STUDY);
    assert_eq!(swapped["log"], "judge-cmp-lefty-swap");
    assert_eq!(swapped["participant"], Value::Null);
    assert_eq!(swapped["counted"], false);
    assert_eq!(
        (&swapped["left"], &swapped["left_system"]),
        (&json!("c1-beta"), &json!("beta"))
    );
    assert_eq!(
        (&swapped["choice"], &swapped["choice_system"]),
        (&json!("c1-beta"), &json!("beta"))
    );
    // The people's rows are unchanged by the judges' (their adjudicated answers included).
    let plain_rows: Vec<Value> = export(&*plain, "judgments-jsonl")
        .await
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(
        plain_rows.iter().collect::<Vec<_>>(),
        human,
        "the people's rows are the same with and without the judges"
    );

    let csv = export(&*store, "judgments-csv").await;
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .expect("header")
        .iter()
        .map(str::to_string)
        .collect();
    for column in ["kind", "judge", "swapped"] {
        assert!(header.iter().any(|h| h == column), "{column} column");
    }
    let records: Vec<BTreeMap<String, String>> = reader
        .records()
        .map(|r| {
            header
                .iter()
                .cloned()
                .zip(r.expect("record").iter().map(str::to_string))
                .collect()
        })
        .collect();
    assert_eq!(records.len(), 24);
    let lefty: Vec<&BTreeMap<String, String>> =
        records.iter().filter(|r| r["judge"] == "lefty").collect();
    assert_eq!(lefty.len(), 4);
    assert!(
        lefty
            .iter()
            .all(|r| r["kind"] == "model" && r["counted"] == "false")
    );
    assert!(lefty.iter().all(|r| r["choice"] == r["left"]));

    // The human numbers do not move.
    let with = build_report(&*store, &options()).await.expect("report");
    let without = build_report(&*plain, &options()).await.expect("report");
    assert_eq!(with.judgments, without.judgments);
    let judgments = with.judgments.as_ref().expect("judgments");
    assert_eq!((judgments.judgments, judgments.counted), (12, 12));
    assert_eq!(
        judgments.participant_logs, 3,
        "judges' logs are no participants"
    );
    assert!(
        judgments
            .workers
            .iter()
            .all(|w| w.participant.starts_with('w'))
    );
    assert!(without.judge_agreement.is_none());
}

fn judge<'a>(summaries: &'a [JudgeSummary], name: &str) -> &'a JudgeSummary {
    summaries
        .iter()
        .find(|j| j.judge == name)
        .unwrap_or_else(|| panic!("no judge {name}"))
}

#[tokio::test]
async fn report_measures_a_left_biased_judge_against_the_people() {
    let (_dir, store) = store(true).await;
    let report = build_report(&*store, &options()).await.expect("report");
    let section = report.judge_agreement.as_ref().expect("judge_agreement");
    assert_eq!((section.resamples, section.seed), (300, 5));
    assert_eq!(section.judges.len(), 2);

    // `lefty` (asked once) chose the first side: alpha on c1, c2 and beta on c3, c4, i.e. labels
    // a, a, b, b (a = alpha, the pair's first system alphabetically). The people's majorities
    // are a, b, b, b. p_o = 3/4; the judge says a half the time, the people a quarter, so
    // p_e = 0.5 · 0.25 + 0.5 · 0.75 = 0.5 and κ = (0.75 − 0.5) / 0.5 = 0.5.
    let lefty = judge(&section.judges, "lefty");
    assert_eq!((lefty.study.as_str(), lefty.answers), (STUDY, 4));
    let q = &lefty.questions[0];
    assert_eq!(
        (q.question.as_str(), q.kind, q.statistic),
        ("choice", QuestionKind::Comparison, "cohen_kappa")
    );
    assert_eq!((q.judged_items, q.model_vs_human.items), (4, 4));
    assert_eq!(q.model_vs_human.agreement, Some(0.75));
    let kappa = q.model_vs_human.value.expect("kappa");
    assert!((kappa - 0.5).abs() < 1e-12, "{kappa}");
    let (lo, hi) = (
        q.model_vs_human.ci_low.expect("low"),
        q.model_vs_human.ci_high.expect("high"),
    );
    assert!(lo <= kappa && kappa <= hi, "{lo} {kappa} {hi}");
    // People against people: per item the labels a a b, b b a, b b b, b a b; of the 12 pairs 6
    // are alike; as both orders each side says a 8 times in 24, so p_e = 1/9 + 4/9 = 5/9 and
    // κ = (1/2 − 5/9) / (4/9) = −1/8.
    assert_eq!((q.human_vs_human.items, q.human_vs_human.pairs), (4, 12));
    assert_eq!(q.human_vs_human.agreement, Some(0.5));
    let people = q.human_vs_human.value.expect("kappa");
    assert!((people + 0.125).abs() < 1e-12, "{people}");
    assert_eq!(q.by_systems.len(), 1);
    assert_eq!(q.by_systems[0].systems, ["alpha", "beta"]);
    assert_eq!(q.by_systems[0].model_vs_human, q.model_vs_human);
    let bias = lefty.side_bias.as_ref().expect("side bias");
    assert_eq!(
        (bias.answers, bias.first, bias.first_rate),
        (4, 4, Some(1.0))
    );
    assert_eq!(
        (bias.swapped_items, bias.flips, bias.flip_rate),
        (0, 0, None)
    );
    // People chose the left side 8 times in 12.
    assert_eq!(bias.human_decided, 12);
    assert_eq!(bias.human_first_rate, Some(8.0 / 12.0));
    // The people's leaderboard: alpha won 4 of 12 battles; the judge's: 2 of 4.
    let win_rate = q
        .rank_correlation
        .iter()
        .find(|c| c.score == "win_rate")
        .expect("win rate");
    assert_eq!(win_rate.systems, ["alpha", "beta"]);
    assert_eq!(win_rate.human, [4.0 / 12.0, 8.0 / 12.0]);
    assert_eq!(win_rate.model, [0.5, 0.5]);
    assert_eq!(win_rate.kendall_tau, None, "the judge ranks both alike");

    // `lefty-swap` chose the first side in both orders: each item's two answers name different
    // systems, so every item is a tie. p_o = 0 and p_e = 1 · (the people's tie share, 0): κ = 0.
    let swap = judge(&section.judges, "lefty-swap");
    assert_eq!(swap.answers, 8);
    let q = &swap.questions[0];
    assert_eq!(q.model_vs_human.agreement, Some(0.0));
    assert_eq!(q.model_vs_human.value, Some(0.0));
    let bias = swap.side_bias.as_ref().expect("side bias");
    assert_eq!(
        (bias.answers, bias.first, bias.first_rate),
        (8, 8, Some(1.0))
    );
    assert_eq!(
        (bias.swapped_items, bias.flips, bias.flip_rate),
        (4, 4, Some(1.0))
    );
    // Two-sided binomial test of 8 of 8: 2 · 0.5^8.
    let p = bias.p.expect("p");
    assert!((p - 2.0 * 0.5f64.powi(8)).abs() < 1e-12, "{p}");

    let html = render_html(&report);
    assert!(html.contains("data-testid=\"judge-agreement\""));
    assert!(html.contains("lefty-swap"));
    assert!(html.contains("data-testid=\"side-bias\""));
    let json = serde_json::to_value(&report).expect("JSON");
    assert_eq!(
        json["judge_agreement"]["judges"][0]["questions"][0]["statistic"],
        "cohen_kappa"
    );
}
