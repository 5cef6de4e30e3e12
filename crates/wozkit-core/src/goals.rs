//! User goals: what the user of a grounded study is asked to find out, drawn per session from the
//! study's tables by its `goals:` rules (as CrossWOZ's goal generator does), and the per-turn
//! state of that goal and of the wizard's searches.
//!
//! A goal is a list of sub-goals, one per domain (a table of the study's database). Each sub-goal
//! is drawn from one real row: its constraints are that row's values (so the goal can always be
//! met), its requested slots are columns whose values the wizard must tell. A sub-goal may refer
//! to an earlier one ("a hotel among the nearby hotels of sub-goal 1's attraction"): the row is
//! then drawn among the rows whose `slot` value is listed in the earlier row's `column`.
//!
//! The engine draws at `Start` with a seed taken from the step's RNG and logs the goal as one
//! `goal_generated` event right after `session_started` (and the scenario draw); replay applies
//! the event and never draws again. After every chat message the engine logs a `turn_state`
//! event: the user state (every goal entry with its `satisfied` flag) and the wizard's belief
//! state (per domain the constraints of its last search and the selected result), folded from the
//! log by the rules of [`GoalTrack`]. `docs/engine-semantics.md` (*User goals*) states the rules.

use indexmap::IndexMap;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::database::{Database, Filter, FilterOp, Row, TableInfo, value_text};
use crate::event::Role;

/// The `goals:` block of a study: how each session's user goal is drawn from the database.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalRules {
    /// How many sub-goals a goal has (each in a different domain); drawn uniformly between
    /// `min` and `max`, at most the number of domains.
    #[serde(default)]
    pub subgoals: Count,
    /// The domains sub-goals are drawn from, in the order sub-goals are listed.
    pub domains: Vec<DomainRule>,
    /// Cross-domain references: a later sub-goal's row chosen relative to an earlier one's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<ReferenceRule>,
    /// How the goal's sentences are written (English when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<GoalText>,
}

/// A number drawn between `min` and `max`, both included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Count {
    #[serde(default = "one")]
    pub min: u32,
    #[serde(default = "one")]
    pub max: u32,
}

impl Default for Count {
    fn default() -> Self {
        Count { min: 1, max: 1 }
    }
}

fn one() -> u32 {
    1
}

fn weight_one() -> f64 {
    1.0
}

fn half() -> f64 {
    0.5
}

/// One domain of the goal rules: a table of the study's database.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DomainRule {
    /// The table (a key of `database.tables`).
    pub table: String,
    /// The domain's name in the goal and the exports (e.g. `景点`); the table's name if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The column naming a result (what `selectedResults` lists); the table's key if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Relative chance of the domain being drawn.
    #[serde(default = "weight_one")]
    pub weight: f64,
    /// The columns constraints are drawn from, and how many.
    #[serde(default)]
    pub constraints: SlotRule,
    /// The columns the user asks for, and how many.
    #[serde(default)]
    pub requests: SlotRule,
    /// Range constraints of numeric columns, as CrossWOZ's goals have them (`评分` `4.5分以上`,
    /// `人均消费` `50-100元`): a constraint drawn on a column listed here takes, instead of the
    /// row's value, one of the bands holding that value (uniformly among them); a value no band
    /// holds stays the plain value.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub ranges: IndexMap<String, Vec<RangeBand>>,
}

/// One band of a range constraint: the numbers from `min` to `max` (both included; one of them
/// may be left out), written `text` in the goal (`50-100元`, `4分以上`, `免费` for 0 to 0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RangeBand {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    pub text: String,
}

impl RangeBand {
    /// Whether `x` lies in the band.
    pub fn holds(&self, x: f64) -> bool {
        self.min.is_none_or(|m| x >= m) && self.max.is_none_or(|m| x <= m)
    }
}

impl DomainRule {
    /// The domain's name in goals and exports.
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.table)
    }
}

/// Which columns a sub-goal's constraints or requests come from.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlotRule {
    /// Candidate columns; `count` of them are drawn (those with an empty value in the drawn row
    /// are never drawn as constraints).
    #[serde(default)]
    pub columns: Vec<String>,
    /// How many of `columns` are drawn.
    #[serde(default)]
    pub count: Count,
    /// Columns always included (before the drawn ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub always: Vec<String>,
}

/// A cross-domain reference: the sub-goal of table `to` takes, with `probability`, a row whose
/// `slot` value is listed in the `column` of the earlier sub-goal of table `from`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReferenceRule {
    /// The earlier sub-goal's table.
    pub from: String,
    /// A column of `from` listing names (items separated by `,`, `，`, `、`, `;` or `|`).
    pub column: String,
    /// The later sub-goal's table.
    pub to: String,
    /// The column of `to` whose value must be one of the listed names.
    pub slot: String,
    /// Chance that the reference is used when both sub-goals are drawn.
    #[serde(default = "half")]
    pub probability: f64,
    /// The constraint's value as the user reads it; `{id}` is the earlier sub-goal's id and
    /// `{column}` the column. Default: `in the {column} of sub-goal {id}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A generated goal, as the `goal_generated` event carries it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    pub subgoals: Vec<SubGoal>,
}

/// One sub-goal: a domain, the row it was drawn from, constraints and requested slots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubGoal {
    /// From 1, in order.
    pub id: u32,
    /// The domain's label.
    pub domain: String,
    pub table: String,
    /// The key of the row the constraints were drawn from (one row that meets them all).
    pub row: String,
    pub constraints: Vec<GoalSlot>,
    /// Requested slots; `value` is empty in the generated goal.
    pub requests: Vec<GoalSlot>,
}

/// A constraint or a requested slot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalSlot {
    /// The column.
    pub slot: String,
    /// A constraint's value (the drawn row's value as text, or a reference's text); a request's
    /// value once informed (empty before).
    pub value: String,
    /// A cross-domain reference: the value is the name of the referenced sub-goal's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<GoalRef>,
    /// A range constraint: the band the value writes (`value` is the band's text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<GoalRange>,
}

/// The numbers a range constraint accepts, both bounds included.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalRange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

impl GoalRange {
    /// Whether `x` lies in the range.
    pub fn holds(&self, x: f64) -> bool {
        self.min.is_none_or(|m| x >= m) && self.max.is_none_or(|m| x <= m)
    }

    /// Whether every number a search filter admits lies in the range: a range filter within it,
    /// or an equals filter on a number in it.
    pub fn covers(&self, f: &Filter) -> bool {
        match &f.op {
            FilterOp::Range { min, max } => {
                (min.is_some() || max.is_some())
                    && self.min.is_none_or(|g| min.is_some_and(|m| m >= g))
                    && self.max.is_none_or(|g| max.is_some_and(|m| m <= g))
                    && min.zip(*max).is_none_or(|(a, b)| a <= b)
            }
            FilterOp::Equals { value } => value_text(value)
                .trim()
                .parse::<f64>()
                .is_ok_and(|x| self.holds(x)),
            FilterOp::Contains { .. } => false,
        }
    }
}

/// What a reference constraint points at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalRef {
    /// The referenced sub-goal's id.
    pub subgoal: u32,
    /// The column of its result listing the acceptable values.
    pub column: String,
}

/// Whether a goal entry is a constraint or a requested slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    Constraint,
    Request,
}

/// One line of the user state: a constraint or request of a sub-goal and whether it is satisfied
/// (a constraint expressed, a request informed). CrossWOZ's tuple
/// `[subgoal, domain, slot, value, satisfied]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalEntry {
    pub subgoal: u32,
    pub domain: String,
    pub slot: String,
    pub value: String,
    pub kind: EntryKind,
    #[serde(default)]
    pub satisfied: bool,
}

/// The wizard's belief state in one domain: the constraints of its last search there, as
/// strings (`x`, `x-y`, `>x`, `<x`), and the names of the selected results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DomainBelief {
    #[serde(default)]
    pub constraints: IndexMap<String, String>,
    #[serde(default)]
    pub selected_results: Vec<String>,
}

/// Belief state by domain label.
pub type Belief = IndexMap<String, DomainBelief>;

/// The goal entries of a freshly generated goal: constraints then requests of each sub-goal,
/// nothing satisfied.
pub fn entries(goal: &Goal) -> Vec<GoalEntry> {
    let mut out = vec![];
    for sg in &goal.subgoals {
        for (kind, slots) in [
            (EntryKind::Constraint, &sg.constraints),
            (EntryKind::Request, &sg.requests),
        ] {
            for s in slots {
                out.push(GoalEntry {
                    subgoal: sg.id,
                    domain: sg.domain.clone(),
                    slot: s.slot.clone(),
                    value: s.value.clone(),
                    kind,
                    satisfied: false,
                });
            }
        }
    }
    out
}

/// How the goal's sentences are written (`goals.text`): templates for a sub-goal, its constraints
/// and its requests. In every template `{id}` is the sub-goal's id and `{domain}` its domain; in
/// `constraint`, `{slot}` and `{value}`; in `requests`, `{slots}` (the requested slots joined by
/// `separator`); in `sentence`, `{constraints}` (every constraint's text, one after the other)
/// and `{requests}` (empty when nothing is requested). `title` and `done` are the words of the
/// user's goal panel.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalText {
    #[serde(default = "default_sentence")]
    pub sentence: String,
    #[serde(default = "default_constraint")]
    pub constraint: String,
    #[serde(default = "default_requests")]
    pub requests: String,
    #[serde(default = "default_separator")]
    pub separator: String,
    /// The heading of the user's goal panel.
    #[serde(default = "default_title")]
    pub title: String,
    /// Written after a goal entry of the panel once it is satisfied.
    #[serde(default = "default_done")]
    pub done: String,
    /// How the user reads a constraint that refers to an earlier sub-goal (`references`), in
    /// the sentence and the panel: `{id}` is the earlier sub-goal's id (as the panel numbers
    /// it) and `{column}` its column. Without it the stored value is shown, which a dataset's
    /// convention may write for machines (CrossWOZ's `出现在id=1的周边酒店里`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

impl GoalText {
    /// A constraint's value as the user reads it: the stored value, or for a reference to an
    /// earlier sub-goal the study's `reference` wording.
    pub fn shown_value(&self, c: &GoalSlot) -> String {
        match (&self.reference, &c.reference) {
            (Some(tpl), Some(r)) => tpl
                .replace("{id}", &r.subgoal.to_string())
                .replace("{column}", &r.column),
            _ => c.value.clone(),
        }
    }
}

impl Default for GoalText {
    fn default() -> Self {
        GoalText {
            sentence: default_sentence(),
            constraint: default_constraint(),
            requests: default_requests(),
            separator: default_separator(),
            title: default_title(),
            done: default_done(),
            reference: None,
        }
    }
}

fn default_title() -> String {
    "Your goal".into()
}
fn default_done() -> String {
    "(done)".into()
}

fn default_sentence() -> String {
    "Sub-goal {id} ({domain}): find one{constraints}{requests}.".into()
}
fn default_constraint() -> String {
    " with {slot} {value}".into()
}
fn default_requests() -> String {
    "; ask for {slots}".into()
}
fn default_separator() -> String {
    ", ".into()
}

/// The goal's description, one sentence per sub-goal written by `text` (English by default):
/// what the user's panel heads each sub-goal with and the `task description` lines of the
/// CrossWOZ export.
pub fn describe(goal: &Goal, text: Option<&GoalText>) -> Vec<String> {
    let default = GoalText::default();
    let t = text.unwrap_or(&default);
    goal.subgoals
        .iter()
        .map(|sg| {
            let fill = |tpl: &str| {
                tpl.replace("{id}", &sg.id.to_string())
                    .replace("{domain}", &sg.domain)
            };
            let constraints: String = sg
                .constraints
                .iter()
                .map(|c| {
                    fill(&t.constraint)
                        .replace("{slot}", &c.slot)
                        .replace("{value}", &t.shown_value(c))
                })
                .collect();
            let requests = if sg.requests.is_empty() {
                String::new()
            } else {
                let slots: Vec<&str> = sg.requests.iter().map(|r| r.slot.as_str()).collect();
                fill(&t.requests).replace("{slots}", &slots.join(&t.separator))
            };
            fill(&t.sentence)
                .replace("{constraints}", &constraints)
                .replace("{requests}", &requests)
        })
        .collect()
}

/// Why a goal could not be drawn (a study that passed [`check`] only meets these when a table
/// is empty).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GoalError {
    #[error("goals: the table `{table}` has no rows to draw a sub-goal from")]
    EmptyTable { table: String },
    #[error("goals: the table `{table}`: {message}")]
    Database { table: String, message: String },
}

/// Splits a listing column's value into its items (`,`, `，`, `、`, `;`, `|`), trimmed.
pub fn items(text: &str) -> Vec<String> {
    text.split([',', '，', '、', ';', '|'])
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether `value` is one of the items listed in `listing` (case aside).
fn listed(listing: &str, value: &str) -> bool {
    let v = value.trim().to_lowercase();
    !v.is_empty() && items(listing).iter().any(|i| i.to_lowercase() == v)
}

fn cell(row: &Row, column: &str) -> String {
    row.get(column).map(value_text).unwrap_or_default()
}

/// Picks up to `k` of `from` in random order, then restores their order in `from`.
fn pick<T: Clone + PartialEq>(from: &[T], k: usize, rng: &mut impl Rng) -> Vec<T> {
    let mut idx: Vec<usize> = (0..from.len()).collect();
    let k = k.min(idx.len());
    for i in 0..k {
        let j = rng.random_range(i..idx.len());
        idx.swap(i, j);
    }
    let mut chosen: Vec<usize> = idx[..k].to_vec();
    chosen.sort_unstable();
    chosen.into_iter().map(|i| from[i].clone()).collect()
}

fn draw_count(c: Count, rng: &mut impl Rng) -> usize {
    let (lo, hi) = (c.min.min(c.max), c.max.max(c.min));
    rng.random_range(lo..=hi) as usize
}

/// Draws a goal from `db` by `rules` with `seed`: the same seed, rules and tables give the same
/// goal.
pub fn generate(rules: &GoalRules, db: &Database, seed: u64) -> Result<Goal, GoalError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let chosen = choose_domains(rules, &mut rng);
    let mut subgoals: Vec<SubGoal> = vec![];
    let mut drawn_rows: Vec<Row> = vec![];
    for (i, &di) in chosen.iter().enumerate() {
        let (subgoal, row) = draw_subgoal(rules, db, &mut rng, i, di, &subgoals, &drawn_rows)?;
        subgoals.push(subgoal);
        drawn_rows.push(row);
    }
    Ok(Goal { subgoals })
}

/// Draws how many sub-goals a goal has, then that many distinct domains by weight; their indices
/// in the rules' order.
fn choose_domains(rules: &GoalRules, rng: &mut impl Rng) -> Vec<usize> {
    let n = draw_count(rules.subgoals, rng)
        .max(1)
        .min(rules.domains.len());
    // Distinct domains by weight, then listed in the rules' order.
    let mut left: Vec<usize> = (0..rules.domains.len()).collect();
    let mut chosen: Vec<usize> = vec![];
    for _ in 0..n {
        let total: f64 = left.iter().map(|&i| rules.domains[i].weight.max(0.0)).sum();
        let at = if total > 0.0 {
            let mut r = rng.random::<f64>() * total;
            left.iter()
                .position(|&i| {
                    let w = rules.domains[i].weight.max(0.0);
                    if r < w {
                        true
                    } else {
                        r -= w;
                        false
                    }
                })
                .unwrap_or(left.len() - 1)
        } else {
            rng.random_range(0..left.len())
        };
        chosen.push(left.remove(at));
    }
    chosen.sort_unstable();
    chosen
}

/// Draws sub-goal `i` (numbered from 1) from the domain `di`, given the sub-goals drawn before it
/// and their rows; the sub-goal and the row it was drawn from.
fn draw_subgoal(
    rules: &GoalRules,
    db: &Database,
    rng: &mut impl Rng,
    i: usize,
    di: usize,
    subgoals: &[SubGoal],
    drawn_rows: &[Row],
) -> Result<(SubGoal, Row), GoalError> {
    let rule = &rules.domains[di];
    let all = db.all_rows(&rule.table).map_err(|e| GoalError::Database {
        table: rule.table.clone(),
        message: e.to_string(),
    })?;
    if all.is_empty() {
        return Err(GoalError::EmptyTable {
            table: rule.table.clone(),
        });
    }
    let key = db
        .tables()
        .get(&rule.table)
        .map(|t| t.key.clone())
        .unwrap_or_default();
    let (candidates, reference) = match draw_reference(rules, rule, &all, subgoals, drawn_rows, rng)
    {
        Some((slot, name, cands)) => (cands, Some((slot, name))),
        None => (all.iter().collect(), None),
    };
    let row = candidates[rng.random_range(0..candidates.len())].clone();
    let (constraints, taken) = draw_constraints(rule, &row, reference, rng);
    let requests = draw_requests(rule, &taken, rng);
    let subgoal = SubGoal {
        id: u32::try_from(i + 1).unwrap_or(u32::MAX),
        domain: rule.label().to_string(),
        table: rule.table.clone(),
        row: cell(&row, &key),
        constraints,
        requests,
    };
    Ok((subgoal, row))
}

/// The first reference into `rule`'s table that is drawn (by its probability) and whose earlier
/// sub-goal's row lists some of `all`: the constraint it makes, its slot, and the rows it allows.
fn draw_reference<'a>(
    rules: &GoalRules,
    rule: &DomainRule,
    all: &'a [Row],
    subgoals: &[SubGoal],
    drawn_rows: &[Row],
    rng: &mut impl Rng,
) -> Option<(GoalSlot, String, Vec<&'a Row>)> {
    for rr in rules.references.iter().filter(|r| r.to == rule.table) {
        let Some(pi) = subgoals.iter().position(|sg| sg.table == rr.from) else {
            continue;
        };
        if rng.random::<f64>() >= rr.probability {
            continue;
        }
        let listing = cell(&drawn_rows[pi], &rr.column);
        let cands: Vec<&Row> = all
            .iter()
            .filter(|r| listed(&listing, &cell(r, &rr.slot)))
            .collect();
        if cands.is_empty() {
            continue;
        }
        let id = subgoals[pi].id;
        let text = rr
            .text
            .as_deref()
            .unwrap_or("in the {column} of sub-goal {id}")
            .replace("{id}", &id.to_string())
            .replace("{column}", &rr.column);
        let slot = GoalSlot {
            slot: rr.slot.clone(),
            value: text,
            reference: Some(GoalRef {
                subgoal: id,
                column: rr.column.clone(),
            }),
            range: None,
        };
        return Some((slot, rr.slot.clone(), cands));
    }
    None
}

/// Draws a sub-goal's constraints from `row`: the reference's first, then the columns always
/// drawn, then a drawn number of the others; the constraints and the columns they take.
fn draw_constraints(
    rule: &DomainRule,
    row: &Row,
    reference: Option<(GoalSlot, String)>,
    rng: &mut impl Rng,
) -> (Vec<GoalSlot>, Vec<String>) {
    let ref_slot = reference.as_ref().map(|(_, s)| s.clone());
    let mut constraints: Vec<GoalSlot> = vec![];
    let mut taken: Vec<String> = vec![];
    if let Some((slot, name)) = reference {
        constraints.push(slot);
        taken.push(name);
    }
    let fixed: Vec<String> = rule
        .constraints
        .always
        .iter()
        .filter(|c| Some(*c) != ref_slot.as_ref() && !cell(row, c).is_empty())
        .cloned()
        .collect();
    let open: Vec<String> = rule
        .constraints
        .columns
        .iter()
        .filter(|c| Some(*c) != ref_slot.as_ref() && !fixed.contains(c) && !cell(row, c).is_empty())
        .cloned()
        .collect();
    let k = draw_count(rule.constraints.count, rng);
    for c in fixed.into_iter().chain(pick(&open, k, rng)) {
        constraints.push(constraint_slot(rule, row, &c, rng));
        taken.push(c);
    }
    (constraints, taken)
}

/// The constraint on column `c` of `row`: for a range column, one of the bands holding the row's
/// number, else the plain value.
fn constraint_slot(rule: &DomainRule, row: &Row, c: &str, rng: &mut impl Rng) -> GoalSlot {
    let value = cell(row, c);
    // A range column: one of the bands holding the row's number, else the plain value.
    let bands: Vec<&RangeBand> = match (rule.ranges.get(c), value.trim().parse::<f64>()) {
        (Some(bands), Ok(x)) => bands.iter().filter(|b| b.holds(x)).collect(),
        _ => vec![],
    };
    let (value, range) = if bands.is_empty() {
        (value, None)
    } else {
        let b = bands[rng.random_range(0..bands.len())];
        (
            b.text.clone(),
            Some(GoalRange {
                min: b.min,
                max: b.max,
            }),
        )
    };
    GoalSlot {
        value,
        slot: c.to_string(),
        reference: None,
        range,
    }
}

/// Draws a sub-goal's requests: the columns always requested, then a drawn number of the others,
/// none of them a column already `taken` by a constraint.
fn draw_requests(rule: &DomainRule, taken: &[String], rng: &mut impl Rng) -> Vec<GoalSlot> {
    let fixed: Vec<String> = rule
        .requests
        .always
        .iter()
        .filter(|c| !taken.contains(c))
        .cloned()
        .collect();
    let open: Vec<String> = rule
        .requests
        .columns
        .iter()
        .filter(|c| !taken.contains(c) && !fixed.contains(c))
        .cloned()
        .collect();
    let k = draw_count(rule.requests.count, rng);
    fixed
        .into_iter()
        .chain(pick(&open, k, rng))
        .map(|c| GoalSlot {
            slot: c,
            value: String::new(),
            reference: None,
            range: None,
        })
        .collect()
}

/// A filter as a belief-state string: the value; a range as `x-y`, `>x` or `<x` (bounds
/// included, as the wizard's search treats them).
pub fn filter_text(f: &Filter) -> String {
    let num = |x: f64| {
        if x.fract() == 0.0 && x.abs() < 1e15 {
            format!("{}", x as i64)
        } else {
            format!("{x}")
        }
    };
    match &f.op {
        FilterOp::Equals { value } => value_text(value),
        FilterOp::Contains { value } => value.clone(),
        FilterOp::Range { min, max } => match (min, max) {
            (Some(a), Some(b)) => format!("{}-{}", num(*a), num(*b)),
            (Some(a), None) => format!(">{}", num(*a)),
            (None, Some(b)) => format!("<{}", num(*b)),
            (None, None) => String::new(),
        },
    }
}

/// Whether a search filter expresses a constraint's value: equals the same text (case aside),
/// contains text found in the value, or a range holding the (numeric) value.
fn filter_expresses(f: &Filter, value: &str) -> bool {
    let v = value.trim().to_lowercase();
    if v.is_empty() {
        return false;
    }
    match &f.op {
        FilterOp::Equals { value: fv } => value_text(fv).trim().to_lowercase() == v,
        FilterOp::Contains { value: fv } => {
            let fv = fv.trim().to_lowercase();
            !fv.is_empty() && v.contains(&fv)
        }
        FilterOp::Range { min, max } => v.parse::<f64>().is_ok_and(|x| {
            (min.is_some() || max.is_some())
                && min.is_none_or(|m| x >= m)
                && max.is_none_or(|m| x <= m)
        }),
    }
}

/// The live goal state of a session, folded from its events (see the module docs and
/// `docs/engine-semantics.md`, *User goals*).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GoalTrack {
    pub goal: Goal,
    /// The user state: every entry and whether it is satisfied.
    pub entries: Vec<GoalEntry>,
    /// The wizard's belief state, by domain label.
    pub belief: Belief,
    /// The belief right after the wizard's first search of the current turn (none yet: the
    /// turn's belief is `belief`).
    pub belief_init: Option<Belief>,
    /// Domain label of each table the rules name.
    pub labels: IndexMap<String, String>,
    /// Result-name column of each table the rules name (the key when none is given).
    pub names: IndexMap<String, String>,
}

impl GoalTrack {
    /// The state right after `goal_generated`: nothing satisfied, nothing searched.
    pub fn new(goal: Goal, rules: Option<&GoalRules>, db: Option<&Database>) -> GoalTrack {
        let mut labels = IndexMap::new();
        let mut names = IndexMap::new();
        if let Some(r) = rules {
            for d in &r.domains {
                labels.insert(d.table.clone(), d.label().to_string());
                let key = db
                    .and_then(|db| db.tables().get(&d.table))
                    .map(|t| t.key.clone());
                if let Some(n) = d.name.clone().or(key) {
                    names.insert(d.table.clone(), n);
                }
            }
        }
        for sg in &goal.subgoals {
            labels
                .entry(sg.table.clone())
                .or_insert_with(|| sg.domain.clone());
        }
        GoalTrack {
            entries: entries(&goal),
            goal,
            belief: Belief::new(),
            belief_init: None,
            labels,
            names,
        }
    }

    fn label(&self, table: &str) -> String {
        self.labels
            .get(table)
            .cloned()
            .unwrap_or_else(|| table.to_string())
    }

    /// The entries of the sub-goals on `table`, with their goal slots.
    fn slots_of(&self, table: &str) -> Vec<(usize, &SubGoal, &GoalSlot)> {
        let mut out = vec![];
        let mut i = 0;
        for sg in &self.goal.subgoals {
            for s in sg.constraints.iter().chain(&sg.requests) {
                if sg.table == table {
                    out.push((i, sg, s));
                }
                i += 1;
            }
        }
        out
    }

    /// The wizard searched `table` with `filters`: the domain's constraints become the filters';
    /// a constraint of a sub-goal on that table is expressed when a filter on its column matches
    /// its value (a reference: when an equals filter names one of the listed values of the
    /// referenced sub-goal's selected result; a range: when the filter admits only numbers in
    /// the range, see [`GoalRange::covers`]).
    pub fn on_query(&mut self, table: &str, filters: &[Filter], selected: &IndexMap<String, Row>) {
        let label = self.label(table);
        let d = self.belief.entry(label).or_default();
        d.constraints = filters
            .iter()
            .map(|f| (f.column.clone(), filter_text(f)))
            .collect();
        let mut hit = vec![];
        for (i, _, s) in self.slots_of(table) {
            if self.entries[i].kind != EntryKind::Constraint {
                continue;
            }
            let on_slot = filters.iter().filter(|f| f.column == s.slot);
            let yes = match (&s.reference, &s.range) {
                (None, Some(g)) => on_slot.into_iter().any(|f| g.covers(f)),
                (None, None) => on_slot.into_iter().any(|f| filter_expresses(f, &s.value)),
                (Some(r), _) => {
                    let listing = self.referenced(r, selected);
                    on_slot.into_iter().any(|f| match &f.op {
                        FilterOp::Equals { value } => listing
                            .as_deref()
                            .is_some_and(|l| listed(l, &value_text(value))),
                        _ => false,
                    })
                }
            };
            if yes {
                hit.push(i);
            }
        }
        for i in hit {
            self.entries[i].satisfied = true;
        }
        if self.belief_init.is_none() {
            self.belief_init = Some(self.belief.clone());
        }
    }

    /// The listing of the referenced sub-goal's selected result, if it has one.
    fn referenced(&self, r: &GoalRef, selected: &IndexMap<String, Row>) -> Option<String> {
        let sg = self.goal.subgoals.iter().find(|sg| sg.id == r.subgoal)?;
        selected.get(&sg.table).map(|row| cell(row, &r.column))
    }

    /// The wizard selected `row` (key `key`) of `table`: the domain's selected results become its
    /// name (the rules' `name` column, else the key); a reference constraint on that table is
    /// expressed when the row's value is listed in the referenced sub-goal's selected result, and
    /// a range constraint when the row's number lies in its range.
    pub fn on_select(
        &mut self,
        table: &str,
        key: &str,
        row: &Row,
        selected: &IndexMap<String, Row>,
    ) {
        let label = self.label(table);
        // A table the rules do not name is named by its key.
        let name = match self.names.get(table) {
            Some(col) => cell(row, col),
            None => key.to_string(),
        };
        let d = self.belief.entry(label).or_default();
        d.selected_results = if name.is_empty() { vec![] } else { vec![name] };
        let mut hit = vec![];
        for (i, _, s) in self.slots_of(table) {
            if self.entries[i].kind != EntryKind::Constraint {
                continue;
            }
            if let Some(r) = &s.reference
                && let Some(listing) = self.referenced(r, selected)
                && listed(&listing, &cell(row, &s.slot))
            {
                hit.push(i);
            }
            // A range constraint is met by a selected row whose number lies in the range.
            if let Some(g) = &s.range
                && cell(row, &s.slot)
                    .trim()
                    .parse::<f64>()
                    .is_ok_and(|x| g.holds(x))
            {
                hit.push(i);
            }
        }
        for i in hit {
            self.entries[i].satisfied = true;
        }
    }

    /// A chat message. The user's: a constraint whose value the text contains (case aside) is
    /// expressed. The wizard's: a requested slot of a sub-goal whose table has a selected row is
    /// informed when the text contains that row's value of the slot; the entry takes the value.
    pub fn on_message(&mut self, role: Role, text: &str, selected: &IndexMap<String, Row>) {
        let lower = text.to_lowercase();
        let mut updates: Vec<(usize, Option<String>)> = vec![];
        let mut i = 0;
        for sg in &self.goal.subgoals {
            for s in &sg.constraints {
                if role == Role::User
                    && s.reference.is_none()
                    && !s.value.trim().is_empty()
                    && lower.contains(&s.value.trim().to_lowercase())
                {
                    updates.push((i, None));
                }
                i += 1;
            }
            for s in &sg.requests {
                if role == Role::Wizard
                    && let Some(row) = selected.get(&sg.table)
                {
                    let v = cell(row, &s.slot);
                    if !v.trim().is_empty() && lower.contains(&v.trim().to_lowercase()) {
                        updates.push((i, Some(v)));
                    }
                }
                i += 1;
            }
        }
        for (i, v) in updates {
            self.entries[i].satisfied = true;
            if let Some(v) = v {
                self.entries[i].value = v;
            }
        }
    }

    /// The belief at the start of a wizard turn's first search, else the current one.
    pub fn turn_init(&self) -> Belief {
        self.belief_init
            .clone()
            .unwrap_or_else(|| self.belief.clone())
    }

    /// Whether every entry is satisfied.
    pub fn complete(&self) -> bool {
        self.entries.iter().all(|e| e.satisfied)
    }
}

/// A problem found in a `goals:` block: the JSON pointer, the message and a hint.
type Problem = (String, String, Option<String>);

/// Problems of a study's `goals:` block against its loaded database: each message with the JSON
/// pointer of the key at fault.
pub fn check(rules: &GoalRules, db: Option<&Database>) -> Vec<(String, String, Option<String>)> {
    let mut out: Vec<(String, String, Option<String>)> = vec![];
    let Some(db) = db else {
        out.push((
            "/goals".into(),
            "goals are drawn from the study's database, and the study has none".into(),
            Some("add a `database:` with the tables the goals name".into()),
        ));
        return out;
    };
    let tables: Vec<&str> = db.tables().keys().map(String::as_str).collect();
    if rules.domains.is_empty() {
        out.push((
            "/goals".into(),
            "goals: `domains` lists no domain".into(),
            None,
        ));
    }
    let c = rules.subgoals;
    if c.min == 0 || c.min > c.max {
        out.push((
            "/goals/subgoals".into(),
            format!(
                "goals: subgoals min {} and max {}: min is at least 1 and at most max",
                c.min, c.max
            ),
            None,
        ));
    }
    let mut seen: Vec<&str> = vec![];
    for (i, d) in rules.domains.iter().enumerate() {
        check_domain(&mut out, db, &tables, &mut seen, i, d);
    }
    for (i, r) in rules.references.iter().enumerate() {
        check_reference(&mut out, rules, db, i, r);
    }
    out
}

/// The slot rules of a domain by the key they sit under.
fn slot_rules(d: &DomainRule) -> [(&'static str, &SlotRule); 2] {
    [("constraints", &d.constraints), ("requests", &d.requests)]
}

/// Problems of domain `i` of a `goals:` block; `seen` gathers the tables already taken as domains.
fn check_domain<'a>(
    out: &mut Vec<Problem>,
    db: &Database,
    tables: &[&str],
    seen: &mut Vec<&'a str>,
    i: usize,
    d: &'a DomainRule,
) {
    let at = format!("/goals/domains/{i}");
    let Some(info) = db.tables().get(&d.table) else {
        out.push((
            format!("{at}/table"),
            format!("goals: domain {i}: the database has no table `{}`", d.table),
            Some(format!("its tables: {}", tables.join(", "))),
        ));
        return;
    };
    if seen.contains(&d.table.as_str()) {
        out.push((
            format!("{at}/table"),
            format!("goals: the table `{}` is a domain twice", d.table),
            None,
        ));
    }
    seen.push(&d.table);
    if !(d.weight.is_finite() && d.weight >= 0.0) {
        out.push((
            format!("{at}/weight"),
            format!("goals: domain `{}`: a weight is a number from 0", d.table),
            None,
        ));
    }
    let cols: Vec<&str> = info.columns.iter().map(|(c, _)| c.as_str()).collect();
    let mut col_check = |ptr: String, col: &str| {
        if info.column(col).is_none() {
            out.push((
                ptr,
                format!("goals: the table `{}` has no column `{col}`", d.table),
                Some(format!("its columns: {}", cols.join(", "))),
            ));
        }
    };
    if let Some(n) = &d.name {
        col_check(format!("{at}/name"), n);
    }
    for (part, r) in slot_rules(d) {
        for (j, col) in r.columns.iter().enumerate() {
            col_check(format!("{at}/{part}/columns/{j}"), col);
        }
        for (j, col) in r.always.iter().enumerate() {
            col_check(format!("{at}/{part}/always/{j}"), col);
        }
    }
    for (col, bands) in &d.ranges {
        check_ranges(out, info, &cols, &at, d, col, bands);
    }
    for (part, r) in slot_rules(d) {
        if r.count.min > r.count.max {
            out.push((
                format!("{at}/{part}/count"),
                format!(
                    "goals: domain `{}`: {part} count min {} is above max {}",
                    d.table, r.count.min, r.count.max
                ),
                None,
            ));
        }
    }
}

/// Problems of a domain's ranges on the column `col` (`at` points at the domain).
fn check_ranges(
    out: &mut Vec<Problem>,
    info: &TableInfo,
    cols: &[&str],
    at: &str,
    d: &DomainRule,
    col: &str,
    bands: &[RangeBand],
) {
    let ptr = format!("{at}/ranges/{col}");
    match info.column(col) {
        None => out.push((
            ptr.clone(),
            format!("goals: the table `{}` has no column `{col}`", d.table),
            Some(format!("its columns: {}", cols.join(", "))),
        )),
        Some(t) if !t.is_numeric() => out.push((
            ptr.clone(),
            format!(
                "goals: domain `{}`: ranges on `{col}`, whose values are not numbers",
                d.table
            ),
            None,
        )),
        Some(_) => {}
    }
    let drawn = |cols: &[String]| cols.iter().any(|c| c == col);
    if !drawn(&d.constraints.columns) && !drawn(&d.constraints.always) {
        out.push((
            ptr.clone(),
            format!(
                "goals: domain `{}`: ranges on `{col}`, which its constraints never draw",
                d.table
            ),
            Some("list the column in constraints.columns or constraints.always".into()),
        ));
    }
    for (j, b) in bands.iter().enumerate() {
        if band_is_bad(b) {
            out.push((
                format!("{ptr}/{j}"),
                format!(
                    "goals: domain `{}`: range {j} of `{col}`: a band has a min, a max or \
                     both (min at most max) and a text",
                    d.table
                ),
                None,
            ));
        }
    }
}

/// Whether a range band lacks both bounds, has them the wrong way round, has a bound that is not
/// finite, or has no text.
fn band_is_bad(b: &RangeBand) -> bool {
    (b.min.is_none() && b.max.is_none())
        || b.min.zip(b.max).is_some_and(|(a, z)| a > z)
        || b.min.is_some_and(|x| !x.is_finite())
        || b.max.is_some_and(|x| !x.is_finite())
        || b.text.trim().is_empty()
}

/// Problems of reference `i` of a `goals:` block.
fn check_reference(
    out: &mut Vec<Problem>,
    rules: &GoalRules,
    db: &Database,
    i: usize,
    r: &ReferenceRule,
) {
    let position = |t: &str| rules.domains.iter().position(|d| d.table == t);
    let at = format!("/goals/references/{i}");
    let from = position(&r.from);
    let to = position(&r.to);
    for (key, t, p) in [("from", &r.from, from), ("to", &r.to, to)] {
        if p.is_none() {
            out.push((
                format!("{at}/{key}"),
                format!("goals: reference {i}: `{t}` is not one of the goal's domains"),
                None,
            ));
        }
    }
    if let (Some(f), Some(t)) = (from, to)
        && f >= t
    {
        out.push((
            format!("{at}/to"),
            format!(
                "goals: reference {i}: `{}` must come after `{}` in `domains` (a sub-goal refers to an earlier one)",
                r.to, r.from
            ),
            None,
        ));
    }
    for (key, t, col) in [("column", &r.from, &r.column), ("slot", &r.to, &r.slot)] {
        if let Some(info) = db.tables().get(t)
            && info.column(col).is_none()
        {
            out.push((
                format!("{at}/{key}"),
                format!("goals: reference {i}: the table `{t}` has no column `{col}`"),
                None,
            ));
        }
    }
    if !(0.0..=1.0).contains(&r.probability) {
        out.push((
            format!("{at}/probability"),
            format!("goals: reference {i}: a probability is between 0 and 1"),
            None,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn row(pairs: &[(&str, &str)]) -> Row {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect()
    }

    #[test]
    fn a_selection_names_the_result_by_the_rules_name_column_else_by_its_key() {
        let rules: GoalRules = serde_json::from_value(serde_json::json!({
            "domains": [{"table": "hotel", "label": "酒店", "name": "title"}]
        }))
        .unwrap();
        let mut t = GoalTrack::new(Goal::default(), Some(&rules), None);
        let selected = IndexMap::new();
        t.on_select(
            "hotel",
            "h1",
            &row(&[("id", "h1"), ("title", "Lotus Inn")]),
            &selected,
        );
        t.on_select(
            "metro",
            "m7",
            &row(&[("id", "m7"), ("line", "2")]),
            &selected,
        );
        assert_eq!(t.belief["酒店"].selected_results, ["Lotus Inn"]);
        assert_eq!(t.belief["metro"].selected_results, ["m7"]);
    }

    #[test]
    fn filters_read_as_crosswoz_strings_and_express_constraints() {
        let f = |op: FilterOp| Filter {
            column: "price".into(),
            op,
        };
        let range = f(FilterOp::Range {
            min: Some(50.0),
            max: Some(100.0),
        });
        assert_eq!(filter_text(&range), "50-100");
        let above = f(FilterOp::Range {
            min: Some(4.5),
            max: None,
        });
        assert_eq!(filter_text(&above), ">4.5");
        assert!(filter_expresses(&range, "75"));
        assert!(!filter_expresses(&range, "120"));
        assert!(!filter_expresses(&range, "cheap"));
        let contains = f(FilterOp::Contains {
            value: "Inn".into(),
        });
        assert!(filter_expresses(&contains, "Lotus inn"));
        let equals = f(FilterOp::Equals {
            value: Value::String("FREE".into()),
        });
        assert!(filter_expresses(&equals, "free"));
        assert!(!filter_expresses(&equals, "free entry"));
    }
}
