//! Conditions: CEL expressions compiled once at load time and evaluated against the session.
//!
//! A condition that fails to evaluate (a type error, a missing key) counts as false rather than
//! failing the command: the loader already rejected expressions that do not parse or that name
//! unknown variables, so a runtime error means data the author did not foresee, and "not offered"
//! is the safe answer.

use std::sync::{Arc, LazyLock};

use cel::{Context, Env, Program, Value};

/// The standard CEL environment, built once.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// A compiled condition with its source kept for messages and graphs.
#[derive(Clone, Debug)]
pub struct Condition {
    pub source: String,
    program: Arc<Program>,
}

impl Condition {
    /// Compiles `source`; the error is CEL's own message.
    pub fn compile(source: &str) -> Result<Condition, String> {
        ENV.compile(source)
            .map(|program| Condition {
                source: source.to_string(),
                program: Arc::new(program),
            })
            .map_err(|e| e.to_string().replace('\n', " "))
    }

    /// Top-level variable names the expression reads.
    pub fn variables(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .program
            .references()
            .variables()
            .into_iter()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    }

    /// Evaluates to a boolean; anything else (or an error) is false.
    pub fn holds(&self, vars: &Vars) -> bool {
        let mut ctx = Context::with_env(ENV.clone());
        for (name, value) in &vars.0 {
            ctx.add_variable_from_value(name.clone(), value.clone());
        }
        matches!(self.program.execute(&ctx), Ok(Value::Bool(true)))
    }
}

/// Variables bound for an evaluation.
#[derive(Default, Clone)]
pub struct Vars(pub Vec<(String, Value)>);

impl Vars {
    pub fn set(&mut self, name: &str, value: Value) {
        if let Some(slot) = self.0.iter_mut().find(|(n, _)| n == name) {
            slot.1 = value;
        } else {
            self.0.push((name.to_string(), value));
        }
    }
}

/// Converts a JSON value (world variables, snapshots) to a CEL value.
pub fn json_to_cel(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => {
            Value::List(Arc::new(items.iter().map(json_to_cel).collect()))
        }
        serde_json::Value::Object(map) => {
            let m: std::collections::HashMap<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), json_to_cel(v)))
                .collect();
            Value::Map(m.into())
        }
    }
}
