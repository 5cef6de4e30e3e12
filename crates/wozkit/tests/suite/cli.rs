//! The study commands of the CLI, run as a user would run them.

use crate::common;

use common::wozkit;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("wozkit-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn studies_lists_the_builtin_studies_demo_first() {
    let (code, out, _) = wozkit(&["studies"]);
    assert_eq!(code, 0);
    let names: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names.first(), Some(&"offshore-emergency"));
    assert!(names.len() >= 2, "{out}");
}

#[test]
fn exported_study_validates_and_a_broken_copy_reports_file_line_col() {
    let dir = temp_dir("export");
    let (code, _, err) = wozkit(&[
        "studies",
        "export",
        "offshore-emergency",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = wozkit(&["validate", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    // Break it: a transition to a missing state and an unknown key.
    let file = dir.join("study.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let broken = text.replacen("initial: true", "initial: true\n    colour: red", 1);
    std::fs::write(&file, broken).unwrap();
    let (code, _, err) = wozkit(&["validate", dir.to_str().unwrap()]);
    assert_eq!(code, 1);
    let first = err.lines().next().unwrap_or_default();
    let parts: Vec<&str> = first.splitn(4, ':').collect();
    assert!(parts[0].ends_with("study.yaml"), "{first}");
    assert!(
        parts[1].parse::<u32>().is_ok() && parts[2].parse::<u32>().is_ok(),
        "{first}"
    );
    assert!(first.contains("unknown key `colour`"), "{first}");
    // Exporting into a non-empty folder is refused.
    let (code, _, err) = wozkit(&[
        "studies",
        "export",
        "offshore-emergency",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("not empty"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn simulate_json_has_the_documented_keys() {
    for study in ["offshore-emergency", "restaurant-booking"] {
        let (code, out, err) = wozkit(&[
            "simulate",
            study,
            "--sessions",
            "200",
            "--seed",
            "5",
            "--json",
        ]);
        assert_eq!(code, 0, "{study}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
        for key in [
            "sessions",
            "goal_reached",
            "states_covered",
            "states_total",
            "transitions_covered",
            "transitions_total",
            "dead_ends",
        ] {
            assert!(v.get(key).is_some(), "{study}: missing {key}");
        }
        assert_eq!(v["sessions"], 200);
        assert!(
            v["goal_reached"].as_u64().unwrap() > 0,
            "{study}: no simulated session reached the goal"
        );
    }
}

#[test]
fn evaluation_studies_are_listed_validated_and_refused_by_simulate() {
    let (code, out, _) = wozkit(&["studies"]);
    assert_eq!(code, 0);
    let kind_of = |name: &str| {
        out.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.first() == Some(&name))
            .and_then(|w| w.get(1).map(|k| k.to_string()))
    };
    assert_eq!(kind_of("offshore-emergency").as_deref(), Some("dialogue"));
    assert_eq!(
        kind_of("acute-eval").as_deref(),
        Some("evaluation"),
        "{out}"
    );
    assert_eq!(
        kind_of("rate-dialogues").as_deref(),
        Some("evaluation"),
        "{out}"
    );

    let (code, out, err) = wozkit(&["validate", "acute-eval"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("evaluation: 12 comparison items judged 3 times each, 2 gold"),
        "{out}"
    );

    // No dialogue states: a clear refusal, not a panic.
    let (code, _, err) = wozkit(&["simulate", "acute-eval", "--sessions", "10"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no dialogue room"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn graph_in_every_format() {
    let (code, svg, _) = wozkit(&["graph", "offshore-emergency", "--format", "svg"]);
    assert_eq!(code, 0);
    assert!(
        svg.contains("<svg") && svg.contains("intro_hello"),
        "svg lacks the states"
    );
    let (_, dot, _) = wozkit(&["graph", "offshore-emergency", "--format", "dot"]);
    assert!(dot.starts_with("digraph") && dot.contains("->"));
    let (_, mermaid, _) = wozkit(&["graph", "offshore-emergency", "--format", "mermaid"]);
    assert!(mermaid.starts_with("flowchart TD") && mermaid.contains("-->"));
}

#[test]
fn schema_is_json() {
    let (code, out, _) = wozkit(&["schema"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["properties"]["states"].is_object());
}

#[test]
fn unknown_study_is_a_clear_error() {
    let (code, _, err) = wozkit(&["validate", "no-such-study"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no study file, folder or built-in study named `no-such-study`"),
        "{err}"
    );
}

#[test]
fn lab_links_are_signed_with_the_data_directorys_key() {
    let dir = temp_dir("lab-links");
    let data = dir.to_str().unwrap();
    let args = [
        "lab-links",
        "--data",
        data,
        "--study",
        "tiny",
        "--url",
        "https://study.example.org/",
        "--role",
        "wizard",
        "ann",
        "bo b",
    ];
    // Nothing to sign with before the server has run once on the data.
    let (code, _, err) = wozkit(&args);
    assert_ne!(code, 0);
    assert!(
        err.contains("nothing was stored in this data directory yet"),
        "{err}"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let key = rt.block_on(async {
        use wozkit_store::Store;
        let store = wozkit_store::SqliteStore::open_dir(&dir).await.unwrap();
        let key = wozkit_data::completion::CodeKey::load_or_create(&store)
            .await
            .unwrap();
        store.close().await;
        key
    });
    let (code, out, err) = wozkit(&args);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "https://study.example.org/join?study=tiny&participant=ann&role=wizard&sig={}",
                key.lab_signature("tiny", "ann")
            ),
            format!(
                "https://study.example.org/join?study=tiny&participant=bo%20b&role=wizard&sig={}",
                key.lab_signature("tiny", "bo b")
            ),
        ]
    );
    let (code, _, err) = wozkit(&[
        "lab-links",
        "--data",
        data,
        "--study",
        "tiny",
        "--role",
        "boss",
        "x",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("`user` or `wizard`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
