//! The meaning checks of a study: references, reachability, conditions, slots and media.
//!
//! Each check adds problems and goes on, so the author sees all of them in one run.

use std::collections::{HashMap, HashSet, VecDeque};

mod flow;
mod judges;
mod platforms;
mod scenario;
mod simulated_users;
mod words;

pub use flow::{FLOW_VARS, PageConditions, kind_name};

use super::{Compiled, Diagnostic, StudySource};
use crate::event::Role;
use crate::expr::Condition;
use crate::model::{Effects, Study};
use crate::questions;
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

    // Unique ids.
    c.unique(
        "state",
        "/states",
        study.states.iter().map(|s| s.id.as_str()),
    );
    c.unique(
        "fixed option",
        "/fixed_options",
        study.fixed_options.iter().map(|s| s.id.as_str()),
    );
    c.unique(
        "action",
        "/actions",
        study.actions.iter().map(|s| s.id.as_str()),
    );
    c.unique(
        "robot",
        "/world/robots",
        study.world.robots.iter().map(|s| s.id.as_str()),
    );
    c.unique(
        "location",
        "/world/locations",
        study.world.locations.iter().map(|s| s.id.as_str()),
    );
    c.unique(
        "subtask",
        "/subtasks",
        study.subtasks.iter().map(|s| s.id.as_str()),
    );

    // World.
    for name in study.world.variables.keys() {
        if BUILTIN_VARS.contains(&name.as_str()) || ACTION_VARS.contains(&name.as_str()) {
            c.err(
                &format!("/world/variables/{name}"),
                format!("world variable `{name}` clashes with a built-in variable"),
                Some("rename it".into()),
            );
        }
    }
    if let Some(m) = &study.world.map {
        c.media_ref("/world/map", m);
    }
    let locations: HashSet<&str> = study
        .world
        .locations
        .iter()
        .map(|l| l.id.as_str())
        .collect();
    for (i, r) in study.world.robots.iter().enumerate() {
        if !study.world.robot_kinds.contains_key(&r.kind) {
            let hint = did_you_mean(&r.kind, study.world.robot_kinds.keys().map(String::as_str));
            c.err(
                &format!("/world/robots/{i}/kind"),
                format!("unknown robot kind `{}`", r.kind),
                hint,
            );
        }
        if !locations.contains(r.start.as_str()) {
            let hint = did_you_mean(&r.start, locations.iter().copied());
            c.err(
                &format!("/world/robots/{i}/start"),
                format!("unknown location `{}`", r.start),
                hint,
            );
        }
    }

    if let Some(a) = &study.world.alarm {
        let at_location = |id: &str| locations.contains(id);
        let ok = at_location(&a.at)
            || study
                .world
                .variables
                .get(&a.at)
                .and_then(|v| v.as_str())
                .is_some_and(at_location);
        if !ok {
            let hint = did_you_mean(
                &a.at,
                locations
                    .iter()
                    .copied()
                    .chain(study.world.variables.keys().map(String::as_str)),
            )
            .or_else(|| Some("name a location id, or a world variable whose value is one".into()));
            c.err(
                "/world/alarm/at",
                format!(
                    "`{}` is neither a location nor a world variable holding one",
                    a.at
                ),
                hint,
            );
        }
        compiled.alarm_cleared = a
            .cleared_when
            .as_ref()
            .and_then(|w| c.condition("/world/alarm/cleared_when", w, &[]));
    }

    // Media files.
    for (id, m) in &study.media {
        if source.read(&m.file).is_none() {
            c.err(
                &format!("/media/{id}/file"),
                format!("media file `{}` not found", m.file),
                Some("paths are relative to the study folder".into()),
            );
        }
    }

    // States.
    let initials: Vec<usize> = study
        .states
        .iter()
        .enumerate()
        .filter(|(_, s)| s.initial)
        .map(|(i, _)| i)
        .collect();
    match initials.as_slice() {
        [one] => compiled.initial = *one,
        // A study without a live room (an evaluation) has no dialogue states.
        [] if study.states.is_empty() && !study.has_room() => {}
        [] => c.err(
            "/states",
            "no state is marked `initial: true`".into(),
            Some("mark the start state".into()),
        ),
        [_, rest @ ..] => {
            for i in rest {
                c.err(
                    &format!("/states/{i}/initial"),
                    "more than one initial state".into(),
                    None,
                );
            }
        }
    }
    let any_global = study.states.iter().any(|s| s.global && !s.terminal);
    for (i, s) in study.states.iter().enumerate() {
        let base = format!("/states/{i}");
        compiled.state_when.push(
            s.when
                .as_ref()
                .and_then(|w| c.condition(&format!("{base}/when"), w, &[])),
        );
        let mut tw = vec![];
        for (j, t) in s.transitions.iter().enumerate() {
            c.state_ref(&format!("{base}/transitions/{j}"), t.to());
            tw.push(
                t.when()
                    .and_then(|w| c.condition(&format!("{base}/transitions/{j}/when"), w, &[])),
            );
        }
        compiled.transition_when.push(tw);
        if !s.initial && s.templates.is_empty() {
            c.err(
                &base,
                format!("state `{}` has no templates", s.id),
                Some("add at least one utterance under `templates`".into()),
            );
        }
        for (j, t) in s.templates.iter().enumerate() {
            c.template(&format!("{base}/templates/{j}"), t);
        }
        if let Some(st) = &s.subtask {
            c.subtask_ref(&format!("{base}/subtask"), st);
        }
        c.effects(&format!("{base}/effects"), &s.effects);
        if let Some(lock) = &s.lock {
            if let Some(p) = &lock.prompt {
                c.template(&format!("{base}/lock/prompt"), p);
            }
            c.effects(&format!("{base}/lock/on_approve"), &lock.on_approve);
            c.effects(&format!("{base}/lock/on_deny"), &lock.on_deny);
        }
        let has_way_out = !s.transitions.is_empty()
            || s.global
            || any_global
            || study
                .actions
                .iter()
                .any(|a| a.on_complete.enter.is_some() || !a.on_complete.unlock.is_empty());
        if !s.terminal && !has_way_out {
            c.err(
                &base,
                format!("state `{}` has no way out and is not terminal", s.id),
                Some("add transitions, or mark it `terminal: true`".into()),
            );
        }
    }

    // Actions.
    for (i, a) in study.actions.iter().enumerate() {
        let base = format!("/actions/{i}");
        // Each part is checked where it is written; the whole guard is compiled once more as
        // one condition (what the action table evaluates), unless a part failed.
        let parts: Vec<Option<Condition>> = a
            .guard
            .iter()
            .flat_map(|g| g.conditions())
            .map(|(ptr, src)| c.condition(&format!("{base}/guard{ptr}"), src, ACTION_VARS))
            .collect();
        let whole = match &a.guard {
            Some(g) if parts.iter().all(Option::is_some) => match g {
                crate::model::Guard::Expr(_) => parts[0].clone(),
                crate::model::Guard::Parts(_) => Condition::compile(&g.expression()).ok(),
            },
            _ => None,
        };
        compiled.action_guard.push(whole);
        compiled.action_guard_parts.push(match &a.guard {
            Some(crate::model::Guard::Parts(ps)) => parts
                .into_iter()
                .zip(ps)
                .filter_map(|(c, p)| c.map(|c| (c, p.reason.clone())))
                .collect(),
            _ => vec![],
        });
        c.effects(&format!("{base}/on_complete"), &a.on_complete);
        if a.moves && !a.target {
            c.err(
                &format!("{base}/moves"),
                format!("action `{}` moves the robot but takes no target", a.id),
                Some("add `target: true`, or remove `moves`".into()),
            );
        }
        for kind in a.duration.by_kind.keys() {
            if !study.world.robot_kinds.contains_key(kind) {
                c.err(
                    &format!("{base}/duration/by_kind/{kind}"),
                    format!("unknown robot kind `{kind}`"),
                    None,
                );
            }
        }
        for (kind, media) in &a.media_by_kind {
            if !study.world.robot_kinds.contains_key(kind) {
                c.err(
                    &format!("{base}/media_by_kind/{kind}"),
                    format!("unknown robot kind `{kind}`"),
                    None,
                );
            }
            c.media_ref(&format!("{base}/media_by_kind/{kind}"), media);
        }
        if let Some(cap) = &a.requires
            && !study
                .world
                .robots
                .iter()
                .any(|r| r.capabilities.contains(cap))
        {
            c.err(
                &format!("{base}/requires"),
                format!("no robot has capability `{cap}`"),
                None,
            );
        }
    }
    for (i, f) in study.fixed_options.iter().enumerate() {
        c.template(&format!("/fixed_options/{i}/text"), &f.text);
    }

    // Global conditions.
    compiled.goal = study
        .goal
        .as_ref()
        .and_then(|g| c.condition("/goal", g, &[]));
    compiled.finish_when = study
        .session
        .finish
        .when
        .as_ref()
        .and_then(|g| c.condition("/session/finish/when", g, &[]));
    compiled.bonus_when = study
        .payment
        .as_ref()
        .and_then(|p| p.bonus.as_ref())
        .and_then(|b| c.condition("/payment/bonus/when", &b.when, &[]));

    // Survey: the question model's own rules (ids, bounds, options, keys per kind), for the
    // shared questions and each role's own questionnaire.
    let survey = &study.survey;
    for p in questions::rules::check(&survey.questions, "/survey/questions") {
        c.err(&p.pointer, p.message, p.hint);
    }
    for role in [Role::User, Role::Wizard] {
        if let Some(own) = survey.own(role) {
            for p in questions::rules::check(&own.questions, survey.pointer(role)) {
                c.err(&p.pointer, p.message, p.hint);
            }
        }
    }
    if survey.user.is_some() && survey.wizard.is_some() {
        if !survey.questions.is_empty() {
            c.err(
                "/survey/questions",
                "the shared survey questions are shown to no one: both roles have a \
                 questionnaire of their own (survey.user and survey.wizard)"
                    .into(),
                Some(
                    "move these questions into survey.user or survey.wizard, or remove one of \
                     them so that role answers the shared questions"
                        .into(),
                ),
            );
        }
        if survey.title.is_some()
            && survey
                .user
                .iter()
                .chain(&survey.wizard)
                .all(|q| q.title.is_some())
        {
            c.err(
                "/survey/title",
                "the shared survey title is shown to no one: survey.user and survey.wizard \
                 have titles of their own"
                    .into(),
                Some("remove survey.title".into()),
            );
        }
    }

    // Reachability: from the initial state through transitions, globals, unlocks and enters.
    if c.problems.is_empty() && !study.states.is_empty() {
        let mut edges: Vec<Vec<usize>> = vec![vec![]; study.states.len()];
        let mut roots = vec![compiled.initial];
        let idx = |id: &str| compiled.state_index.get(id).copied();
        let effect_targets = |e: &Effects| -> Vec<usize> {
            e.enter
                .iter()
                .chain(e.unlock.iter())
                .filter_map(|s| idx(s))
                .collect()
        };
        for (i, s) in study.states.iter().enumerate() {
            edges[i].extend(s.transitions.iter().filter_map(|t| idx(t.to())));
            edges[i].extend(effect_targets(&s.effects));
            if let Some(l) = &s.lock {
                edges[i].extend(effect_targets(&l.on_approve));
                edges[i].extend(effect_targets(&l.on_deny));
            }
            if s.global {
                roots.push(i);
            }
        }
        for a in &study.actions {
            roots.extend(effect_targets(&a.on_complete));
        }
        let mut seen = vec![false; study.states.len()];
        let mut queue: VecDeque<usize> = roots.into_iter().collect();
        while let Some(i) = queue.pop_front() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            queue.extend(edges[i].iter().copied());
        }
        for (i, s) in study.states.iter().enumerate() {
            if !seen[i] {
                c.err(
                    &format!("/states/{i}"),
                    format!("state `{}` is unreachable", s.id),
                    Some("add a transition to it, unlock it from an action, or remove it".into()),
                );
            }
        }
    }

    compiled.page_when = c.flow();
    c.scenario();
    c.judges();
    c.simulated_users();
    compiled.warnings = c.platforms();
    compiled.warnings.extend(c.no_preview());
    compiled.warnings.extend(c.machine_names());
    compiled.warnings.extend(c.default_words());

    (compiled, c.problems)
}
