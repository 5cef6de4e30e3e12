//! The question model: a posted form gives typed answers or one fault per question, never a
//! panic; valid answers of every kind are accepted as they were given; shuffled orders are
//! drawn from the seed and stored with the answers.

use indexmap::IndexMap;
use proptest::prelude::*;
use serde_json::json;
use wozkit_core::questions::{Answer, Answers, Fault, Question, Single, check};

/// One question of each kind, with bounds.
fn questions() -> Vec<Question> {
    serde_json::from_value(json!([
        {"id": "mood", "text": "How do you feel?", "kind": "likert", "points": 5,
         "low": "Bad", "mid": "So-so", "high": "Good"},
        {"id": "colour", "text": "Favourite colour?", "kind": "choice",
         "options": ["red", "green", "blue"], "shuffle": true},
        {"id": "tools", "text": "Which tools?", "kind": "multiple",
         "options": ["map", "radio", "robot", "camera", "drone"], "min_choices": 1, "max_choices": 3},
        {"id": "why", "text": "Why?", "kind": "text", "min_words": 2, "max_words": 10},
        {"id": "age", "text": "Your age?", "kind": "number", "min": 18, "max": 120, "integer": true},
        {"id": "offset", "text": "An offset?", "kind": "number", "min": -1.5, "max": 2.5,
         "required": false},
        {"id": "sus", "text": "About the system", "kind": "matrix", "points": 5, "shuffle": true,
         "rows": [{"id": "easy", "text": "It was easy"},
                  {"id": "complex", "text": "It was complex", "reverse": true},
                  {"id": "again", "text": "I would use it again"}]},
        {"id": "rank", "text": "Rank these", "kind": "ranking",
         "options": ["speed", "safety", "cost", "comfort"], "shuffle": true},
        {"id": "note", "text": "Anything else?", "kind": "comment"}
    ]))
    .expect("the fixture questions deserialise")
}

fn form(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A complete valid form for [`questions`].
fn valid() -> Vec<(String, String)> {
    form(&[
        ("mood", "4"),
        ("colour", "green"),
        ("tools", "map"),
        ("tools", "drone"),
        ("why", "because it worked"),
        ("age", "33"),
        ("sus.easy", "5"),
        ("sus.complex", "2"),
        ("sus.again", "4"),
        ("rank.0", "2"),
        ("rank.1", "1"),
        ("rank.2", "4"),
        ("rank.3", "3"),
    ])
}

/// What is wrong with `question`'s answer, if the form was refused for it.
fn fault(fields: &[(String, String)], question: &str) -> Option<Fault> {
    check(&questions(), fields, 7)
        .err()?
        .into_iter()
        .find(|p| p.question == question)
        .map(|p| p.fault)
}

/// `valid()` with `name`'s values replaced by `values`.
fn with(name: &str, values: &[&str]) -> Vec<(String, String)> {
    let mut f: Vec<(String, String)> = valid().into_iter().filter(|(n, _)| n != name).collect();
    f.extend(values.iter().map(|v| (name.to_string(), v.to_string())));
    f
}

#[test]
fn a_valid_form_gives_typed_answers_and_the_orders_shown() {
    let answers = check(&questions(), &valid(), 7).expect("the form is valid");
    let v = &answers.values;
    assert_eq!(v["mood"], Answer::Point(4));
    assert_eq!(v["colour"], Answer::Choice("green".into()));
    assert_eq!(
        v["tools"],
        Answer::Choices(vec!["map".into(), "drone".into()])
    );
    assert_eq!(v["why"], Answer::Text("because it worked".into()));
    assert_eq!(v["age"], Answer::Number(33.0));
    assert!(!v.contains_key("offset") && !v.contains_key("note"));
    let rows: IndexMap<String, u32> = [("easy", 5), ("complex", 2), ("again", 4)]
        .into_iter()
        .map(|(k, p)| (k.to_string(), p))
        .collect();
    assert_eq!(v["sus"], Answer::Rows(rows));
    let ranking = ["safety", "speed", "comfort", "cost"]
        .map(String::from)
        .to_vec();
    assert_eq!(v["rank"], Answer::Ranking(ranking));
    // The shuffled questions, each with the order of seed 7, and no other.
    let qs = questions();
    let shown: Vec<&str> = answers.shown.keys().map(String::as_str).collect();
    assert_eq!(shown, ["colour", "sus", "rank"]);
    let colour = &qs[1];
    let expected: Vec<String> = colour
        .shown_order(7)
        .into_iter()
        .map(|i| colour.options[i].clone())
        .collect();
    assert_eq!(answers.shown["colour"], expected);
}

#[test]
fn the_event_holds_one_key_per_item_and_the_orders_shown() {
    let qs = questions();
    let answers = check(&qs, &valid(), 7).expect("the form is valid");
    let event = answers.to_event(&qs);
    assert_eq!(event["mood"], json!(4));
    assert_eq!(event["tools"], json!(["map", "drone"]));
    assert_eq!(event["age"], json!(33));
    assert_eq!(event["sus.complex"], json!(2));
    assert!(!event.contains_key("sus"));
    assert_eq!(event["rank"], json!(["safety", "speed", "comfort", "cost"]));
    let order = event["rank:shown"].as_array().map(Vec::len);
    assert_eq!(order, Some(4));
    assert_eq!(event["sus:shown"].as_array().map(Vec::len), Some(3));
}

#[test]
fn each_kind_says_what_is_wrong() {
    let whole_age = Fault::Number {
        integer: true,
        min: Some(18.0),
        max: Some(120.0),
    };
    let tools = Fault::Choices {
        min: 1,
        max: Some(3),
    };
    let cases: Vec<(&str, &[&str], &str, Fault)> = vec![
        ("mood", &[], "mood", Fault::Missing),
        ("mood", &["6"], "mood", Fault::Point { points: 5 }),
        ("mood", &["2", "3"], "mood", Fault::Several(Single::Point)),
        ("colour", &["purple"], "colour", Fault::NotAnOption),
        (
            "colour",
            &["red", "blue"],
            "colour",
            Fault::Several(Single::Option),
        ),
        ("tools", &[], "tools", tools.clone()),
        ("tools", &["map", "radio", "robot", "drone"], "tools", tools),
        ("tools", &["map", "laser"], "tools", Fault::NotShown),
        (
            "why",
            &["yes"],
            "why",
            Fault::Words {
                min: Some(2),
                max: Some(10),
                wrote: 1,
            },
        ),
        (
            "why",
            &["a b", "c d"],
            "why",
            Fault::Several(Single::Answer),
        ),
        ("age", &["old"], "age", whole_age.clone()),
        ("age", &["33.5"], "age", whole_age.clone()),
        ("age", &["121"], "age", whole_age.clone()),
        ("age", &["NaN"], "age", whole_age),
        ("age", &["20", "30"], "age", Fault::Several(Single::Number)),
        (
            "offset",
            &["3"],
            "offset",
            Fault::Number {
                integer: false,
                min: Some(-1.5),
                max: Some(2.5),
            },
        ),
        ("sus.again", &[], "sus", Fault::RowsLeft { left: 1 }),
        ("sus.again", &["0"], "sus", Fault::RowPoint { points: 5 }),
        (
            "sus.again",
            &["1", "2"],
            "sus",
            Fault::Several(Single::RowPoint),
        ),
        ("rank.3", &[], "rank", Fault::RankAll { options: 4 }),
        ("rank.3", &["2"], "rank", Fault::RankEach { options: 4 }),
        ("rank.3", &["9"], "rank", Fault::RankEach { options: 4 }),
        ("rank.3", &["3", "4"], "rank", Fault::Several(Single::Rank)),
    ];
    for (name, values, question, expected) in cases {
        assert_eq!(
            fault(&with(name, values), question),
            Some(expected),
            "{name} = {values:?}"
        );
    }
    let long = "word ".repeat(500);
    assert_eq!(
        fault(&with("note", &[&long]), "note"),
        Some(Fault::TooLong { max: 2000 })
    );
}

#[test]
fn every_problem_is_reported_at_once_and_optional_questions_may_be_skipped() {
    let problems = check(&questions(), &[], 7).err().unwrap_or_default();
    let ids: Vec<&str> = problems.iter().map(|p| p.question.as_str()).collect();
    assert_eq!(
        ids,
        ["mood", "colour", "tools", "why", "age", "sus", "rank"]
    );
    assert_eq!(
        problems[2].fault,
        Fault::Choices {
            min: 1,
            max: Some(3)
        }
    );
    assert_eq!(problems[5].fault, Fault::MissingRows);
    assert_eq!(problems[6].fault, Fault::MissingRanks);
}

#[test]
fn blank_and_padded_values_count_as_typed() {
    let answers = check(&questions(), &with("mood", &[" 4 "]), 7).expect("valid");
    assert_eq!(answers.values["mood"], Answer::Point(4));
    assert_eq!(fault(&with("mood", &["   "]), "mood"), Some(Fault::Missing));
}

/// Valid answers to [`questions`], drawn at random.
fn valid_answers() -> impl Strategy<Value = Answers> {
    let qs = questions();
    let word = "[a-zA-Zéß0-9]{1,8}";
    (
        1..=5u32,
        prop::sample::select(qs[1].options.clone()),
        prop::sample::subsequence(qs[2].options.clone(), 1..=3),
        prop::collection::vec(word, 2..=10),
        18..=120i32,
        prop::option::of(-1.5f64..=2.5),
        prop::collection::vec(1..=5u32, 3),
        Just(qs[7].options.clone()).prop_shuffle(),
        prop::option::of(prop::collection::vec(word, 1..50)),
    )
        .prop_map(
            move |(mood, colour, tools, why, age, offset, sus, rank, note)| {
                let mut values = IndexMap::new();
                values.insert("mood".into(), Answer::Point(mood));
                values.insert("colour".into(), Answer::Choice(colour));
                values.insert("tools".into(), Answer::Choices(tools));
                values.insert("why".into(), Answer::Text(why.join(" ")));
                values.insert("age".into(), Answer::Number(f64::from(age)));
                if let Some(o) = offset {
                    values.insert("offset".into(), Answer::Number(o));
                }
                let rows = ["easy", "complex", "again"]
                    .iter()
                    .map(|r| r.to_string())
                    .zip(sus)
                    .collect();
                values.insert("sus".into(), Answer::Rows(rows));
                values.insert("rank".into(), Answer::Ranking(rank));
                if let Some(n) = note {
                    values.insert("note".into(), Answer::Text(n.join(" ")));
                }
                Answers {
                    values,
                    shown: IndexMap::new(),
                }
            },
        )
}

/// Form field names worth trying: every real one, and some that are close.
fn names() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "mood",
            "colour",
            "tools",
            "why",
            "age",
            "offset",
            "sus",
            "sus.easy",
            "sus.complex",
            "sus.again",
            "sus.nope",
            "rank",
            "rank.0",
            "rank.1",
            "rank.2",
            "rank.3",
            "rank.4",
            "note",
            "step",
        ])
        .prop_map(String::from),
        any::<String>(),
    ]
}

/// Values worth trying: numbers near the bounds, option texts, anything.
fn raw_values() -> impl Strategy<Value = String> {
    prop_oneof![
        (-3i64..130).prop_map(|n| n.to_string()),
        prop::sample::select(vec![
            "red", "map", "drone", "speed", "1e400", "-0", "inf", "NaN", "4.0", " 2 ", "",
        ])
        .prop_map(String::from),
        any::<f64>().prop_map(|f| f.to_string()),
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_form_gives_answers_or_messages_never_a_panic(
        fields in prop::collection::vec((names(), raw_values()), 0..40),
        seed in any::<u64>(),
    ) {
        let qs = questions();
        match check(&qs, &fields, seed) {
            Ok(answers) => {
                // Whatever was accepted is within its question's bounds.
                if let Some(Answer::Point(p)) = answers.values.get("mood") {
                    prop_assert!((1..=5).contains(p));
                }
                if let Some(Answer::Choices(c)) = answers.values.get("tools") {
                    prop_assert!((1..=3).contains(&c.len()));
                }
                if let Some(Answer::Number(n)) = answers.values.get("age") {
                    prop_assert!((18.0..=120.0).contains(n) && n.fract() == 0.0);
                }
                prop_assert_eq!(answers.shown.len(), 3);
            }
            Err(problems) => {
                prop_assert!(!problems.is_empty());
                prop_assert!(problems.iter().all(|p| qs.iter().any(|q| q.id == p.question)));
            }
        }
    }

    #[test]
    fn valid_answers_are_accepted_as_given(answers in valid_answers(), seed in any::<u64>()) {
        let qs = questions();
        let checked = check(&qs, &answers.to_form(&qs), seed);
        prop_assert!(checked.is_ok(), "{:?}", checked);
        let checked = checked.unwrap_or_default();
        prop_assert_eq!(&checked.values, &answers.values);
        // The same seed shows the same orders.
        let again = check(&qs, &answers.to_form(&qs), seed).unwrap_or_default();
        prop_assert_eq!(checked.shown, again.shown);
    }
}
