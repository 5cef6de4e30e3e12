//! Agreement statistics against published worked examples, the per-category and adjudication
//! rules, and the edge cases (all agree, one annotator, missing ratings).

use wozkit_data::stats::agreement::{
    Level, adjudicate, fleiss_category_kappas, fleiss_kappa, krippendorff_alpha, label_agreement,
};

/// `value` printed with `digits` decimals.
fn printed(value: Option<f64>, digits: usize) -> String {
    format!("{:.digits$}", value.expect("defined"))
}

/// Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers
/// A–D, twelve units, values 1–5, `None` where an observer gave no value. Published results:
/// nominal alpha 0.743, interval alpha 0.849.
const KRIPPENDORFF_2011: [[Option<u8>; 12]; 4] = {
    const N: Option<u8> = None;
    [
        [
            Some(1),
            Some(2),
            Some(3),
            Some(3),
            Some(2),
            Some(1),
            Some(4),
            Some(1),
            Some(2),
            N,
            N,
            N,
        ],
        [
            Some(1),
            Some(2),
            Some(3),
            Some(3),
            Some(2),
            Some(2),
            Some(4),
            Some(1),
            Some(2),
            Some(5),
            N,
            Some(3),
        ],
        [
            N,
            Some(3),
            Some(3),
            Some(3),
            Some(2),
            Some(3),
            Some(4),
            Some(2),
            Some(2),
            Some(5),
            Some(1),
            N,
        ],
        [
            Some(1),
            Some(2),
            Some(3),
            Some(3),
            Some(2),
            Some(4),
            Some(4),
            Some(1),
            Some(2),
            Some(5),
            Some(1),
            N,
        ],
    ]
};

/// The example's units: the values each unit got, missing ones left out.
fn krippendorff_units() -> Vec<Vec<f64>> {
    (0..12)
        .map(|u| {
            KRIPPENDORFF_2011
                .iter()
                .filter_map(|observer| observer[u].map(f64::from))
                .collect()
        })
        .collect()
}

/// Fleiss' kappa worked example of Wikipedia ("Fleiss' kappa", Worked example): ten subjects, each
/// rated by fourteen raters into five categories. Published result: P̄ = 0.378, P̄e = 0.213,
/// κ = 0.210.
const FLEISS_WIKIPEDIA: [[u64; 5]; 10] = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
];

fn fleiss_table() -> Vec<Vec<u64>> {
    FLEISS_WIKIPEDIA.iter().map(|row| row.to_vec()).collect()
}

#[test]
fn krippendorff_2011_worked_example_nominal_and_interval() {
    let units = krippendorff_units();
    // Unit 12 has a single value: not pairable, so it changes nothing.
    assert_eq!(units[11].len(), 1);
    assert_eq!(
        printed(krippendorff_alpha(&units, Level::Nominal), 3),
        "0.743"
    );
    assert_eq!(
        printed(krippendorff_alpha(&units, Level::Interval), 3),
        "0.849"
    );
    let without_single: Vec<Vec<f64>> = units[..11].to_vec();
    assert_eq!(
        krippendorff_alpha(&without_single, Level::Nominal),
        krippendorff_alpha(&units, Level::Nominal)
    );
}

#[test]
fn krippendorff_2011_worked_example_through_labels() {
    // The same data as text labels: label_agreement codes them itself.
    let units: Vec<Vec<String>> = krippendorff_units()
        .iter()
        .map(|u| u.iter().map(|v| format!("v{v}")).collect())
        .collect();
    let a = label_agreement(&units, &[]);
    assert_eq!(printed(a.krippendorff_alpha, 3), "0.743");
    assert_eq!(a.units, 11);
    assert_eq!(a.labels, 40);
    assert_eq!((a.raters_min, a.raters_max), (2, 4));
    // Units with 2, 3 and 4 values: Fleiss' kappa needs one count of raters.
    assert_eq!(a.fleiss_kappa, None);
    assert_eq!(
        a.categories.keys().collect::<Vec<_>>(),
        ["v1", "v2", "v3", "v4", "v5"]
    );
    // Label 5: given by three observers to unit 10 and by nobody else — perfect separation.
    assert_eq!(a.categories["v5"].given, 3);
    assert_eq!(a.categories["v5"].units, 1);
    assert_eq!(a.categories["v5"].krippendorff_alpha, Some(1.0));
}

#[test]
fn fleiss_wikipedia_worked_example() {
    let table = fleiss_table();
    assert_eq!(printed(fleiss_kappa(&table), 3), "0.210");
}

#[test]
fn fleiss_per_category_kappas() {
    let table = fleiss_table();
    let kappas = fleiss_category_kappas(&table).expect("one count of raters");
    assert_eq!(kappas.len(), 5);
    // Category 1 by hand: column 0,0,0,0,2,7,3,2,6,0 (20 of 140, p = 1/7);
    // Σ n(14 − n) = 24 + 49 + 33 + 24 + 48 = 178; κ = 1 − 178 / (10·14·13 · (1/7)(6/7))
    // = 1 − 178·49 / 10920 = 0.2013.
    assert_eq!(printed(kappas[0], 4), "0.2013");
    // Category 5 by hand: column 14,2,6,0,1,0,0,2,0,7 (32 of 140, p = 8/35);
    // Σ n(14 − n) = 0 + 24 + 48 + 13 + 24 + 49 = 158; κ = 1 − 158 / (1820 · (8/35)(27/35))
    // = 1 − 158·1225 / 393120 = 0.5077.
    assert_eq!(printed(kappas[4], 4), "0.5077");
    // Fleiss (1971): the overall kappa is the per-category kappas averaged with weights p_j q_j.
    let totals: Vec<f64> = (0..5)
        .map(|j| table.iter().map(|r| r[j] as f64).sum::<f64>() / 140.0)
        .collect();
    let weights: Vec<f64> = totals.iter().map(|p| p * (1.0 - p)).collect();
    let weighted: f64 = kappas
        .iter()
        .zip(&weights)
        .map(|(k, w)| k.expect("defined") * w)
        .sum::<f64>()
        / weights.iter().sum::<f64>();
    let overall = fleiss_kappa(&table).expect("defined");
    assert!(
        (weighted - overall).abs() < 1e-12,
        "{weighted} != {overall}"
    );
}

#[test]
fn two_categories_have_the_overall_kappa_each() {
    let table = vec![vec![3, 1], vec![0, 4], vec![2, 2], vec![4, 0]];
    let overall = fleiss_kappa(&table).expect("defined");
    for kappa in fleiss_category_kappas(&table).expect("defined") {
        assert!((kappa.expect("defined") - overall).abs() < 1e-12);
    }
}

#[test]
fn per_label_alpha_is_the_alpha_of_the_recoded_data() {
    let units = vec![
        vec!["inform", "inform", "request"],
        vec!["request", "request", "request"],
        vec!["greet", "inform", "inform"],
        vec!["inform", "inform", "inform"],
    ];
    let a = label_agreement(&units, &["bye"]);
    let recoded: Vec<Vec<f64>> = units
        .iter()
        .map(|u| {
            u.iter()
                .map(|l| if *l == "inform" { 1.0 } else { 0.0 })
                .collect()
        })
        .collect();
    assert_eq!(
        a.categories["inform"].krippendorff_alpha,
        krippendorff_alpha(&recoded, Level::Nominal)
    );
    assert_eq!(a.categories["inform"].given, 7);
    assert_eq!(a.categories["inform"].units, 3);
    // Three annotators everywhere: Fleiss' kappa is defined, overall and per label.
    assert!(a.fleiss_kappa.is_some());
    assert!(a.categories["request"].fleiss_kappa.is_some());
    // A label of the label set that nobody gave: listed, undefined.
    let bye = &a.categories["bye"];
    assert_eq!((bye.given, bye.units), (0, 0));
    assert_eq!((bye.krippendorff_alpha, bye.fleiss_kappa), (None, None));
}

#[test]
fn all_agree_is_one_when_the_data_varies_and_undefined_when_it_does_not() {
    // Every unit unanimous, different labels across units: observed disagreement 0, alpha 1.
    let units = vec![vec!["a", "a"], vec!["b", "b", "b"], vec!["a", "a"]];
    let a = label_agreement(&units, &[]);
    assert_eq!(a.krippendorff_alpha, Some(1.0));
    // Everyone gave the same label everywhere: observed and expected disagreement are both 0, so
    // alpha (1 − 0/0) and kappa ((1 − 1)/(1 − 1)) are undefined rather than 1.
    let same = vec![vec!["a", "a"], vec!["a", "a"]];
    let a = label_agreement(&same, &[]);
    assert_eq!((a.krippendorff_alpha, a.fleiss_kappa), (None, None));
    assert_eq!(fleiss_kappa(&[vec![2], vec![2]]), None);
    assert_eq!(
        krippendorff_alpha(&[vec![4.0, 4.0, 4.0]], Level::Interval),
        None
    );
}

#[test]
fn one_annotator_gives_nothing_to_compare() {
    let units = vec![vec!["a"], vec!["b"], vec!["a"]];
    let a = label_agreement(&units, &[]);
    assert_eq!(a.units, 0);
    assert_eq!((a.raters_min, a.raters_max), (0, 0));
    assert_eq!((a.krippendorff_alpha, a.fleiss_kappa), (None, None));
    assert!(a.categories.is_empty());
    assert_eq!(fleiss_kappa(&[vec![1, 0], vec![0, 1]]), None);
    assert_eq!(fleiss_category_kappas(&[vec![1, 0], vec![0, 1]]), None);
}

#[test]
fn missing_ratings_are_left_out_of_alpha_and_make_kappa_undefined() {
    // Unit 2 lost one annotator's label: alpha uses the rest, kappa needs equal counts.
    let units = vec![vec!["a", "a", "b"], vec!["b", "b"], vec!["a", "a", "a"]];
    let a = label_agreement(&units, &[]);
    assert!(a.krippendorff_alpha.is_some());
    assert_eq!(a.fleiss_kappa, None);
    assert_eq!((a.raters_min, a.raters_max), (2, 3));
    assert!(a.categories.values().all(|c| c.fleiss_kappa.is_none()));
}

#[test]
fn adjudication_takes_the_majority_and_breaks_ties_by_order() {
    let m = adjudicate(&["inform", "request", "inform"]).expect("labels");
    assert_eq!(
        (m.label.as_str(), m.votes, m.of, m.tie),
        ("inform", 2, 3, false)
    );
    // A tie: the tied label given first wins, whatever its alphabetical place.
    let t = adjudicate(&["request", "inform", "inform", "request", "greet"]).expect("labels");
    assert_eq!(
        (t.label.as_str(), t.votes, t.of, t.tie),
        ("request", 2, 5, true)
    );
    let t = adjudicate(&["inform", "request"]).expect("labels");
    assert_eq!((t.label.as_str(), t.tie), ("inform", true));
    assert_eq!(adjudicate::<&str>(&[]), None);
}

mod report {
    //! The report's label agreement, from participant logs in a store.

    use indexmap::IndexMap;
    use serde_json::{Value, json};
    use wozkit_core::event::{Actor, EventKind, ItemPool, Judgment, Role, TurnLabel};
    use wozkit_data::report::html::render_html;
    use wozkit_data::report::{ReportOptions, build_report};
    use wozkit_data::stats::agreement::{Level, krippendorff_alpha, label_agreement};
    use wozkit_data::stored::{ExportFormat, ExportOptions, NoProgress, export_store};
    use wozkit_store::{NewEvent, NewParticipant, NewSession, Platform, Store};

    /// One worker's judgment of an item: answers and the labels ticked on turns 0 and 1.
    fn judgment(item: &str, answers: &[(&str, Value)], turns: &[&[&str]]) -> Judgment {
        Judgment {
            page: "annotate".into(),
            item: item.into(),
            lease: format!("lease-{item}"),
            pool: ItemPool::Item,
            dialogues: vec![format!("d-{item}")],
            systems: vec!["sys".into()],
            choice: None,
            justification: None,
            answers: answers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<IndexMap<_, _>>(),
            turns: turns
                .iter()
                .enumerate()
                .map(|(i, labels)| TurnLabel {
                    dialogue: format!("d-{item}"),
                    turn: i as u32,
                    labels: labels.iter().map(|l| l.to_string()).collect(),
                    score: None,
                })
                .collect(),
            counted: true,
            surplus: false,
            gold_correct: None,
            claimed_at_ms: 0,
            void: false,
        }
    }

    /// Three workers, three items. `act` is categorical (w3 left it out on i3), `note` free text,
    /// `score` a number; turns carry dialogue-act checkboxes.
    fn judgments() -> Vec<(&'static str, Vec<Judgment>)> {
        let j = judgment;
        vec![
            (
                "w1",
                vec![
                    j(
                        "i1",
                        &[
                            ("act", json!("inform")),
                            ("note", json!("fine")),
                            ("score", json!(4)),
                        ],
                        &[&["inform"], &[]],
                    ),
                    j(
                        "i2",
                        &[("act", json!("request")), ("note", json!("ok"))],
                        &[&["request"], &["bye"]],
                    ),
                    j("i3", &[("act", json!("greet"))], &[]),
                ],
            ),
            (
                "w2",
                vec![
                    j(
                        "i1",
                        &[("act", json!("inform")), ("note", json!("good"))],
                        &[&["inform"], &[]],
                    ),
                    j("i2", &[("act", json!("request"))], &[&["request"], &[]]),
                    j(
                        "i3",
                        &[("act", json!("inform")), ("note", json!("hm"))],
                        &[],
                    ),
                ],
            ),
            (
                "w3",
                vec![
                    j(
                        "i1",
                        &[("act", json!("request"))],
                        &[&["inform", "request"], &[]],
                    ),
                    j(
                        "i2",
                        &[("act", json!("request"))],
                        &[&["request"], &["bye"]],
                    ),
                    j("i3", &[("note", json!("no idea"))], &[]),
                ],
            ),
        ]
    }

    async fn store() -> (tempfile::TempDir, std::sync::Arc<dyn Store>) {
        store_of(judgments()).await
    }

    async fn store_of(
        judgments: Vec<(&'static str, Vec<Judgment>)>,
    ) -> (tempfile::TempDir, std::sync::Arc<dyn Store>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = wozkit_store::open(&dir.path().display().to_string())
            .await
            .expect("open store");
        for (w, judged) in judgments {
            store
                .create_participant(NewParticipant {
                    id: w.into(),
                    token_hash: format!("hash-{w}"),
                    study_id: "annotate".into(),
                    platform: Platform::Prolific,
                    worker_id: Some(format!("PROLIFIC-{w}")),
                    external_ids: Default::default(),
                    flow_step: "0".into(),
                    created_at_ms: 1_000,
                })
                .await
                .expect("create participant");
            let log = format!("plog-{w}");
            store
                .open_participant_log(NewSession {
                    id: log.clone(),
                    study_id: "annotate".into(),
                    study_version: "1".into(),
                    seed: 0,
                    created_at_ms: 1_000,
                })
                .await
                .expect("open log");
            let actor = Actor::Participant {
                role: Role::User,
                participant: Some(w.into()),
            };
            let mut events = vec![NewEvent {
                actor: actor.clone(),
                kind: EventKind::ParticipantLogStarted {
                    participant: w.into(),
                    study: "annotate".into(),
                    study_version: "1".into(),
                },
                at_ms: 1_000,
            }];
            for (i, judgment) in judged.into_iter().enumerate() {
                events.push(NewEvent {
                    actor: actor.clone(),
                    kind: EventKind::Judged(Box::new(judgment)),
                    at_ms: 2_000 + i as u64,
                });
            }
            store.append(&log, events).await.expect("append");
        }
        (dir, store)
    }

    fn binary(units: &[[u8; 3]]) -> Vec<Vec<f64>> {
        units
            .iter()
            .map(|u| u.iter().map(|&v| f64::from(v)).collect())
            .collect()
    }

    #[tokio::test]
    async fn report_has_label_agreement_per_question_and_per_turn_label() {
        let (_dir, store) = store().await;
        let report = build_report(&*store, &ReportOptions::default())
            .await
            .expect("report");
        let j = report.judgments.as_ref().expect("judgments section");

        // `act`: i1 inform/inform/request, i2 request ×3, i3 greet/inform (w3 gave none).
        assert_eq!(
            j.label_agreement.keys().collect::<Vec<_>>(),
            ["act"],
            "free text (note) and numbers (score) are no categories"
        );
        let act = &j.label_agreement["act"];
        assert_eq!(
            (act.units, act.labels, act.raters_min, act.raters_max),
            (3, 8, 2, 3)
        );
        let expected = label_agreement(
            &[
                vec!["inform", "inform", "request"],
                vec!["request", "request", "request"],
                vec!["greet", "inform"],
            ],
            &[],
        );
        assert_eq!(act, &expected);
        assert!(act.krippendorff_alpha.is_some());
        assert_eq!(
            act.fleiss_kappa, None,
            "i3 has two answers, the others three"
        );
        assert_eq!(act.categories["request"].given, 4);

        // Turns: units (i1,0) (i1,1) (i2,0) (i2,1), three workers each.
        let t = j.turn_label_agreement.as_ref().expect("turn labels");
        assert_eq!(
            t.labels.keys().collect::<Vec<_>>(),
            ["bye", "inform", "request"]
        );
        let inform = binary(&[[1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]]);
        let request = binary(&[[0, 0, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]]);
        let bye = binary(&[[0, 0, 0], [0, 0, 0], [0, 0, 0], [1, 0, 1]]);
        for (label, units) in [("inform", &inform), ("request", &request), ("bye", &bye)] {
            let c = &t.labels[label];
            assert_eq!(
                c.krippendorff_alpha,
                krippendorff_alpha(units, Level::Nominal),
                "{label}"
            );
            assert!(c.fleiss_kappa.is_some(), "{label}: three workers per turn");
        }
        assert_eq!(t.labels["inform"].krippendorff_alpha, Some(1.0));
        assert_eq!(
            (t.labels["request"].given, t.labels["request"].units),
            (4, 2)
        );
        assert_eq!(
            (t.sets.units, t.sets.raters_min, t.sets.raters_max),
            (4, 3, 3)
        );
        assert_eq!(
            t.sets.categories.keys().collect::<Vec<_>>(),
            ["(none)", "bye", "inform", "inform+request", "request"]
        );

        let json = serde_json::to_value(&report).expect("report as JSON");
        let act_json = &json["judgments"]["label_agreement"]["act"];
        assert_eq!(act_json["units"], 3);
        assert_eq!(act_json["raters_max"], 3);
        assert_eq!(act_json["categories"]["request"]["given"], 4);
        assert_eq!(
            json["judgments"]["turn_label_agreement"]["labels"]["inform"]["krippendorff_alpha"],
            1.0
        );

        let html = render_html(&report);
        assert!(html.contains("<h3>Agreement on labels</h3>"));
        assert!(
            html.contains("<td>answer: act</td><td>(all)</td><td>3</td><td>2–3</td><td>8</td>")
        );
        assert!(
            html.contains("<td>turn labels (set ticked)</td><td>(all)</td><td>4</td><td>3</td>")
        );
        assert!(!html.contains("answer: note"));
        assert!(!html.contains("answer: score"));
    }

    async fn export(store: &dyn Store, format: &str) -> String {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("out");
        let options = ExportOptions {
            format: ExportFormat::parse(format).expect("format"),
            out: out.clone(),
            split: None,
            study: Some("annotate".into()),
            include_test: false,
        };
        export_store(store, &options, &NoProgress)
            .await
            .expect("export");
        std::fs::read_to_string(&out).expect("read export")
    }

    #[tokio::test]
    async fn judgments_exports_carry_the_adjudicated_answer_of_each_item() {
        let (_dir, store) = store().await;
        let lines: Vec<Value> = export(&*store, "judgments-jsonl")
            .await
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect();
        assert_eq!(lines.len(), 9);
        let row = |item: &str, worker: &str| {
            lines
                .iter()
                .find(|r| r["item"] == item && r["participant"] == worker)
                .unwrap_or_else(|| panic!("no row for {item} by {worker}"))
        };
        // i1: inform twice, request once; w3's own answer differs but the row carries the item's.
        assert_eq!(
            row("i1", "w3")["adjudicated"],
            json!({"act": {"label": "inform", "votes": 2, "of": 3, "tie": false}})
        );
        assert_eq!(row("i2", "w1")["adjudicated"]["act"]["label"], "request");
        assert_eq!(row("i2", "w1")["adjudicated"]["act"]["votes"], 3);
        // i3: greet (w1) and inform (w2) submitted at the same time: the tie goes to the first
        // participant id; w3 gave no answer, yet its row carries the item's label.
        assert_eq!(
            row("i3", "w3")["adjudicated"],
            json!({"act": {"label": "greet", "votes": 1, "of": 2, "tie": true}})
        );
        // Turns: i1 turn 0 inform by all three (request by w3 only), turn 1 nothing; i2 turn 1
        // bye by w1 and w3.
        assert_eq!(
            row("i1", "w2")["adjudicated_turns"],
            json!([
                {"dialogue": "d-i1", "turn": 0, "labels": ["inform"], "tied": [], "of": 3},
                {"dialogue": "d-i1", "turn": 1, "labels": [], "tied": [], "of": 3},
            ])
        );
        assert_eq!(
            row("i2", "w2")["adjudicated_turns"][1]["labels"],
            json!(["bye"])
        );
        assert_eq!(row("i3", "w1")["adjudicated_turns"], json!([]));
        assert!(
            lines.iter().all(|r| r["adjudicated"].get("note").is_none()),
            "free text is not adjudicated"
        );

        let text = export(&*store, "judgments-csv").await;
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = reader
            .headers()
            .expect("header")
            .iter()
            .map(str::to_string)
            .collect();
        let at = |name: &str| header.iter().position(|h| h == name);
        let adjudicated = at("adjudicated.act").expect("adjudicated.act column");
        assert_eq!(
            header
                .iter()
                .filter(|h| h.starts_with("adjudicated."))
                .count(),
            1
        );
        assert!(at("answer.score").expect("answer column") < adjudicated);
        assert_eq!(at("adjudicated_turns"), Some(adjudicated + 1));
        assert_eq!(at("turns"), Some(adjudicated + 2));
        let item = at("item").expect("item column");
        let mut by_item: Vec<(String, String)> = reader
            .records()
            .map(|r| {
                let r = r.expect("record");
                (r[item].to_string(), r[adjudicated].to_string())
            })
            .collect();
        by_item.sort();
        by_item.dedup();
        assert_eq!(
            by_item,
            [
                ("i1".to_string(), "inform".to_string()),
                ("i2".to_string(), "request".to_string()),
                ("i3".to_string(), "greet".to_string()),
            ]
        );
    }

    /// A span on utterance 0 of "at Nandos for 2".
    fn span(start: u32, end: u32, slot: &str) -> Value {
        let text: String = "at Nandos for 2"
            .chars()
            .skip(start as usize)
            .take((end - start) as usize)
            .collect();
        json!({"turn": 0, "start_index": start, "end_index": end, "text": text, "slot": slot})
    }

    #[tokio::test]
    async fn report_has_span_agreement_on_marked_characters() {
        let spans = |item: &str, marked: Vec<Value>| {
            judgment(item, &[("spans", Value::Array(marked))], &[])
        };
        let (_dir, store) = store_of(vec![
            (
                "w1",
                vec![
                    spans("s1", vec![span(3, 9, "restaurant")]),
                    // Only one worker on s2: nothing to compare.
                    spans("s2", vec![span(0, 2, "restaurant")]),
                ],
            ),
            (
                "w2",
                vec![spans(
                    "s1",
                    vec![span(3, 9, "restaurant"), span(14, 15, "people")],
                )],
            ),
            ("w3", vec![spans("s1", vec![span(0, 9, "restaurant")])]),
        ])
        .await;
        let report = build_report(&*store, &ReportOptions::default())
            .await
            .expect("report");
        let j = report.judgments.as_ref().expect("judgments section");
        let a = j.span_agreement.as_ref().expect("span agreement");
        // Marked characters of s1: "at" (w3 only; the space after it is left out), "Nandos"
        // (all three), "2" (w2 only).
        let mut units: Vec<Vec<&str>> = vec![vec!["(none)", "(none)", "restaurant"]; 2];
        units.extend(vec![vec!["restaurant"; 3]; 6]);
        units.push(vec!["(none)", "people", "(none)"]);
        assert_eq!(a, &label_agreement(&units, &[]));
        assert_eq!((a.units, a.raters_min, a.raters_max), (9, 3, 3));
        assert_eq!(
            a.categories.keys().collect::<Vec<_>>(),
            ["(none)", "people", "restaurant"]
        );
        assert_eq!(a.categories["restaurant"].given, 20);
        assert!(j.label_agreement.is_empty(), "span lists are no categories");
        assert!(render_html(&report).contains("spans: slot of each marked character"));
    }

    #[tokio::test]
    async fn a_turn_label_ticked_by_half_the_workers_is_tied_and_left_out() {
        let (_dir, store) = store_of(vec![
            ("w1", vec![judgment("t1", &[], &[&["inform", "request"]])]),
            ("w2", vec![judgment("t1", &[], &[&["inform"]])]),
        ])
        .await;
        let text = export(&*store, "judgments-csv").await;
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header = reader.headers().expect("header").clone();
        let column = header
            .iter()
            .position(|h| h == "adjudicated_turns")
            .expect("adjudicated_turns column");
        let records: Vec<csv::StringRecord> =
            reader.records().map(|r| r.expect("record")).collect();
        assert_eq!(records.len(), 2);
        for record in records {
            let cell: Value = serde_json::from_str(&record[column]).expect("JSON cell");
            assert_eq!(
                cell,
                json!([{"dialogue": "d-t1", "turn": 0, "labels": ["inform"],
                        "tied": ["request"], "of": 2}])
            );
        }
    }
}
