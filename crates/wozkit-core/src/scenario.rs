//! Scenario variation: the variables a study draws once per session (`scenario:` in the study
//! file), what follows from them (world values computed by `set`, robots out of service), and the
//! variants `simulate` plays.
//!
//! The engine draws at `Start`, from the step's seeded RNG, and logs the outcome as one
//! `scenario_drawn` event right after `session_started`; replay applies that event and never
//! draws again, so the log (not the seed) is what a session's world comes from.

use indexmap::IndexMap;
use rand::{Rng, RngExt};

use crate::expr::{Condition, Vars, json_to_cel};
use crate::model::{ScenarioRange, ScenarioVar, Study};

/// Values by variable name.
pub type Values = IndexMap<String, serde_json::Value>;

/// The outcome of one draw, as the `scenario_drawn` event carries it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Drawn {
    /// The drawn variables, in the study's order.
    pub values: Values,
    /// Every world variable the draw sets: the drawn ones, then those computed by `set`.
    pub world: Values,
    /// Ids of the robots out of service.
    pub out_of_service: Vec<String>,
}

/// Removes the study's variation: no draw, no out-of-service robots, actions timed by their
/// `duration` again. The study then plays the one variant its `world.variables` declare (the
/// defaults), which suits tests that script a session against known places and times.
pub fn pin_defaults(study: &mut Study) {
    study.scenario = Default::default();
    for action in &mut study.actions {
        action.distance = None;
    }
}

/// Draws one value of `var` from `rng`.
pub fn draw_var(var: &ScenarioVar, rng: &mut impl Rng) -> serde_json::Value {
    if let Some(choices) = &var.choice {
        let total: f64 = choices.iter().map(|c| c.weight.max(0.0)).sum();
        let mut r = rng.random::<f64>() * total;
        for c in choices {
            let w = c.weight.max(0.0);
            if r < w {
                return c.value.clone();
            }
            r -= w;
        }
        return choices
            .iter()
            .rev()
            .find(|c| c.weight > 0.0)
            .or(choices.last())
            .map_or(serde_json::Value::Null, |c| c.value.clone());
    }
    match &var.range {
        Some(range) => draw_range(range, rng),
        None => serde_json::Value::Null,
    }
}

/// The step of a range, if its values are discrete.
fn range_step(r: &ScenarioRange) -> Option<f64> {
    match (r.step, r.integer) {
        (Some(s), true) => Some(s.round().max(1.0)),
        (Some(s), false) => Some(s),
        (None, true) => Some(1.0),
        (None, false) => None,
    }
}

fn draw_range(r: &ScenarioRange, rng: &mut impl Rng) -> serde_json::Value {
    let (min, max) = if r.integer {
        (r.min.ceil(), r.max.floor())
    } else {
        (r.min, r.max)
    };
    if max <= min {
        return number(min, r.integer);
    }
    match range_step(r).filter(|s| *s > 0.0 && s.is_finite()) {
        Some(step) => {
            let n = ((max - min) / step + 1e-9).floor() as u64;
            let k = rng.random_range(0..=n);
            // Rounded to 9 decimals so a step of 0.1 gives 0.3, not 0.30000000000000004.
            let v = ((min + k as f64 * step) * 1e9).round() / 1e9;
            number(v.min(max), r.integer)
        }
        None => number(min + rng.random::<f64>() * (max - min), false),
    }
}

fn number(v: f64, integer: bool) -> serde_json::Value {
    if integer {
        serde_json::Value::from(v as i64)
    } else {
        serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

/// Draws every scenario variable (a value in `fixed` is taken as it is instead) and works out
/// what follows from the draw over the world `base` (the study's initial variables).
pub fn draw(study: &Study, base: &Values, fixed: &Values, rng: &mut impl Rng) -> Drawn {
    let mut values = Values::new();
    for (name, var) in &study.scenario.variables {
        let v = draw_var(var, rng);
        values.insert(name.clone(), fixed.get(name).cloned().unwrap_or(v));
    }
    consequences(study, base, values)
}

/// The world values and robots out of service that follow from drawn `values`. A `set`
/// expression that fails to evaluate (impossible for a validated study with plain values)
/// leaves its variable at its initial value.
pub fn consequences(study: &Study, base: &Values, values: Values) -> Drawn {
    let mut world = base.clone();
    let mut set = Values::new();
    for (k, v) in &values {
        world.insert(k.clone(), v.clone());
        set.insert(k.clone(), v.clone());
    }
    let vars_of = |world: &Values| {
        let mut vars = Vars::default();
        for (k, v) in world {
            vars.set(k, json_to_cel(v));
        }
        vars
    };
    for (k, src) in &study.scenario.set {
        let value = Condition::compile(src).and_then(|c| c.evaluate(&vars_of(&world)));
        if let Ok(v) = value {
            world.insert(k.clone(), v.clone());
            set.insert(k.clone(), v);
        }
    }
    let vars = vars_of(&world);
    let out_of_service = study
        .scenario
        .out_of_service
        .iter()
        .filter(|(_, src)| Condition::compile(src).is_ok_and(|c| c.holds(&vars)))
        .map(|(robot, _)| robot.clone())
        .collect();
    Drawn {
        values,
        world: set,
        out_of_service,
    }
}

/// The choice variables and their values, in the study's order.
pub fn choice_values(study: &Study) -> Vec<(String, Vec<serde_json::Value>)> {
    study
        .scenario
        .variables
        .iter()
        .filter_map(|(name, var)| {
            let choices = var.choice.as_ref()?;
            let mut vals: Vec<serde_json::Value> = vec![];
            for c in choices.iter().filter(|c| c.weight > 0.0) {
                if !vals.contains(&c.value) {
                    vals.push(c.value.clone());
                }
            }
            Some((name.clone(), vals))
        })
        .collect()
}

/// The variants `simulate` plays, each a set of fixed choice values (the variables left out are
/// drawn): the cartesian product of every choice variable's values when it has at most `limit`
/// members, else each value of each variable once (the others drawn). A study without choice
/// variables has one variant, with nothing fixed.
pub fn variants(study: &Study, limit: usize) -> Vec<Values> {
    let vars = choice_values(study);
    if vars.is_empty() {
        return vec![Values::new()];
    }
    let product = vars
        .iter()
        .try_fold(1usize, |n, (_, vals)| n.checked_mul(vals.len().max(1)));
    if product.is_some_and(|p| p <= limit) {
        let mut out = vec![Values::new()];
        for (name, vals) in &vars {
            out = out
                .into_iter()
                .flat_map(|partial| {
                    vals.iter().map(move |v| {
                        let mut p = partial.clone();
                        p.insert(name.clone(), v.clone());
                        p
                    })
                })
                .collect();
        }
        return out;
    }
    vars.iter()
        .flat_map(|(name, vals)| {
            vals.iter().map(move |v| {
                let mut p = Values::new();
                p.insert(name.clone(), v.clone());
                p
            })
        })
        .collect()
}

/// A variant's name: `name=value` pairs joined by `, ` (strings without quotes); `(drawn)` when
/// nothing is fixed.
pub fn variant_label(values: &Values) -> String {
    if values.is_empty() {
        return "(drawn)".into();
    }
    values
        .iter()
        .map(|(k, v)| format!("{k}={}", value_text(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A value as written in a filter or a label: a string as it is, anything else as JSON.
pub fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScenarioChoice;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn choice(pairs: &[(&str, f64)]) -> ScenarioVar {
        ScenarioVar {
            choice: Some(
                pairs
                    .iter()
                    .map(|(v, w)| ScenarioChoice {
                        value: serde_json::json!(v),
                        weight: *w,
                    })
                    .collect(),
            ),
            range: None,
        }
    }

    fn range(min: f64, max: f64, step: Option<f64>, integer: bool) -> ScenarioVar {
        ScenarioVar {
            choice: None,
            range: Some(ScenarioRange {
                min,
                max,
                step,
                integer,
            }),
        }
    }

    #[test]
    fn pinned_defaults_draw_nothing() {
        let mut study: Study = serde_json::from_value(serde_json::json!({
            "id": "t", "title": "t",
            "scenario": {"variables": {"a": {"choice": [{"value": "x"}]}}},
            "actions": [{"id": "go", "label": "Go", "duration": {"default": 5}, "distance": "d"}]
        }))
        .unwrap();
        assert!(!study.scenario.is_empty());
        pin_defaults(&mut study);
        assert!(study.scenario.is_empty());
        assert_eq!(study.actions[0].distance, None);
    }

    #[test]
    fn choices_follow_their_weights() {
        let var = choice(&[("a", 6.0), ("b", 3.0), ("c", 1.0)]);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 20_000;
        let mut counts: IndexMap<String, usize> = IndexMap::new();
        for _ in 0..n {
            *counts
                .entry(value_text(&draw_var(&var, &mut rng)))
                .or_default() += 1;
        }
        for (v, w) in [("a", 0.6), ("b", 0.3), ("c", 0.1)] {
            let share = counts.get(v).copied().unwrap_or(0) as f64 / n as f64;
            // Binomial standard deviation at n = 20 000 is at most 0.0035; 0.02 is generous.
            assert!((share - w).abs() < 0.02, "{v}: share {share}, weight {w}");
        }
    }

    #[test]
    fn a_zero_weight_value_is_never_drawn() {
        let var = choice(&[("a", 1.0), ("never", 0.0), ("b", 1.0)]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..5_000 {
            assert_ne!(draw_var(&var, &mut rng), serde_json::json!("never"));
        }
    }

    #[test]
    fn ranges_stay_in_bounds_and_on_their_steps() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let float = range(2.5, 4.0, None, false);
        let stepped = range(40.0, 100.0, Some(10.0), false);
        let ints = range(1.0, 6.0, None, true);
        let mut seen_ints = std::collections::BTreeSet::new();
        for _ in 0..5_000 {
            let f = draw_var(&float, &mut rng).as_f64().unwrap();
            assert!((2.5..=4.0).contains(&f), "{f}");
            let s = draw_var(&stepped, &mut rng).as_f64().unwrap();
            assert!((40.0..=100.0).contains(&s), "{s}");
            assert_eq!(s % 10.0, 0.0, "{s} is not on a step of 10");
            let i = draw_var(&ints, &mut rng).as_i64().unwrap();
            assert!((1..=6).contains(&i), "{i}");
            seen_ints.insert(i);
        }
        // Both ends of an integer range are drawn.
        assert_eq!(
            seen_ints.into_iter().collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn variants_are_the_product_when_small_else_each_value_once() {
        let mut study: Study = serde_json::from_value(serde_json::json!({
            "id": "t", "title": "t"
        }))
        .unwrap();
        study
            .scenario
            .variables
            .insert("a".into(), choice(&[("x", 1.0), ("y", 1.0)]));
        study
            .scenario
            .variables
            .insert("b".into(), choice(&[("p", 1.0), ("q", 1.0), ("r", 1.0)]));
        study
            .scenario
            .variables
            .insert("d".into(), range(0.0, 1.0, None, false));
        let all = variants(&study, 6);
        assert_eq!(all.len(), 6);
        for a in ["x", "y"] {
            for b in ["p", "q", "r"] {
                assert!(all.iter().any(|v| v["a"] == a && v["b"] == b), "{a},{b}");
            }
        }
        let each = variants(&study, 5);
        assert_eq!(each.len(), 5);
        assert!(each.iter().all(|v| v.len() == 1));
    }
}
