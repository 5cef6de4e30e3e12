//! The statistics against reference values from SciPy, statsmodels, krippendorff and choix
//! (`tests/reference/make_golden.py` writes `tests/reference/golden.json`).

use crate::common;

use serde_json::Value;
use wozkit_data::stats::agreement::{Level, fleiss_kappa, krippendorff_alpha};
use wozkit_data::stats::correlation::{pearson, spearman};
use wozkit_data::stats::hypothesis::{Alternative, binomial_test, mann_whitney_u};
use wozkit_data::stats::rating::{Outcome, bradley_terry, bradley_terry_intervals, elo};
use wozkit_data::stats::{mean, mean_ci, median, mode, sd};
use wozkit_data::{import_votes_csv, votes};

fn golden() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference/golden.json");
    let text = std::fs::read_to_string(path).expect("golden.json (run make_golden.py)");
    serde_json::from_str(&text).expect("golden.json is JSON")
}

fn numbers(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_f64().expect("number"))
        .collect()
}

/// Equal up to a relative `tolerance` (plus 1e-15 absolute, for values near zero).
#[track_caller]
fn close(actual: f64, expected: f64, tolerance: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= tolerance * expected.abs() + 1e-15,
        "{what}: {actual} != {expected} (relative tolerance {tolerance})"
    );
}

fn outcomes(value: &Value) -> Vec<Outcome> {
    value
        .as_array()
        .expect("outcomes")
        .iter()
        .map(|o| Outcome {
            first: o[0].as_str().expect("first").into(),
            second: o[1].as_str().expect("second").into(),
            score: o[2].as_f64().expect("score"),
        })
        .collect()
}

#[test]
fn descriptive_statistics_match_numpy_and_scipy() {
    for case in golden()["descriptive"].as_array().expect("cases") {
        let data = numbers(&case["data"]);
        close(
            mean(&data).expect("mean"),
            case["mean"].as_f64().expect("mean"),
            1e-12,
            "mean",
        );
        match case["sd"].as_f64() {
            Some(expected) => close(sd(&data).expect("sd"), expected, 1e-12, "sd"),
            None => assert_eq!(sd(&data), None),
        }
        assert_eq!(median(&data), case["median"].as_f64(), "median");
        assert_eq!(mode(&data), case["mode"].as_f64(), "mode");
    }
}

#[test]
fn mann_whitney_matches_scipy_asymptotic() {
    for case in golden()["mann_whitney"].as_array().expect("cases") {
        let alternative = match case["alternative"].as_str() {
            Some("greater") => Alternative::Greater,
            Some("less") => Alternative::Less,
            _ => Alternative::TwoSided,
        };
        let result = mann_whitney_u(&numbers(&case["x"]), &numbers(&case["y"]), alternative)
            .expect("defined");
        assert_eq!(result.u, case["u"].as_f64().expect("u"));
        close(
            result.p,
            case["p"].as_f64().expect("p"),
            1e-9,
            "Mann-Whitney p",
        );
    }
}

#[test]
fn correlations_match_scipy() {
    for case in golden()["correlations"].as_array().expect("cases") {
        let (x, y) = (numbers(&case["x"]), numbers(&case["y"]));
        let p = pearson(&x, &y).expect("pearson");
        close(
            p.r,
            case["pearson_r"].as_f64().expect("r"),
            1e-12,
            "pearson r",
        );
        close(
            p.p,
            case["pearson_p"].as_f64().expect("p"),
            1e-9,
            "pearson p",
        );
        let s = spearman(&x, &y).expect("spearman");
        close(
            s.r,
            case["spearman_rho"].as_f64().expect("rho"),
            1e-12,
            "spearman rho",
        );
        close(
            s.p,
            case["spearman_p"].as_f64().expect("p"),
            1e-9,
            "spearman p",
        );
    }
}

#[test]
fn binomial_test_matches_scipy_binomtest() {
    for case in golden()["binomial"].as_array().expect("cases") {
        let k = case["k"].as_u64().expect("k");
        let n = case["n"].as_u64().expect("n");
        let p = binomial_test(k, n, case["p0"].as_f64().expect("p0")).expect("defined");
        close(
            p,
            case["p"].as_f64().expect("p"),
            1e-9,
            &format!("binomtest({k}, {n})"),
        );
    }
}

/// The golden Elo cases: listed outcomes, or (`outcomes` absent) the votes of the full corpus's
/// CSV of that name, read only when `corpus` is given.
fn check_elo_cases(corpus: Option<&common::Corpus>) {
    let mut checked = 0;
    for case in golden()["elo"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let outcomes = match (case.get("outcomes"), corpus) {
            (Some(list), None) => outcomes(list),
            (None, Some(corpus)) => {
                let sessions = import_votes_csv(&corpus.read(&format!("crsarena_dial/{name}")))
                    .expect("votes");
                votes(&sessions)
                    .expect("votes")
                    .iter()
                    .map(Outcome::from)
                    .collect()
            }
            _ => continue,
        };
        let k = case["k"].as_f64().expect("k");
        let ratings = elo(&outcomes, k, case["start"].as_f64().expect("start"));
        let expected = case["ratings"].as_object().expect("ratings");
        assert_eq!(ratings.len(), expected.len(), "{name}");
        for (system, value) in expected {
            close(
                ratings[system.as_str()],
                value.as_f64().expect("rating"),
                1e-12,
                system,
            );
        }
        checked += 1;
    }
    assert!(checked > 0, "golden.json has no Elo case of this kind");
}

#[test]
fn elo_matches_the_crsarena_analysis_on_synthetic_votes() {
    check_elo_cases(None);
}

#[test]
fn elo_matches_the_crsarena_analysis_on_the_full_corpus_votes() {
    let test = "elo_matches_the_crsarena_analysis_on_the_full_corpus_votes";
    let Some(corpus) = common::Corpus::full(test) else {
        return;
    };
    check_elo_cases(Some(&corpus));
}

#[test]
fn bradley_terry_matches_likelihood_maximisation_and_choix() {
    for case in golden()["bradley_terry"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let outcomes = outcomes(&case["outcomes"]);
        let fit = bradley_terry(&outcomes).expect("fit");
        for (system, value) in case["strength"].as_object().expect("strength") {
            close(
                fit.strength[system.as_str()],
                value.as_f64().expect("strength"),
                1e-6,
                name,
            );
        }
        let intervals = bradley_terry_intervals(&outcomes, 500, 0.95, 7);
        for (system, (lo, hi)) in &intervals {
            let s = fit.strength[system];
            assert!(
                lo < &s && &s < hi,
                "{name}: {system} {s} outside [{lo}, {hi}]"
            );
        }
    }
}

#[test]
fn agreement_matches_krippendorff_and_statsmodels() {
    let golden = golden();
    for case in golden["krippendorff"].as_array().expect("cases") {
        let level = match case["level"].as_str() {
            Some("nominal") => Level::Nominal,
            _ => Level::Interval,
        };
        // The reference takes annotators × units; ours takes each unit's values.
        let rows = case["reliability_data"].as_array().expect("rows");
        let units_count = rows.first().and_then(Value::as_array).map_or(0, Vec::len);
        let units: Vec<Vec<f64>> = (0..units_count)
            .map(|u| rows.iter().filter_map(|row| row[u].as_f64()).collect())
            .collect();
        let alpha = krippendorff_alpha(&units, level).expect("defined");
        close(
            alpha,
            case["alpha"].as_f64().expect("alpha"),
            1e-12,
            "alpha",
        );
    }
    for case in golden["fleiss"].as_array().expect("cases") {
        let table: Vec<Vec<u64>> = case["table"]
            .as_array()
            .expect("table")
            .iter()
            .map(|row| {
                row.as_array()
                    .expect("row")
                    .iter()
                    .map(|c| c.as_u64().expect("count"))
                    .collect()
            })
            .collect();
        close(
            fleiss_kappa(&table).expect("kappa"),
            case["kappa"].as_f64().expect("kappa"),
            1e-12,
            "kappa",
        );
    }
}

#[test]
fn t_interval_matches_scipy() {
    for case in golden()["t_intervals"].as_array().expect("cases") {
        let data = numbers(&case["data"]);
        let level = case["level"].as_f64().expect("level");
        let (low, high) = mean_ci(&data, level).expect("defined");
        close(low, case["low"].as_f64().expect("low"), 1e-9, "low");
        close(high, case["high"].as_f64().expect("high"), 1e-9, "high");
    }
}
