//! `datasets:` in a study file: the loader checks every mapping target against the format's
//! vocabulary (MultiWOZ 2.1's acts, act slots and domains, CrossWOZ's, Taskmaster-1's scenario
//! domains, the ConvLab-3 intents) and every mapped source against the study (its states,
//! labels, fixed options, tables and columns), each problem at its line and column; the
//! built-in dialogue studies ship mappings that load.

use std::path::{Path, PathBuf};

use wozkit_core::datasets::TM1_DOMAINS;
use wozkit_core::load::{StudySource, builtin_names, load_builtin, load_text};

fn restaurant_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("studies/restaurant-booking")
}

fn restaurant_text() -> String {
    std::fs::read_to_string(restaurant_dir().join("study.yaml")).expect("study.yaml")
}

/// The problems of the restaurant study with `from` replaced by `to`, as `LINE:COL: message`.
fn problems_with(edits: &[(&str, &str)]) -> (String, Vec<String>) {
    let mut text = restaurant_text();
    for (from, to) in edits {
        assert!(text.contains(from), "the study has {from:?}");
        text = text.replacen(from, to, 1);
    }
    let problems = match load_text("study.yaml", &text, StudySource::Dir(restaurant_dir())) {
        Ok(_) => vec![],
        Err(d) => {
            d.0.iter()
                .map(|d| format!("{}:{}: {}", d.line, d.col, d.message))
                .collect()
        }
    };
    (text, problems)
}

/// `LINE:COL` of the first `needle` from the first `after` on in `text` (1-based, in
/// characters): where the loader reports a problem, the key of the value at fault.
fn at(text: &str, after: &str, needle: &str) -> String {
    let start = text.find(after).expect("anchor");
    let byte = start + text[start..].find(needle).expect("needle");
    let line = text[..byte].matches('\n').count() + 1;
    let line_start = text[..byte].rfind('\n').map_or(0, |i| i + 1);
    let col = text[line_start..byte].chars().count() + 1;
    format!("{line}:{col}")
}

#[test]
fn the_builtin_dialogue_studies_ship_mappings_that_load() {
    let restaurant = load_builtin("restaurant-booking").unwrap_or_else(|e| panic!("{e}"));
    let d = &restaurant.study.datasets;
    let multiwoz = d.multiwoz.as_ref().expect("a MultiWOZ mapping");
    assert_eq!(
        multiwoz.domains.get("restaurant").map(String::as_str),
        Some("restaurant")
    );
    assert!(multiwoz.acts.contains_key("inform_results"));
    let tm = d.taskmaster1.as_ref().expect("a Taskmaster-1 mapping");
    assert_eq!(tm.instruction_id(), "restaurant-table-1");
    assert!(TM1_DOMAINS.iter().any(|(name, _)| *name == tm.domain));
    let crosswoz = load_builtin("crosswoz-demo").unwrap_or_else(|e| panic!("{e}"));
    let acts = &crosswoz
        .study
        .datasets
        .crosswoz
        .as_ref()
        .expect("a CrossWOZ mapping")
        .acts;
    assert!(acts.contains_key("inform_restaurant") && acts.contains_key("goodbye"));
    for name in builtin_names() {
        load_builtin(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn a_mapping_onto_an_act_slot_or_domain_the_format_lacks_is_refused_where_written() {
    let (text, p) = problems_with(&[
        (
            "request_cuisine: { act: Restaurant-Request, slot: Food }",
            "request_cuisine: { act: Restaurant-Ask, slot: Cuisine }",
        ),
        (
            "domains: { restaurant: restaurant }",
            "domains: { restaurant: restaurants }",
        ),
        (
            "inform_time_unavailable: Booking-NoBook",
            "inform_time_unavailable: general-no",
        ),
        (
            "taskmaster1: { domain: restaurant-table",
            "taskmaster1: { domain: restaurant",
        ),
    ]);
    let cuisine = "request_cuisine: { act: Restaurant-Ask";
    let expected = [
        format!(
            "{}: `restaurants` is not a MultiWOZ 2.1 domain",
            at(&text, "domains: { restaurant: restaurants", "restaurant")
        ),
        format!(
            "{}: `Restaurant-Ask` is not a MultiWOZ 2.1 act",
            at(&text, cuisine, "act")
        ),
        format!(
            "{}: `Cuisine` is not a slot of MultiWOZ 2.1's acts",
            at(&text, cuisine, "slot")
        ),
        format!(
            "{}: `general-no` is not a MultiWOZ 2.1 act",
            at(&text, "inform_time_unavailable: general-no", "inform")
        ),
        format!(
            "{}: `restaurant` is not a Taskmaster-1 scenario domain",
            at(&text, "taskmaster1: { domain: restaurant", "domain")
        ),
    ];
    assert_eq!(p, expected, "{p:#?}");
}

#[test]
fn a_mapped_state_or_column_the_study_lacks_is_refused_where_written() {
    let (text, p) = problems_with(&[
        (
            "      goodbye: general-bye\n",
            "      goodbye: general-bye\n      farewell: general-bye\n",
        ),
        (
            "{ act: Restaurant-Inform, slot: Addr, column: address }",
            "{ act: Restaurant-Inform, slot: Addr, column: street }",
        ),
        (
            "slots: { name: name, cuisine: food,",
            "slots: { name: name, kitchen: food,",
        ),
    ]);
    let expected = [
        format!(
            "{}: `kitchen` is not a column of the study's database",
            at(&text, "slots: { name: name, kitchen", "kitchen")
        ),
        format!(
            "{}: `street` is not a column of the study's database",
            at(&text, "slot: Addr, column: street", "column")
        ),
        format!(
            "{}: `farewell` is not a wizard state, state label or fixed option of the study",
            at(&text, "      farewell:", "farewell")
        ),
    ];
    assert_eq!(p, expected, "{p:#?}");
}

#[test]
fn crosswoz_and_convlab3_mappings_are_checked_against_their_vocabularies() {
    let mapping = "datasets:\n  crosswoz:\n    acts:\n      greet: general-hello\n      inform_results:\n        - { act: 餐馆-Inform, slot: 名称, column: name }\n        - { act: 餐馆-Inform, slot: 门票, column: name }\n        - { act: 饭店-Inform, slot: 名称, column: name }\n  convlab3:\n    acts:\n      greet: general-greet\n      goodbye: restaurant-goodbye\n";
    let (text, p) = problems_with(&[(
        "datasets:\n  multiwoz:\n",
        &format!("{mapping}  multiwoz:\n"),
    )]);
    let expected = [
        format!(
            "{}: `general-hello` is not a CrossWOZ act",
            at(&text, "greet: general-hello", "greet")
        ),
        format!(
            "{}: `门票` is not a slot of CrossWOZ's 餐馆 acts",
            at(&text, "slot: 门票", "slot")
        ),
        format!(
            "{}: `饭店-Inform` is not a CrossWOZ act",
            at(&text, "{ act: 饭店", "act")
        ),
        format!(
            "{}: `restaurant-goodbye` is not an act of the ConvLab-3 unified format",
            at(&text, "goodbye: restaurant-goodbye", "goodbye")
        ),
    ];
    assert_eq!(p, expected, "{p:#?}");
}

/// The built-in span study with its slot `restaurant_reservation.num.guests` renamed `guests`
/// and `mapping` appended.
fn spans_study_with(mapping: &str) -> (String, Result<wozkit_core::load::LoadedStudy, String>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("studies/self-dialog-spans");
    let text = std::fs::read_to_string(dir.join("study.yaml")).expect("study.yaml");
    let slot = "      - restaurant_reservation.num.guests\n";
    assert!(text.contains(slot), "the span study lists the slot");
    let text = format!("{}{mapping}", text.replacen(slot, "      - guests\n", 1));
    let loaded = load_text("study.yaml", &text, StudySource::Dir(dir)).map_err(|d| {
        d.0.iter()
            .map(|d| format!("{}:{}: {}", d.line, d.col, d.message))
            .collect::<Vec<_>>()
            .join("\n")
    });
    (text, loaded)
}

#[test]
fn taskmaster1_segment_names_are_mapped_from_span_slots_and_checked() {
    let good = "datasets:\n  taskmaster1:\n    domain: restaurant-table\n    segments:\n      guests: restaurant_reservation.num.guests\n";
    let (_, loaded) = spans_study_with(good);
    let study = loaded.unwrap_or_else(|e| panic!("{e}"));
    let tm = study.study.datasets.taskmaster1.as_ref().expect("mapping");
    assert_eq!(
        tm.segments.get("guests").map(String::as_str),
        Some("restaurant_reservation.num.guests")
    );

    let bad = "datasets:\n  taskmaster1:\n    domain: restaurant-table\n    segments:\n      guests: restaurant_reservation.num.people\n      tables: restaurant_reservation.type.seating\n";
    let (text, loaded) = spans_study_with(bad);
    let problems = loaded.expect_err("refused");
    let expected = [
        format!(
            "{}: `restaurant_reservation.num.people` is not a Taskmaster-1 annotation name (`<api id>.<argument>`)",
            at(
                &text,
                "      guests: restaurant_reservation.num.people",
                "guests"
            )
        ),
        format!(
            "{}: `tables` is not a span slot of this study",
            at(&text, "      tables: restaurant", "tables")
        ),
    ];
    assert_eq!(problems, expected.join("\n"));
    assert!(wozkit_core::datasets::is_tm1_annotation(
        "pizza_ordering.type.topping.accept"
    ));
    assert!(!wozkit_core::datasets::is_tm1_annotation(
        "pizza_ordering.type"
    ));
}
