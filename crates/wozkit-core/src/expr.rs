//! Conditions: CEL expressions compiled once at load time and evaluated against the session.
//!
//! A condition that fails to evaluate (a type error, a missing key) counts as false rather than
//! failing the command: the loader already rejected expressions that do not parse or that name
//! unknown variables, so a runtime error means data the author did not foresee, and "not offered"
//! is the safe answer.

use std::sync::{Arc, LazyLock};

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString,
};
use cel::common::value::Val;
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

    /// The names whose variables the expression may resolve: each identifier it reads (the
    /// root of a selection such as `db.restaurant`), leading dot removed, comprehension
    /// variables included.
    fn roots(&self) -> Vec<String> {
        self.program
            .references()
            .variables()
            .into_iter()
            .map(|v| v.strip_prefix('.').unwrap_or(v).to_string())
            .collect()
    }

    /// Evaluates to a plain value (bool, number, string, or a list of them): how scenario
    /// `set` expressions compute world values. The error says what the expression gave instead.
    pub fn evaluate(&self, vars: &Vars<'_>) -> Result<serde_json::Value, String> {
        match self.program.execute(&vars.0) {
            Ok(v) => cel_to_json(&v)
                .ok_or_else(|| format!("`{}` gives a value that is not plain data", self.source)),
            Err(e) => Err(format!("`{}`: {e}", self.source)),
        }
    }

    /// Evaluates to a boolean; anything else (or an error) is false.
    pub fn holds(&self, vars: &Vars<'_>) -> bool {
        matches!(self.program.execute(&vars.0), Ok(Value::Bool(true)))
    }
}

/// The variables a set of conditions can read, found once at load so that building the
/// variables for them may skip the rest: a variable that no condition names cannot change what
/// any of them gives.
///
/// A name counts as read when its first dot-separated segment is the root of an identifier an
/// expression reads: CEL resolves `a.b.c` through the variables `a.b.c`, `a.b` and `a`, so a
/// variable whose name has dots is kept whenever its first segment is read.
#[derive(Clone, Debug, Default)]
pub struct Reads {
    roots: std::collections::HashSet<String, crate::slots::FastHash>,
    /// The fields read of each entry of `robots` (`robots.ID.FIELD`); `None` when a condition
    /// uses `robots` any other way (the whole map, an entry, an index).
    robots_fields: Option<Vec<String>>,
    /// The fields read of `robot` (`robot.FIELD`); `None` when a condition uses it otherwise.
    robot_fields: Option<Vec<String>>,
}

/// The fields selected on `root` through `depth` selections of any name, in `e`: `root.F`
/// (depth 0), `root.X.F` (depth 1), ...; `whole` is set when `root` is used any other way.
fn selected_fields(
    e: &cel::IdedExpr,
    root: &str,
    depth: usize,
    fields: &mut std::collections::BTreeSet<String>,
    whole: &mut bool,
) {
    use cel::common::ast::{EntryExpr, Expr};
    fn is_chain(e: &cel::IdedExpr, root: &str, depth: usize) -> bool {
        match &e.expr {
            Expr::Ident(name) => depth == 0 && name.strip_prefix('.').unwrap_or(name) == root,
            Expr::Select(s) => depth > 0 && is_chain(&s.operand, root, depth - 1),
            _ => false,
        }
    }
    let mut walk = |x: &cel::IdedExpr| selected_fields(x, root, depth, fields, whole);
    match &e.expr {
        Expr::Select(s) if is_chain(&s.operand, root, depth) => {
            fields.insert(s.field.clone());
        }
        Expr::Select(s) => walk(&s.operand),
        Expr::Ident(name) => {
            if name.strip_prefix('.').unwrap_or(name) == root {
                *whole = true;
            }
        }
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                walk(t);
            }
            c.args.iter().for_each(walk);
        }
        Expr::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk(x);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(walk),
        Expr::Map(m) => {
            for entry in &m.entries {
                match &entry.expr {
                    EntryExpr::StructField(f) => walk(&f.value),
                    EntryExpr::MapEntry(me) => {
                        walk(&me.key);
                        walk(&me.value);
                    }
                }
            }
        }
        Expr::Struct(st) => {
            for entry in &st.entries {
                match &entry.expr {
                    EntryExpr::StructField(f) => walk(&f.value),
                    EntryExpr::MapEntry(me) => {
                        walk(&me.key);
                        walk(&me.value);
                    }
                }
            }
        }
        // Anything else (a literal, or a form the walk does not know) reads no field of
        // `root` unless it holds it: a form not walked counts as using `root` whole.
        Expr::Literal(_) => {}
        _ => *whole = true,
    }
}

impl Reads {
    /// The variables `conditions` read.
    pub fn of<'a>(conditions: impl IntoIterator<Item = &'a Condition>) -> Reads {
        let mut roots = std::collections::HashSet::default();
        let (mut robots, mut robots_whole) = (std::collections::BTreeSet::new(), false);
        let (mut robot, mut robot_whole) = (std::collections::BTreeSet::new(), false);
        for c in conditions {
            for r in c.roots() {
                let first = r.split('.').next().unwrap_or(&r);
                roots.insert(first.to_string());
            }
            let e = c.program.expression();
            selected_fields(e, "robots", 1, &mut robots, &mut robots_whole);
            selected_fields(e, "robot", 0, &mut robot, &mut robot_whole);
        }
        Reads {
            roots,
            robots_fields: (!robots_whole).then(|| robots.into_iter().collect()),
            robot_fields: (!robot_whole).then(|| robot.into_iter().collect()),
        }
    }

    /// The fields of each entry of `robots` the conditions read (`robots.ID.FIELD`); `None`
    /// when they may read more (the whole map or entry): every field is needed.
    pub fn robots_fields(&self) -> Option<&[String]> {
        self.robots_fields.as_deref()
    }

    /// The fields of `robot` the conditions read (`robot.FIELD`); `None` when they may read
    /// more: every field is needed.
    pub fn robot_fields(&self) -> Option<&[String]> {
        self.robot_fields.as_deref()
    }

    /// Whether a variable named `name` may be read.
    pub fn reads(&self, name: &str) -> bool {
        let name = name.strip_prefix('.').unwrap_or(name);
        self.roots.contains(name.split('.').next().unwrap_or(name))
    }
}

/// Variables bound for evaluations: built once per decision and shared by every condition
/// evaluated in it (building a context is the expensive part of an evaluation).
pub struct Vars<'p>(Context<'p, 'static>);

impl Default for Vars<'_> {
    fn default() -> Self {
        Vars(Context::with_env(ENV.clone()))
    }
}

impl Vars<'_> {
    pub fn set(&mut self, name: &str, value: Value) {
        self.0.add_variable_from_value(name, value);
    }

    /// Binds `name` to a value already in CEL's evaluation form: what [`Vars::set`] converts
    /// its [`Value`] to, built without the intermediate copy.
    pub fn set_val(&mut self, name: &str, value: Box<dyn Val>) {
        self.0.add_variable_as_val(name, value);
    }

    /// A child scope that adds variables (e.g. `robot`, `target`) on top of these.
    pub fn scope(&self) -> Vars<'_> {
        Vars(self.0.new_inner_scope())
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

/// A string in CEL's evaluation form.
pub fn val_str(s: &str) -> Box<dyn Val> {
    Box::new(CelString::from(s.to_string()))
}

/// A list in CEL's evaluation form.
pub fn val_list(items: Vec<Box<dyn Val>>) -> Box<dyn Val> {
    Box::new(CelList::from(items))
}

/// A map with string keys in CEL's evaluation form.
pub fn val_map(pairs: impl IntoIterator<Item = (String, Box<dyn Val>)>) -> Box<dyn Val> {
    let m: std::collections::HashMap<CelMapKey<'static>, Box<dyn Val>> = pairs
        .into_iter()
        .map(|(k, v)| (CelMapKey::from(k), v))
        .collect();
    Box::new(CelMap::from(m))
}

/// [`json_to_cel`] straight to CEL's evaluation form: the value [`Vars::set`] would bind for
/// `json_to_cel(value)`.
pub fn json_to_val(value: &serde_json::Value) -> Box<dyn Val> {
    match value {
        serde_json::Value::Null => Box::new(CelNull),
        serde_json::Value::Bool(b) => Box::new(CelBool::from(*b)),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Box::new(CelInt::from(i)),
            None => Box::new(CelDouble::from(n.as_f64().unwrap_or(0.0))),
        },
        serde_json::Value::String(s) => val_str(s),
        serde_json::Value::Array(items) => val_list(items.iter().map(json_to_val).collect()),
        serde_json::Value::Object(map) => {
            val_map(map.iter().map(|(k, v)| (k.clone(), json_to_val(v))))
        }
    }
}

/// Converts a plain CEL value (null, bool, number, string, list) to JSON; None for the others.
fn cel_to_json(value: &Value) -> Option<serde_json::Value> {
    Some(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::UInt(u) => serde_json::Value::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f).map(serde_json::Value::Number)?,
        Value::String(s) => serde_json::Value::String(s.to_string()),
        Value::List(items) => {
            serde_json::Value::Array(items.iter().map(cel_to_json).collect::<Option<Vec<_>>>()?)
        }
        _ => return None,
    })
}
