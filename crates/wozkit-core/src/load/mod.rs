//! Loading a study: YAML text → checked [`Study`] with compiled conditions.
//!
//! Loading runs in three passes so that an author sees *every* problem at once:
//! 1. YAML syntax (serde-saphyr; duplicate keys rejected) into a JSON value;
//! 2. shape against the JSON Schema derived from the model (unknown keys, wrong types), all errors;
//! 3. meaning (`validate`): references, reachability, conditions, slots, media.
//!
//! Every problem is a [`Diagnostic`] printed as `FILE:LINE:COL: message` with a hint.

mod builtin;
mod overlay;
mod positions;
mod validate;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use builtin::{builtin_files, builtin_names};
pub use overlay::{
    PriorsOverlay, apply_priors_file, apply_priors_text, parse_priors_overlay, resolve_with_priors,
};
pub(crate) use positions::pointer_escape;
pub use positions::{Pos, Positions};
pub(crate) use validate::did_you_mean;
pub use validate::{FLOW_VARS, kind_name};

use crate::expr::Condition;
use crate::model::Study;

/// One problem in a study file.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )?;
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

/// All problems found in a study.
#[derive(Clone, Debug)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        write!(f, "{} problem(s)", self.0.len())
    }
}

impl std::error::Error for Diagnostics {}

/// Where the study's files (YAML and media) come from.
#[derive(Clone, Debug)]
pub enum StudySource {
    /// A folder on disk.
    Dir(PathBuf),
    /// A study built into the binary, by name.
    Builtin(String),
}

impl StudySource {
    /// Reads a file of the study by relative path; refuses absolute paths and `..`.
    pub fn read(&self, rel: &str) -> Option<Vec<u8>> {
        let p = Path::new(rel);
        if rel.is_empty()
            || p.is_absolute()
            || p.components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return None;
        }
        match self {
            StudySource::Dir(dir) => std::fs::read(dir.join(p)).ok(),
            StudySource::Builtin(name) => builtin::read(name, rel),
        }
    }
}

/// Conditions compiled once, indexed like the study's vectors.
#[derive(Clone, Debug, Default)]
pub struct Compiled {
    pub state_index: HashMap<String, usize>,
    pub initial: usize,
    pub state_when: Vec<Option<Condition>>,
    pub transition_when: Vec<Vec<Option<Condition>>>,
    pub action_guard: Vec<Option<Condition>>,
    /// Each action's guard parts with their reasons (empty for a guard of one condition): when
    /// the guard fails, the first part that does not hold says why.
    pub action_guard_parts: Vec<Vec<(Condition, String)>>,
    pub goal: Option<Condition>,
    /// `world.alarm.cleared_when`.
    pub alarm_cleared: Option<Condition>,
    pub finish_when: Option<Condition>,
    pub bonus_when: Option<Condition>,
    /// Each page's `when`, for the user flow then the wizard flow.
    pub page_when: validate::PageConditions,
    /// The variables the conditions above read (see [`Compiled::conditions`]): what
    /// `engine::vars` builds. `None` (not analysed) builds every variable.
    pub reads: Option<crate::expr::Reads>,
    /// The study's templates parsed once (states, lock prompts, fixed options).
    pub templates: crate::slots::Templates,
    /// The index of the state each transition leads to, by state and transition (`None`: no
    /// such state); empty when not computed, and the engine then looks the ids up.
    pub transition_to: Vec<Vec<Option<usize>>>,
    /// What `wozkit validate` points out without refusing the study (a study sending
    /// Prolific participants back without a Prolific code for an ending they can reach).
    pub warnings: Vec<Diagnostic>,
}

impl Compiled {
    /// Every compiled condition.
    pub fn conditions(&self) -> impl Iterator<Item = &Condition> {
        self.state_when
            .iter()
            .chain(self.transition_when.iter().flatten())
            .chain(&self.action_guard)
            .chain([
                &self.goal,
                &self.alarm_cleared,
                &self.finish_when,
                &self.bonus_when,
            ])
            .chain(self.page_when.iter().flatten())
            .flatten()
    }
}

/// A study that passed every check, ready for the engine.
#[derive(Clone, Debug)]
pub struct LoadedStudy {
    pub study: Study,
    pub source: StudySource,
    pub compiled: Compiled,
    /// The wizard's database (`study.database`), loaded once and shared by every session.
    pub database: Option<std::sync::Arc<crate::database::Database>>,
}

impl LoadedStudy {
    pub fn state_idx(&self, id: &str) -> Option<usize> {
        self.compiled.state_index.get(id).copied()
    }
}

/// Loads `arg`: a study file, a folder holding `study.yaml`, or the name of a built-in study.
pub fn resolve(arg: &str) -> Result<LoadedStudy, Diagnostics> {
    let path = Path::new(arg);
    if path.exists() {
        return load_path(path);
    }
    if builtin_names().iter().any(|n| *n == arg) {
        return load_builtin(arg);
    }
    Err(Diagnostics(vec![Diagnostic {
        file: arg.to_string(),
        line: 1,
        col: 1,
        message: format!("no study file, folder or built-in study named `{arg}`"),
        hint: Some(format!("built-in studies: {}", builtin_names().join(", "))),
    }]))
}

/// Loads a study file or a folder with `study.yaml`.
pub fn load_path(path: &Path) -> Result<LoadedStudy, Diagnostics> {
    let (dir, file) = if path.is_dir() {
        (path.to_path_buf(), path.join("study.yaml"))
    } else {
        (
            path.parent().map(Path::to_path_buf).unwrap_or_default(),
            path.to_path_buf(),
        )
    };
    let label = file.display().to_string();
    let text = std::fs::read_to_string(&file).map_err(|e| {
        Diagnostics(vec![Diagnostic {
            file: label.clone(),
            line: 1,
            col: 1,
            message: format!("cannot read the study file: {e}"),
            hint: Some("pass a study YAML file, or a folder containing study.yaml".into()),
        }])
    })?;
    load_text(&label, &text, StudySource::Dir(dir))
}

/// Loads a built-in study by name.
pub fn load_builtin(name: &str) -> Result<LoadedStudy, Diagnostics> {
    let text = builtin::read(name, "study.yaml")
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default();
    load_text(
        &format!("builtin:{name}/study.yaml"),
        &text,
        StudySource::Builtin(name.to_string()),
    )
}

/// Loads a study from its YAML text; `file` labels the diagnostics.
pub fn load_text(file: &str, text: &str, source: StudySource) -> Result<LoadedStudy, Diagnostics> {
    let positions = Positions::of(text);
    let diag = |pointer: &str, message: String, hint: Option<String>| {
        let pos = positions.find(pointer);
        Diagnostic {
            file: file.to_string(),
            line: pos.line,
            col: pos.col,
            message,
            hint,
        }
    };

    // Pass 1: syntax.
    let value = parse_yaml(file, text)?;
    // Pass 2: shape.
    let mut study = study_of(value, &diag)?;
    let file_dialogues = read_dialogues_file(&mut study, &source, &diag)?;
    default_systems(&mut study);

    // Pass 3: meaning.
    let (mut compiled, problems) =
        validate::check(&study, &source, file_dialogues, &|ptr, msg, hint| {
            diag(ptr, msg, hint)
        });
    let mut problems = problems;
    let database = load_database(&study, &source, &diag, &mut problems);
    if let Some(rules) = &study.goals
        && (database.is_some() || study.database.is_none())
    {
        for (ptr, msg, hint) in crate::goals::check(rules, database.as_deref()) {
            problems.push(diag(&ptr, msg, hint));
        }
    }
    // Columns are looked up in the loaded database: a table that failed to load is reported
    // already.
    if database.is_some() || study.database.is_none() {
        for (ptr, msg, hint) in crate::datasets::check(&study, database.as_deref()) {
            problems.push(diag(&ptr, msg, hint));
        }
    }
    if problems.is_empty() {
        finish_compiled(&mut compiled, &study);
        Ok(LoadedStudy {
            study,
            source,
            compiled,
            database,
        })
    } else {
        Err(Diagnostics(problems))
    }
}

/// Pass 1 of loading: the YAML text as a value; a syntax error names its line and column.
fn parse_yaml(file: &str, text: &str) -> Result<serde_json::Value, Diagnostics> {
    serde_saphyr::from_str(text).map_err(|e| {
        let (line, col) = e
            .location()
            .map(|l| (l.line() as usize, l.column() as usize))
            .unwrap_or((1, 1));
        let message = e.without_snippet().to_string();
        let message = message.lines().next().unwrap_or("invalid YAML").to_string();
        Diagnostics(vec![Diagnostic {
            file: file.to_string(),
            line,
            col,
            message: format!("invalid YAML: {message}"),
            hint: Some("check indentation and quoting on this line".into()),
        }])
    })
}

/// Pass 2 of loading: the value checked against the study's schema, then read as a study.
fn study_of(
    value: serde_json::Value,
    diag: &impl Fn(&str, String, Option<String>) -> Diagnostic,
) -> Result<Study, Diagnostics> {
    let schema = serde_json::to_value(schemars::schema_for!(Study)).unwrap_or_default();
    let mut problems = Vec::new();
    match jsonschema::validator_for(&schema) {
        Ok(validator) => {
            for err in validator.iter_errors(&value) {
                shape_problem(&err, &schema, &value, diag, &mut problems);
            }
        }
        Err(e) => problems.push(diag("", format!("internal schema error: {e}"), None)),
    }
    if !problems.is_empty() {
        return Err(Diagnostics(problems));
    }
    serde_json::from_value(value).map_err(|e| Diagnostics(vec![diag("", e.to_string(), None)]))
}

/// What is compiled once a study has no problems: the variables its conditions read, its
/// templates, and the state each transition goes to.
fn finish_compiled(compiled: &mut Compiled, study: &Study) {
    compiled.reads = Some(crate::expr::Reads::of(compiled.conditions()));
    compiled.templates = crate::slots::Templates::of(study);
    compiled.transition_to = study
        .states
        .iter()
        .map(|s| {
            s.transitions
                .iter()
                .map(|t| compiled.state_index.get(t.to()).copied())
                .collect()
        })
        .collect();
}

/// Loads `study.database` into SQLite; a problem (naming the data file, row and column) is
/// reported at the table's key in the study file.
fn load_database(
    study: &Study,
    source: &StudySource,
    diag: &dyn Fn(&str, String, Option<String>) -> Diagnostic,
    problems: &mut Vec<Diagnostic>,
) -> Option<std::sync::Arc<crate::database::Database>> {
    let spec = study.database.as_ref()?;
    match crate::database::Database::load(spec, source) {
        Ok(db) => {
            crate::database::check_slots(study, &db, diag, problems);
            Some(std::sync::Arc::new(db))
        }
        Err(e) => {
            let ptr = if e.table.is_empty() {
                "/database".to_string()
            } else if spec.tables.get(&e.table).is_some_and(|t| t.file.is_some()) {
                format!("/database/tables/{}/file", e.table)
            } else {
                format!("/database/tables/{}", e.table)
            };
            problems.push(diag(
                &ptr,
                e.to_string(),
                Some("tables are CSV (a header row) or JSON (an array of objects) files in the study folder".into()),
            ));
            None
        }
    }
}

/// A chat or arena evaluation that lists no systems tests every declared one.
pub fn default_systems(study: &mut Study) {
    let declared: Vec<String> = study.systems.keys().cloned().collect();
    if let Some(ev) = study.evaluation.as_mut()
        && ev.task.is_live()
        && (ev.systems.is_empty() || ev.systems_defaulted)
    {
        ev.systems = declared;
        ev.systems_defaulted = true;
    }
}

/// Appends the dialogues of `evaluation.dialogues_file` to the study's; returns how many.
/// A file that is missing or does not parse is reported at its own line and column.
fn read_dialogues_file(
    study: &mut Study,
    source: &StudySource,
    diag: &dyn Fn(&str, String, Option<String>) -> Diagnostic,
) -> Result<usize, Diagnostics> {
    let Some(ev) = study.evaluation.as_mut() else {
        return Ok(0);
    };
    let Some(rel) = ev.dialogues_file.clone() else {
        return Ok(0);
    };
    let Some(bytes) = source.read(&rel) else {
        return Err(Diagnostics(vec![diag(
            "/evaluation/dialogues_file",
            format!("dialogues file `{rel}` not found"),
            Some("paths are relative to the study folder".into()),
        )]));
    };
    let text = String::from_utf8_lossy(&bytes);
    let parsed: Vec<crate::evaluation::Dialogue> = serde_saphyr::from_str(&text).map_err(|e| {
        let (line, col) = e
            .location()
            .map(|l| (l.line() as usize, l.column() as usize))
            .unwrap_or((1, 1));
        let message = e.without_snippet().to_string();
        Diagnostics(vec![Diagnostic {
            file: rel.clone(),
            line,
            col,
            message: format!(
                "dialogues file: {}",
                message.lines().next().unwrap_or("invalid YAML")
            ),
            hint: Some(
                "a list of dialogues: `- {id: ..., system: ..., turns: [{speaker: ..., text: ...}]}`"
                    .into(),
            ),
        }])
    })?;
    let n = parsed.len();
    ev.dialogues.extend(parsed);
    Ok(n)
}

/// The diagnostics of one schema error.
fn shape_problem(
    err: &jsonschema::ValidationError<'_>,
    schema: &serde_json::Value,
    value: &serde_json::Value,
    diag: &impl Fn(&str, String, Option<String>) -> Diagnostic,
    problems: &mut Vec<Diagnostic>,
) {
    use jsonschema::error::ValidationErrorKind as Kind;
    let ptr = err.instance_path().as_str().to_string();
    match err.kind() {
        Kind::AdditionalProperties { unexpected } => {
            for key in unexpected {
                problems.push(diag(
                    &format!("{ptr}/{key}"),
                    format!("unknown key `{key}`"),
                    Some(validate::expected_keys_hint(schema, value, &ptr, key)),
                ));
            }
        }
        // The schema validator names two values and counts the rest; a study author needs
        // them all (question kinds, page languages).
        Kind::Enum { options } => {
            let listed: Vec<String> = options
                .as_array()
                .map(|a| a.iter().map(ToString::to_string).collect())
                .unwrap_or_default();
            problems.push(diag(
                &ptr,
                format!("{} is not one of {}", err.instance(), listed.join(", ")),
                None,
            ));
        }
        Kind::Maximum { limit } => {
            problems.push(out_of_range(diag, &ptr, err.instance(), "at most", limit));
        }
        Kind::Minimum { limit } => {
            problems.push(out_of_range(diag, &ptr, err.instance(), "at least", limit));
        }
        // An optional section (`payment: ...`) is "a Payment or null": when the value is not
        // null, the author meant the Payment, so its own errors (with their positions) are the
        // ones to report, not "not valid under any of the schemas".
        Kind::AnyOf { context }
            if let [meant] = context
                .iter()
                .filter(|branch| !only_wrong_type_here(branch, &ptr))
                .collect::<Vec<_>>()
                .as_slice() =>
        {
            for e in meant.iter() {
                shape_problem(e, schema, value, diag, problems);
            }
        }
        _ => problems.push(diag(
            &ptr,
            format!("{} (at {})", err, if ptr.is_empty() { "/" } else { &ptr }),
            None,
        )),
    }
}

/// Whether a branch of an `anyOf` failed only because the value has another type altogether.
fn only_wrong_type_here(branch: &[jsonschema::ValidationError<'_>], ptr: &str) -> bool {
    matches!(branch, [e] if e.instance_path().as_str() == ptr
        && matches!(e.kind(), jsonschema::error::ValidationErrorKind::Type { .. }))
}

/// A number outside the bounds the model declares (see `model::MAX_SECONDS` and its neighbours),
/// named by its key: `duration.default is 100000000, but must be at most 86400`.
fn out_of_range(
    diag: &impl Fn(&str, String, Option<String>) -> Diagnostic,
    ptr: &str,
    value: &serde_json::Value,
    bound: &str,
    limit: &serde_json::Value,
) -> Diagnostic {
    // The last two pointer segments name the field (`duration/default`, `by_kind/aerial`).
    let segs: Vec<&str> = ptr.rsplit('/').take(2).collect();
    let name = segs
        .iter()
        .rev()
        .filter(|s| !s.is_empty() && s.parse::<usize>().is_err())
        .copied()
        .collect::<Vec<_>>()
        .join(".");
    let unit = if limit.as_u64() == Some(u64::from(crate::model::MAX_SECONDS)) {
        " seconds (24 hours)"
    } else {
        ""
    };
    diag(
        ptr,
        format!("`{name}` is {value}, but must be {bound} {limit}{unit}"),
        Some("the bounds of every number are listed in docs/engine-semantics.md".into()),
    )
}

/// The JSON Schema of the study format, for editors.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Study)).unwrap_or_default()
}
