//! The meaning checks of `scenario:`: every drawn variable is a world variable with a choice
//! (not empty, positive weights) or a range (min not above max, a positive step), `set` and
//! `out_of_service` name known world variables and robots, and an action's `distance` names a
//! numeric world variable.

use super::{Checker, did_you_mean};
use crate::expr::Condition;
use crate::model::{ScenarioChoice, ScenarioRange, ScenarioVar};

impl Checker<'_> {
    /// Checks the scenario section and the actions' `distance`.
    pub(super) fn scenario(&mut self) {
        let study = self.study;
        let world = &study.world.variables;
        for (name, var) in &study.scenario.variables {
            self.scenario_variable(name, var);
        }
        for (name, src) in &study.scenario.set {
            let ptr = format!("/scenario/set/{name}");
            if !world.contains_key(name) {
                let hint = self.undeclared(name);
                self.err(&ptr, format!("unknown world variable `{name}`"), Some(hint));
            }
            self.scenario_expression(&ptr, src);
        }
        for (robot, src) in &study.scenario.out_of_service {
            let ptr = format!("/scenario/out_of_service/{robot}");
            if !study.world.robots.iter().any(|r| &r.id == robot) {
                let hint = did_you_mean(robot, study.world.robots.iter().map(|r| r.id.as_str()));
                self.err(&ptr, format!("unknown robot `{robot}`"), hint);
            }
            self.scenario_expression(&ptr, src);
        }
        self.alarm_choices();
        for (i, a) in study.actions.iter().enumerate() {
            if let Some(var) = &a.distance
                && !world.get(var).is_some_and(serde_json::Value::is_number)
            {
                let hint = did_you_mean(var, world.keys().map(String::as_str))
                    .unwrap_or_else(|| "name a world variable holding metres".into());
                self.err(
                    &format!("/actions/{i}/distance"),
                    format!("`{var}` is not a numeric world variable"),
                    Some(hint),
                );
            }
        }
    }

    /// The hint for a name that is not a world variable.
    fn undeclared(&self, name: &str) -> String {
        did_you_mean(name, self.study.world.variables.keys().map(String::as_str))
            .unwrap_or_else(|| "declare it under world.variables with its default value".into())
    }

    /// One drawn variable: a world variable, with exactly one of a choice and a range.
    fn scenario_variable(&mut self, name: &str, var: &ScenarioVar) {
        let base = format!("/scenario/variables/{name}");
        if !self.study.world.variables.contains_key(name) {
            let hint = self.undeclared(name);
            self.err(
                &base,
                format!("scenario variable `{name}` is not a world variable"),
                Some(hint),
            );
        }
        match (&var.choice, &var.range) {
            (Some(_), Some(_)) | (None, None) => self.err(
                &base,
                format!("scenario variable `{name}` needs exactly one of `choice` and `range`"),
                Some("e.g. `choice: [{value: a, weight: 2}, {value: b}]` or `range: {min: 1, max: 5}`".into()),
            ),
            (Some(choices), None) => self.scenario_choice(&base, name, choices),
            (None, Some(r)) => self.scenario_range(&base, name, r),
        }
    }

    /// A drawn variable's choice: not empty, and every weight positive.
    fn scenario_choice(&mut self, base: &str, name: &str, choices: &[ScenarioChoice]) {
        if choices.is_empty() {
            self.err(
                &format!("{base}/choice"),
                format!("scenario variable `{name}` has an empty choice"),
                Some("list at least one value".into()),
            );
        }
        for (i, c) in choices.iter().enumerate() {
            if !(c.weight.is_finite() && c.weight > 0.0) {
                self.err(
                    &format!("{base}/choice/{i}/weight"),
                    format!(
                        "weight {} of `{name}` = {} is not positive",
                        c.weight, c.value
                    ),
                    Some("weights are relative and must be above 0; remove a value that is never drawn".into()),
                );
            }
        }
    }

    /// A drawn variable's range: min not above max, a whole number in an integer range, and a
    /// positive step.
    fn scenario_range(&mut self, base: &str, name: &str, r: &ScenarioRange) {
        if !(r.min.is_finite() && r.max.is_finite()) || r.min > r.max {
            self.err(
                &format!("{base}/range"),
                format!("range of `{name}` has min {} above max {}", r.min, r.max),
                Some("swap them, or make them equal for a fixed value".into()),
            );
        } else if r.integer && r.min.ceil() > r.max.floor() {
            self.err(
                &format!("{base}/range"),
                format!(
                    "integer range of `{name}` ({} to {}) holds no whole number",
                    r.min, r.max
                ),
                None,
            );
        }
        if let Some(step) = r.step
            && !(step.is_finite() && step > 0.0)
        {
            self.err(
                &format!("{base}/range/step"),
                format!("step {step} of `{name}` is not positive"),
                None,
            );
        }
    }

    /// Compiles a scenario expression, which reads world variables only.
    fn scenario_expression(&mut self, ptr: &str, src: &str) -> Option<Condition> {
        let world = &self.study.world.variables;
        match Condition::compile(src) {
            Err(e) => {
                self.err(ptr, format!("expression `{src}` does not parse: {e}"), None);
                None
            }
            Ok(cond) => {
                for v in cond.variables() {
                    if !world.contains_key(&v) {
                        let hint = did_you_mean(&v, world.keys().map(String::as_str))
                            .unwrap_or_else(|| {
                                "scenario expressions read world variables only (drawn ones included)"
                                    .into()
                            });
                        self.err(
                            ptr,
                            format!("expression names unknown variable `{v}`"),
                            Some(hint),
                        );
                    }
                }
                Some(cond)
            }
        }
    }

    /// A drawn value of the variable the alarm follows must be a place on the map.
    fn alarm_choices(&mut self) {
        let study = self.study;
        if let Some(alarm) = &study.world.alarm
            && let Some(var) = study.scenario.variables.get(&alarm.at)
            && let Some(choices) = &var.choice
        {
            for (i, c) in choices.iter().enumerate() {
                let ok = c
                    .value
                    .as_str()
                    .is_some_and(|v| study.world.locations.iter().any(|l| l.id == v));
                if !ok {
                    self.err(
                        &format!("/scenario/variables/{}/choice/{i}/value", alarm.at),
                        format!(
                            "`{}` is drawn for `{}`, where the alarm is, but is not a location",
                            c.value, alarm.at
                        ),
                        Some("use a location id from world.locations".into()),
                    );
                }
            }
        }
    }
}
