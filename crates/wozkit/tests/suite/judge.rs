//! `wozkit judge` against scripted stand-ins of OpenAI-compatible judges: one that follows a
//! known rule (the side whose reply says `(GOOD)`), one that always prefers position A. Every
//! answer is stored in the judge's own log, a rerun asks nothing again, and the token budget
//! stops a run.

use std::path::Path;

use crate::common;
use serde_json::{Value, json};
use wozkit_core::event::{EventKind, ModelJudgment};

const STUDY: &str = include_str!("../../../wozkit-core/tests/fixtures/judged-compare.yaml");

/// How a stand-in answers a prompt.
#[derive(Clone, Copy)]
enum Rule {
    /// Names the side whose conversation holds `(GOOD)`.
    Follows,
    /// Always `[[A]]`.
    PrefersA,
}

fn answer(rule: Rule, prompt: &str) -> String {
    match rule {
        Rule::PrefersA => "[[A]]".into(),
        Rule::Follows => {
            let b = prompt.find("[B]").unwrap_or(0);
            let good = prompt.find("(GOOD)").unwrap_or(0);
            if good > b {
                "B is better. [[B]]".into()
            } else {
                "[[A]]".into()
            }
        }
    }
}

/// Serves chat completions on a local port in a thread of its own; returns the base URL.
fn spawn_judge(rule: Rule) -> String {
    common::chat_completions_server(move |prompt| {
        json!({
            "choices": [{"message": {"role": "assistant", "content": answer(rule, prompt)}}],
            "usage": {"total_tokens": 100},
        })
    })
}

/// The `wozkit` binary's exit code and stderr.
fn wozkit(args: &[&str]) -> (i32, String) {
    let (code, _, stderr) = common::wozkit(args);
    (code, stderr)
}

fn judgments(data: &Path, judge: &str) -> Vec<ModelJudgment> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = wozkit_store::open_snapshot(data.to_str().unwrap())
            .await
            .unwrap();
        let events = store
            .events(&format!("judge-judged-compare-{judge}"), 0)
            .await
            .unwrap();
        assert!(matches!(events[0].kind, EventKind::JudgeLogStarted { .. }));
        events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::ModelJudged(j) => Some(*j),
                _ => None,
            })
            .collect()
    })
}

#[test]
fn judges_answer_every_item_both_ways_and_a_rerun_asks_nothing_again() {
    let dir = tempfile::tempdir().unwrap();
    let study = dir.path().join("study.yaml");
    let biased = "    - name: biased\n      questions: [choice]\n      swap: true\n      prompt: \"[A] {conversation_a} [B] {conversation_b}\"\n";
    std::fs::write(&study, format!("{STUDY}{biased}")).unwrap();
    let data = dir.path().join("data");
    let (rule_url, biased_url) = (spawn_judge(Rule::Follows), spawn_judge(Rule::PrefersA));
    let args = |extra: &[&str]| {
        let mut a = vec![
            "judge".to_string(),
            study.display().to_string(),
            "--data".into(),
            data.display().to_string(),
            "--judge".into(),
            format!("rule={rule_url}#m"),
            "--judge".into(),
            format!("biased={biased_url}#m"),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        wozkit(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };

    // A budget of 300 tokens stops after three answers of 100 tokens, one call at a time.
    let (code, err) = run(&["--max-tokens-total", "300", "--concurrency", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("token budget"), "{err}");
    assert_eq!(judgments(&data, "rule").len(), 3);

    let (code, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    let rule = judgments(&data, "rule");
    assert_eq!(rule.len(), 8, "4 pairs, each asked both ways");
    for j in &rule {
        let chosen = j.answer.as_ref().and_then(Value::as_str).expect("answered");
        assert!(chosen.starts_with("good-"), "{j:?}");
    }
    let biased = judgments(&data, "biased");
    assert_eq!(biased.len(), 8);
    for j in &biased {
        assert_eq!(
            j.answer.as_ref().and_then(Value::as_str),
            Some(j.dialogues[0].as_str())
        );
    }
    assert_eq!(biased.iter().filter(|j| j.swapped).count(), 4);

    // Resumable: nothing left to ask.
    let (code, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 to ask, 8 answered before"), "{err}");
    assert_eq!(judgments(&data, "rule").len(), 8);

    // The answers in the judgments export, as rows of kind `model`.
    let out = dir.path().join("judgments.jsonl");
    let (code, err) = wozkit(&[
        "export",
        "--format",
        "judgments-jsonl",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 16);
    assert!(
        rows.iter()
            .all(|r| r["kind"] == "model" && r["counted"] == false)
    );
    assert_eq!(rows.iter().filter(|r| r["judge"] == "biased").count(), 8);

    // The report's side bias: the biased judge always picks A and so flips on every pair; the
    // rule-following one never does. Without people there is nothing to agree with.
    let report_path = dir.path().join("report.json");
    let (code, err) = wozkit(&[
        "report",
        "--data",
        data.to_str().unwrap(),
        "--json",
        report_path.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert!(report.get("judgments").is_none(), "no person judged");
    let judges = report["judge_agreement"]["judges"].as_array().unwrap();
    let judge = |name: &str| judges.iter().find(|j| j["judge"] == name).unwrap();
    let biased = &judge("biased")["side_bias"];
    assert_eq!(
        (&biased["first"], &biased["answers"]),
        (&json!(8), &json!(8))
    );
    assert_eq!(
        (&biased["flips"], &biased["swapped_items"]),
        (&json!(4), &json!(4))
    );
    let rule = &judge("rule")["side_bias"];
    assert_eq!(
        (&rule["flips"], &rule["flip_rate"]),
        (&json!(0), &json!(0.0))
    );
    assert_eq!(judge("rule")["questions"][0]["model_vs_human"]["items"], 0);
}
