//! The built-in evaluation studies `acute-eval` and `rate-dialogues`: they load without
//! problems, form the items their comments promise, keep known-answer dialogues out of the
//! ordinary items, and their dialogues have the shape the studies describe.

use std::collections::{BTreeSet, HashSet};

use wozkit_core::evaluation::{EvalTask, Evaluation, ItemSpec};
use wozkit_core::event::ItemPool;
use wozkit_core::expr::{Vars, json_to_cel};
use wozkit_core::load::{LoadedStudy, builtin_names, load_builtin};
use wozkit_core::model::PageKind;

/// Loads a built-in study, printing every diagnostic when it does not load.
fn load(name: &str) -> LoadedStudy {
    load_builtin(name).unwrap_or_else(|d| panic!("built-in study `{name}` does not load:\n{d}"))
}

fn evaluation(study: &LoadedStudy) -> &Evaluation {
    study
        .study
        .evaluation
        .as_ref()
        .unwrap_or_else(|| panic!("`{}` has no evaluation section", study.study.id))
}

/// The items of one pool.
fn pool(ev: &Evaluation, pool: ItemPool) -> Vec<ItemSpec> {
    ev.items().into_iter().filter(|i| i.pool == pool).collect()
}

/// Dialogue ids named by onboarding and gold items, read from the study itself.
fn known_answer_dialogues(ev: &Evaluation) -> HashSet<String> {
    let onboarding = ev.onboarding.iter().flat_map(|o| o.items.iter());
    let gold = ev.gold.iter().flat_map(|g| g.items.iter());
    onboarding
        .chain(gold)
        .flat_map(|k| [&k.a, &k.b, &k.dialogue])
        .flatten()
        .cloned()
        .collect()
}

fn assert_no_known_answer_dialogue_is_an_ordinary_item(ev: &Evaluation) {
    let known = known_answer_dialogues(ev);
    assert!(!known.is_empty(), "no onboarding or gold dialogues at all");
    for item in pool(ev, ItemPool::Item) {
        for d in &item.dialogues {
            assert!(
                !known.contains(d),
                "ordinary item `{}` uses known-answer dialogue `{d}`",
                item.id
            );
        }
    }
}

/// Every dialogue has `min..=max` turns, alternating `user` and `bot` from `user`.
fn assert_turns(ev: &Evaluation, min: usize, max: usize) {
    for d in &ev.dialogues {
        assert!(
            (min..=max).contains(&d.turns.len()),
            "dialogue `{}` has {} turns, not {min} to {max}",
            d.id,
            d.turns.len()
        );
        for (i, t) in d.turns.iter().enumerate() {
            let expected = if i % 2 == 0 { "user" } else { "bot" };
            assert_eq!(t.speaker, expected, "dialogue `{}`, turn {i}", d.id);
            assert!(
                !t.text.trim().is_empty(),
                "dialogue `{}`, turn {i} is empty",
                d.id
            );
        }
    }
}

fn user_page_kinds(study: &LoadedStudy) -> Vec<PageKind> {
    study.study.flow.user.iter().map(|p| p.kind).collect()
}

#[test]
fn both_studies_are_listed_as_builtin() {
    let names = builtin_names();
    for name in ["acute-eval", "rate-dialogues"] {
        assert!(
            names.iter().any(|n| n == name),
            "{name} missing from {names:?}"
        );
    }
}

#[test]
fn acute_eval_loads_and_forms_twelve_pairs_and_two_gold_pairs() {
    let study = load("acute-eval");
    let ev = evaluation(&study);
    assert_eq!(ev.task, EvalTask::Compare);
    assert_eq!(
        pool(ev, ItemPool::Item).len(),
        12,
        "3 system pairs x 4 scenarios"
    );
    assert_eq!(pool(ev, ItemPool::Gold).len(), 2);
    assert_eq!(
        (ev.judgments_per_item, ev.items_per_worker, ev.lease_s),
        (3, 4, 600)
    );
    assert!(ev.justification.required && ev.justification.min_words == 3);
    assert!(ev.no_items.code);
    let onboarding = ev.onboarding.as_ref().expect("an onboarding pair");
    assert!(!onboarding.fail.code && onboarding.pass_mark == 1.0);
}

#[test]
fn every_acute_eval_pair_compares_two_systems_in_one_scenario_once() {
    let study = load("acute-eval");
    let ev = evaluation(&study);
    let mut seen: BTreeSet<(String, String, String)> = BTreeSet::new();
    for item in pool(ev, ItemPool::Item) {
        let [a, b] = item.dialogues.as_slice() else {
            panic!("item `{}` is not a pair: {:?}", item.id, item.dialogues);
        };
        let (da, db) = (
            ev.dialogue(a).expect("a known dialogue"),
            ev.dialogue(b).expect("a known dialogue"),
        );
        assert_ne!(
            da.system, db.system,
            "item `{}` compares one system",
            item.id
        );
        assert!(da.scenario.is_some(), "dialogue `{a}` has no scenario");
        assert_eq!(
            da.scenario, db.scenario,
            "item `{}` mixes scenarios",
            item.id
        );
        let mut systems = [da.system.clone(), db.system.clone()];
        systems.sort();
        let [s1, s2] = systems;
        let key = (da.scenario.clone().unwrap_or_default(), s1, s2);
        assert!(seen.insert(key.clone()), "pair {key:?} is formed twice");
    }
    // Every pair of the three systems, in each of the four scenarios.
    let scenarios: BTreeSet<&str> = seen.iter().map(|(s, _, _)| s.as_str()).collect();
    let system_pairs: BTreeSet<(&str, &str)> = seen
        .iter()
        .map(|(_, a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(scenarios.len(), 4, "{scenarios:?}");
    assert_eq!(system_pairs.len(), 3, "{system_pairs:?}");
}

#[test]
fn acute_eval_known_answers_are_consistent() {
    let study = load("acute-eval");
    let ev = evaluation(&study);
    assert_no_known_answer_dialogue_is_an_ordinary_item(ev);
    let gold = ev.gold.as_ref().expect("gold pairs");
    assert_eq!((gold.rate, gold.max_failures), (0.25, Some(1)));
    let no_answers = indexmap::IndexMap::new();
    for k in gold
        .items
        .iter()
        .chain(ev.onboarding.iter().flat_map(|o| o.items.iter()))
    {
        let better = k.better.as_deref().expect("a better dialogue");
        let worse = [&k.a, &k.b]
            .into_iter()
            .flatten()
            .find(|d| d.as_str() != better)
            .expect("the other dialogue");
        assert!(k.correct(Some(better), &no_answers), "{}", k.id());
        assert!(!k.correct(Some(worse), &no_answers), "{}", k.id());
    }
}

#[test]
fn acute_eval_dialogues_alternate_and_are_five_to_eight_turns() {
    let study = load("acute-eval");
    assert_turns(evaluation(&study), 5, 8);
}

#[test]
fn acute_eval_flow_has_its_pages_and_the_comment_box_branches_on_an_earlier_answer() {
    let study = load("acute-eval");
    use PageKind::*;
    assert_eq!(
        user_page_kinds(&study),
        [
            Consent,
            Instructions,
            Questions,
            Onboarding,
            Compare,
            Questions,
            Completion
        ]
    );
    assert!(study.study.flow.wizard.is_empty());
    assert_eq!(
        study.study.flow.completion_url.as_deref(),
        Some("https://app.prolific.com/submissions/complete?cc={code}")
    );
    // The second questions page has a condition; evaluate it both ways.
    let i = 5;
    let cond = study.compiled.page_when[0][i]
        .as_ref()
        .expect("the closing questions page has a `when`");
    let holds = |use_: &str| {
        let mut vars = Vars::default();
        vars.set(
            "answers",
            json_to_cel(&serde_json::json!({"chatbot_use": use_})),
        );
        cond.holds(&vars)
    };
    assert!(holds("Every day"));
    assert!(!holds("Never"));
}

#[test]
fn rate_dialogues_loads_and_rates_eight_dialogues_with_one_gold() {
    let study = load("rate-dialogues");
    let ev = evaluation(&study);
    assert_eq!(ev.task, EvalTask::Rate);
    let items = pool(ev, ItemPool::Item);
    assert_eq!(items.len(), 8);
    assert!(items.iter().all(|i| i.dialogues.len() == 1));
    assert_eq!(pool(ev, ItemPool::Gold).len(), 1);
    assert_eq!((ev.judgments_per_item, ev.items_per_worker), (3, 3));
    assert!(ev.onboarding.is_none());
    let systems: BTreeSet<&str> = items
        .iter()
        .map(|i| {
            ev.dialogue(&i.dialogues[0])
                .expect("a known dialogue")
                .system
                .as_str()
        })
        .collect();
    assert!((2..=3).contains(&systems.len()), "{systems:?}");
    assert_no_known_answer_dialogue_is_an_ordinary_item(ev);
}

#[test]
fn rate_dialogues_gold_expects_low_coherence() {
    let study = load("rate-dialogues");
    let ev = evaluation(&study);
    let gold = ev.gold.as_ref().expect("a gold dialogue");
    assert_eq!((gold.rate, gold.max_failures), (0.2, Some(1)));
    let k = &gold.items[0];
    let answers = |c: u32| {
        let mut a = indexmap::IndexMap::new();
        a.insert("coherence".to_string(), serde_json::json!(c));
        a
    };
    assert!(k.correct(None, &answers(1)));
    assert!(k.correct(None, &answers(2)));
    assert!(!k.correct(None, &answers(3)));
    assert!(!k.correct(None, &answers(5)));
}

#[test]
fn rate_dialogues_asks_three_scales_a_comment_and_turn_labels() {
    let study = load("rate-dialogues");
    let ev = evaluation(&study);
    let scales: Vec<&str> = ev
        .questions
        .iter()
        .filter(|q| q.kind.is_scale())
        .map(|q| q.id.as_str())
        .collect();
    assert_eq!(scales, ["coherence", "helpfulness", "fluency"]);
    assert!(
        ev.questions
            .iter()
            .filter(|q| q.kind.is_scale())
            .all(|q| q.points() == 5 && q.low.is_some() && q.high.is_some())
    );
    assert!(ev.questions.iter().any(|q| !q.is_required()));
    let annotate = ev.annotate.as_ref().expect("per-turn labels");
    assert_eq!(annotate.speaker, "bot");
    assert!(annotate.options.len() >= 3 && annotate.prompt.is_some());
    use PageKind::*;
    assert_eq!(
        user_page_kinds(&study),
        [Consent, Instructions, Rate, Questions, Completion]
    );
    assert_turns(ev, 4, 8);
}
