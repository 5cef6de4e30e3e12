//! The meaning checks of a study: references, reachability, conditions, slots and media.
//!
//! Each check adds problems and goes on, so the author sees all of them in one run.

use std::collections::{HashMap, HashSet};

mod copilot;
mod flow;
mod judges;
mod parts;
mod platforms;
mod scenario;
mod simulated_users;
mod words;

pub use flow::{FLOW_VARS, PageConditions, kind_name};

use super::{Compiled, Diagnostic, StudySource};
use crate::expr::Condition;
use crate::model::{Effects, Study};
use crate::slots;

/// Variables the engine binds in every condition besides the world variables.
pub const BUILTIN_VARS: &[&str] = &[
    "subtask",
    "state",
    "messages",
    "elapsed",
    "time_left",
    "milestones",
    "busy_robots",
    "robots",
];
/// Variables bound only in action guards.
pub const ACTION_VARS: &[&str] = &["robot", "target"];

/// Fields of `robot` in action guards.
const ROBOT_FIELDS: &[&str] = &[
    "id",
    "kind",
    "location",
    "busy",
    "battery",
    "capabilities",
    "in_service",
];

/// Identifiers following `var.` in a CEL source (outside string literals).
fn member_names(src: &str, var: &str) -> Vec<String> {
    let mut out = vec![];
    let bytes = src.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None => {
                let boundary = i == 0
                    || !(bytes[i - 1].is_ascii_alphanumeric()
                        || bytes[i - 1] == b'_'
                        || bytes[i - 1] == b'.');
                if boundary && src[i..].starts_with(var) && src[i + var.len()..].starts_with('.') {
                    let rest = &src[i + var.len() + 1..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    i += var.len() + 1 + name.len();
                    out.push(name);
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// Variables bound by CEL's comprehension macros (`list.exists(r, …)`, `all`, `exists_one`,
/// `map`, `filter`): they are not free variables of the expression.
fn comprehension_vars(src: &str) -> Vec<String> {
    let mut out = vec![];
    for mac in ["exists_one", "exists", "all", "map", "filter"] {
        let pat = format!(".{mac}(");
        let mut rest = src;
        while let Some(i) = rest.find(&pat) {
            rest = &rest[i + pat.len()..];
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty()
                && rest.trim_start()[name.len()..]
                    .trim_start()
                    .starts_with(',')
            {
                out.push(name);
            }
        }
    }
    out
}

type Diag<'a> = &'a dyn Fn(&str, String, Option<String>) -> Diagnostic;

/// `did you mean `X`?` for the candidate closest to `word` (Jaro-Winkler above 0.8), if any.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(word, c);
        if score > 0.8 && best.is_none_or(|(b, _)| score > b) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| format!("did you mean `{c}`?"))
}

/// Hint for an unknown key: the closest allowed key, or the list of allowed keys.
pub fn expected_keys_hint(
    schema: &serde_json::Value,
    _value: &serde_json::Value,
    _ptr: &str,
    key: &str,
) -> String {
    // Every property name of every object in the schema: enough for a "did you mean".
    let mut names: HashSet<String> = HashSet::new();
    collect_props(schema, &mut names);
    did_you_mean(key, names.iter().map(String::as_str))
        .unwrap_or_else(|| "remove it, or see `wozkit schema` for the allowed keys".into())
}

fn collect_props(v: &serde_json::Value, out: &mut HashSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::Object(props)) = m.get("properties") {
                out.extend(props.keys().cloned());
            }
            m.values().for_each(|x| collect_props(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_props(x, out)),
        _ => {}
    }
}

struct Checker<'a> {
    study: &'a Study,
    diag: Diag<'a>,
    problems: Vec<Diagnostic>,
    states: HashMap<&'a str, usize>,
    /// Dialogues read from `evaluation.dialogues_file` (the last ones of the list).
    file_dialogues: usize,
}

impl<'a> Checker<'a> {
    fn err(&mut self, ptr: &str, msg: String, hint: Option<String>) {
        self.problems.push((self.diag)(ptr, msg, hint));
    }

    fn unique<'b>(&mut self, what: &str, base: &str, ids: impl Iterator<Item = &'b str>) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, id) in ids.enumerate() {
            if let Some(first) = seen.insert(id, i) {
                self.err(
                    &format!("{base}/{i}/id"),
                    format!("duplicate {what} id `{id}`"),
                    Some(format!("the first is {base}/{first}; ids must be unique")),
                );
            }
        }
    }

    fn state_ref(&mut self, ptr: &str, id: &str) {
        if !self.states.contains_key(id) {
            let hint = did_you_mean(id, self.states.keys().copied())
                .or_else(|| Some("add a state with this id, or fix the name".into()));
            self.err(ptr, format!("transition to missing state `{id}`"), hint);
        }
    }

    fn condition(&mut self, ptr: &str, src: &str, extra: &[&str]) -> Option<Condition> {
        match Condition::compile(src) {
            Err(e) => {
                self.err(
                    ptr,
                    format!("condition `{src}` does not parse: {e}"),
                    Some("conditions are CEL expressions, e.g. `fire_out && subtask == 'assess_damage'`".into()),
                );
                None
            }
            Ok(c) => {
                let known: Vec<&str> = self
                    .study
                    .world
                    .variables
                    .keys()
                    .map(String::as_str)
                    .chain(BUILTIN_VARS.iter().copied())
                    .chain(extra.iter().copied())
                    // The selected rows of the wizard's database (`db.TABLE.COLUMN`).
                    .chain(self.study.database.is_some().then_some("db"))
                    .collect();
                let bound = comprehension_vars(src);
                for v in c.variables() {
                    if !known.contains(&v.as_str()) && !bound.contains(&v) {
                        let hint = did_you_mean(&v, known.iter().copied()).or_else(|| {
                            Some(format!(
                                "declare it under world.variables, or use one of: {}",
                                BUILTIN_VARS.join(", ")
                            ))
                        });
                        self.err(ptr, format!("condition names unknown variable `{v}`"), hint);
                    }
                }
                if extra.contains(&"robot") {
                    for field in member_names(src, "robot") {
                        if !ROBOT_FIELDS.contains(&field.as_str()) {
                            let hint =
                                did_you_mean(&field, ROBOT_FIELDS.iter().copied()).or_else(|| {
                                    Some(format!("a robot has: {}", ROBOT_FIELDS.join(", ")))
                                });
                            self.err(
                                ptr,
                                format!("condition reads unknown robot field `robot.{field}`"),
                                hint,
                            );
                        }
                    }
                }
                Some(c)
            }
        }
    }

    fn media_ref(&mut self, ptr: &str, id: &str) {
        if !self.study.media.contains_key(id) {
            let hint = did_you_mean(id, self.study.media.keys().map(String::as_str))
                .or_else(|| Some("declare it under `media:` with its file".into()));
            self.err(ptr, format!("unknown media `{id}`"), hint);
        }
    }

    fn subtask_ref(&mut self, ptr: &str, id: &str) {
        if !self.study.subtasks.iter().any(|s| s.id == id) {
            let hint = did_you_mean(id, self.study.subtasks.iter().map(|s| s.id.as_str()));
            self.err(ptr, format!("unknown subtask `{id}`"), hint);
        }
    }

    fn effects(&mut self, ptr: &str, e: &Effects) {
        for key in e.set.keys() {
            if !self.study.world.variables.contains_key(key) {
                let hint = did_you_mean(key, self.study.world.variables.keys().map(String::as_str))
                    .or_else(|| {
                        Some("declare it under world.variables with its initial value".into())
                    });
                self.err(
                    &format!("{ptr}/set/{key}"),
                    format!("unknown world variable `{key}`"),
                    hint,
                );
            }
        }
        if let Some(m) = &e.milestone {
            self.subtask_ref(&format!("{ptr}/milestone"), m);
        }
        if let Some(s) = &e.subtask {
            self.subtask_ref(&format!("{ptr}/subtask"), s);
        }
        if let Some(m) = &e.media {
            self.media_ref(&format!("{ptr}/media"), m);
        }
        if let Some(s) = &e.enter {
            self.state_ref(&format!("{ptr}/enter"), s);
        }
        for (i, s) in e.unlock.iter().enumerate() {
            self.state_ref(&format!("{ptr}/unlock/{i}"), s);
        }
    }

    fn template(&mut self, ptr: &str, text: &str) {
        match slots::parse(text) {
            Err(e) => self.err(
                ptr,
                format!("template: {e}"),
                Some("write `{{` for a literal brace".into()),
            ),
            Ok(parts) => {
                for name in slots::names(&parts) {
                    if !slots::is_known(name, self.study) {
                        let hint = Some(format!(
                            "slots come from world variables ({}) or {}",
                            self.study
                                .world
                                .variables
                                .keys()
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", "),
                            slots::BUILTIN_SLOTS.join(", ")
                        ));
                        self.err(ptr, format!("slot `{{{name}}}` has no source"), hint);
                    }
                }
            }
        }
    }
}

/// Runs every meaning check; returns the compiled conditions and the problems.
pub fn check(
    study: &Study,
    source: &StudySource,
    file_dialogues: usize,
    diag: Diag<'_>,
) -> (Compiled, Vec<Diagnostic>) {
    let mut c = Checker {
        study,
        diag,
        file_dialogues,
        problems: vec![],
        states: study
            .states
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect(),
    };
    let mut compiled = Compiled {
        state_index: study
            .states
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect(),
        ..Compiled::default()
    };

    c.unique_ids();
    c.world(&mut compiled);
    c.media_files(source);
    c.states(&mut compiled);
    c.actions(&mut compiled);
    c.global_conditions(&mut compiled);
    c.survey();
    c.reachability(&compiled);

    compiled.page_when = c.flow();
    c.scenario();
    c.judges();
    c.simulated_users();
    c.copilot();
    compiled.warnings = c.platforms();
    compiled.warnings.extend(c.no_preview());
    compiled.warnings.extend(c.machine_names());
    compiled.warnings.extend(c.default_words());

    (compiled, c.problems)
}
