//! The judgments of evaluation studies as a table: `wozkit export --format judgments-jsonl` (one
//! JSON object per line) and `--format judgments-csv`. The rows come from the participants' own
//! logs (sessions of kind `participant`), never from dialogues: one row per
//! [`Judged`](EventKind::Judged) event, and one per answer of an
//! [`OnboardingDone`](EventKind::OnboardingDone) event. A model judge's log (first event
//! [`JudgeLogStarted`](EventKind::JudgeLogStarted), written by `wozkit judge`) gives one row per
//! answered [`ModelJudged`](EventKind::ModelJudged) event, with `kind` `model`: such a row is
//! never counted, so it enters no human number (adjudication, agreement, ratings, leaderboard).
//!
//! Columns (JSON field names; the CSV uses the same names in this order):
//!
//! | column | meaning |
//! | --- | --- |
//! | `study` | the study of the participant's log |
//! | `log` | the store id of the participant's log |
//! | `participant` | the participant id (the worker, one per worker and study); empty for a model judge |
//! | `worker_id` | the platform's worker id, when the store has the participant and it has one |
//! | `kind` | `human` (a person's judgment or onboarding answer) or `model` (a model judge's answer) |
//! | `judge` | a model judge's name (`evaluation.judges`); empty for a person |
//! | `swapped` | a model judge's comparison asked with the two dialogues swapped (`swap: true`); `left` and `right` are then the swapped order the judge saw |
//! | `page` | the flow page of the judgment (empty for onboarding rows) |
//! | `item` | the item id; for an onboarding row, the answer key |
//! | `pool` | `item` or `gold` (empty for onboarding rows) |
//! | `gold`, `onboarding`, `surplus`, `counted`, `void` | flags: a gold item; an onboarding answer; submitted after the lease expired when the item was complete; counted towards the item's judgments; an arena battle in which a system failed a turn (kept, never counted) |
//! | `dialogue`, `system` | a rating: the dialogue rated and its system |
//! | `left`, `left_system`, `right`, `right_system` | a comparison: the dialogues as shown and their systems |
//! | `choice`, `choice_system` | a comparison: the dialogue chosen and its system |
//! | `justification` | a comparison: the reason given |
//! | `answers` | JSON Lines: the page's answers as an object by question id. CSV: one column `answer.<id>` per question id met in the export, sorted; empty where a row has no answer |
//! | `adjudicated` | the item's adjudicated answers (see below). JSON Lines: an object by question id of `{label, votes, of, tie}`. CSV: one column `adjudicated.<id>` per adjudicated question, after the answer columns, holding the label |
//! | `adjudicated_turns` | the item's adjudicated turn labels: a list of `{dialogue, turn, labels, tied, of}` (a JSON text in the CSV, before `turns`) |
//! | `turns` | the per-turn labels: a list of `{dialogue, turn, labels, score}` (a JSON text in the CSV) |
//! | `lease` | the lease the judgment was made under |
//! | `claimed_at_ms` | when the item was claimed (the lease start), ms since the Unix epoch |
//! | `submitted_at_ms` | when the judgment was stored (the event's time) |
//! | `seconds` | `submitted_at_ms − claimed_at_ms` in seconds |
//! | `gold_correct` | gold items: whether the known answer was given |
//!
//! An onboarding row has `onboarding: true`, the answer key as `item`, `answers` holding that one
//! answer, `gold_correct` set to whether the whole test was passed, and the event's time as
//! `submitted_at_ms`; the lease columns are empty. In the CSV, an absent value is an empty cell and
//! a flag is `true` or `false`. Test participants (`/try`, links with `test=1`) are left out
//! unless `--include-test` is given.
//!
//! A model row has the judge's log as `log`, the item and the dialogues as the prompt showed them
//! (`left`/`right` for a comparison, `dialogue` for a rating), the answer of its one question
//! (`choice` and `choice_system` for a comparison's `choice` question, else `answers` holding that
//! one answer), `pool` `item`, `counted` false, the event's time as `submitted_at_ms` and no
//! lease. Answers that failed (a reply naming no option) are left out.
//!
//! Adjudication ([`adjudicated_answers`]): for each question answered with text or yes/no (a
//! category; a question none of whose answers repeats is free text and gets none), an item's
//! label is the answer most of its counted judgments gave (gold, surplus, void and onboarding
//! rows left out); among answers tied for most, the one given first (by submission time, then
//! participant id) — `tie` is then true. Every row of the item carries it, whichever its own
//! answer.
//!
//! Turn labels ([`adjudicated_turns`], checkbox annotations such as dialogue acts): a label is in
//! a turn's adjudicated `labels` when more than half of the counted judgments of the item that
//! labelled the turn (`of`) ticked it; a label ticked by exactly half is left out and listed in
//! `tied`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;
use wozkit_core::event::{Actor, Event, EventKind, ItemPool, Judgment, ModelJudgment, TurnLabel};
use wozkit_core::judges::CHOICE;

use crate::error::ExportError;
use crate::stats::agreement::{Adjudicated, adjudicate};

/// One row of the judgments table (see the module documentation for the columns).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JudgmentRow {
    pub study: String,
    pub log: String,
    pub participant: Option<String>,
    pub worker_id: Option<String>,
    /// `human` or `model` ([`HUMAN`], [`MODEL`]).
    pub kind: &'static str,
    /// A model judge's name.
    pub judge: Option<String>,
    /// A model judge's comparison asked with the sides swapped.
    pub swapped: bool,
    pub page: Option<String>,
    pub item: String,
    pub pool: Option<&'static str>,
    pub gold: bool,
    pub onboarding: bool,
    pub surplus: bool,
    pub counted: bool,
    /// An arena battle a system failed a turn of: kept, but in no number.
    pub void: bool,
    pub dialogue: Option<String>,
    pub system: Option<String>,
    pub left: Option<String>,
    pub left_system: Option<String>,
    pub right: Option<String>,
    pub right_system: Option<String>,
    pub choice: Option<String>,
    pub choice_system: Option<String>,
    pub justification: Option<String>,
    pub answers: IndexMap<String, Value>,
    /// The item's adjudicated answers by question id (filled by [`adjudicate_rows`]).
    pub adjudicated: BTreeMap<String, Adjudicated>,
    /// The item's adjudicated turn labels (filled by [`adjudicate_rows`]).
    pub adjudicated_turns: Vec<AdjudicatedTurn>,
    pub turns: Vec<TurnLabel>,
    pub lease: Option<String>,
    pub claimed_at_ms: Option<u64>,
    pub submitted_at_ms: u64,
    pub seconds: Option<f64>,
    pub gold_correct: Option<bool>,
}

/// The `kind` of a person's row.
pub const HUMAN: &str = "human";
/// The `kind` of a model judge's row.
pub const MODEL: &str = "model";

impl JudgmentRow {
    /// A model judge's answer rather than a person's judgment.
    pub fn is_model(&self) -> bool {
        self.kind == MODEL
    }

    /// A comparison (two dialogues shown side by side) rather than a rating or onboarding answer.
    pub fn is_comparison(&self) -> bool {
        self.left.is_some()
    }

    /// Sets the judged dialogues and their systems (`systems[i]` is the system of
    /// `dialogues[i]`): `left` and `right` for a comparison of two, else `dialogue`.
    fn shown(&mut self, dialogues: &[String], systems: &[String]) {
        let system = |i: usize| systems.get(i).cloned();
        if dialogues.len() >= 2 {
            self.left = dialogues.first().cloned();
            self.left_system = system(0);
            self.right = dialogues.get(1).cloned();
            self.right_system = system(1);
        } else {
            self.dialogue = dialogues.first().cloned();
            self.system = system(0);
        }
    }
}

#[cfg(test)]
impl JudgmentRow {
    /// A person's counted judgment, submitted at 1 ms, of the item `item`: the single dialogue
    /// `d-<item>` of `system`, given `answers`. The base of the report tests' rows.
    pub(crate) fn rated(who: &str, item: &str, system: &str, answers: &[(&str, Value)]) -> Self {
        JudgmentRow {
            study: "s".into(),
            log: who.into(),
            participant: Some(who.into()),
            worker_id: None,
            kind: HUMAN,
            judge: None,
            swapped: false,
            page: None,
            item: item.into(),
            pool: Some("item"),
            gold: false,
            onboarding: false,
            surplus: false,
            counted: true,
            void: false,
            dialogue: Some(format!("d-{item}")),
            system: Some(system.into()),
            left: None,
            left_system: None,
            right: None,
            right_system: None,
            choice: None,
            choice_system: None,
            justification: None,
            answers: answers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            adjudicated: BTreeMap::new(),
            adjudicated_turns: Vec::new(),
            turns: Vec::new(),
            lease: None,
            claimed_at_ms: None,
            submitted_at_ms: 1,
            seconds: None,
            gold_correct: None,
        }
    }
}

/// The system of the chosen dialogue `choice` among `dialogues` (`systems[i]` is the system of
/// `dialogues[i]`).
fn chosen_system(
    choice: Option<&String>,
    dialogues: &[String],
    systems: &[String],
) -> Option<String> {
    let position = dialogues.iter().position(|d| Some(d) == choice)?;
    systems.get(position).cloned()
}

/// The participant behind a log, as the store knows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Worker {
    /// The participant id named by the log's first event.
    pub participant: Option<String>,
    /// The platform's worker id, when the store has the participant.
    pub worker_id: Option<String>,
}

/// The study and participant named by a participant log's first event, if it is one.
pub fn log_owner(events: &[Event]) -> Option<(&str, &str)> {
    match &events.first()?.kind {
        EventKind::ParticipantLogStarted {
            participant, study, ..
        } => Some((study.as_str(), participant.as_str())),
        _ => None,
    }
}

/// The study and judge named by a model judge's log's first event, if it is one.
pub fn judge_log_owner(events: &[Event]) -> Option<(&str, &str)> {
    match &events.first()?.kind {
        EventKind::JudgeLogStarted { judge, study, .. } => Some((study.as_str(), judge.as_str())),
        _ => None,
    }
}

/// The rows of one participant log (or model judge's log), in log order.
pub fn log_rows(events: &[Event], worker: &Worker) -> Vec<JudgmentRow> {
    let study = log_owner(events)
        .or_else(|| judge_log_owner(events))
        .map_or("", |(study, _)| study)
        .to_string();
    let mut rows = Vec::new();
    for event in events {
        let base = Base {
            study: &study,
            event,
            worker,
        };
        match &event.kind {
            EventKind::Judged(judgment) => rows.push(base.judgment(judgment)),
            EventKind::ModelJudged(j) => rows.extend(base.model(j)),
            EventKind::OnboardingDone {
                passed, answers, ..
            } => {
                for (key, value) in answers {
                    rows.push(base.onboarding(key, value, *passed));
                }
            }
            _ => {}
        }
    }
    rows
}

/// What every row of one event shares.
struct Base<'a> {
    study: &'a str,
    event: &'a Event,
    worker: &'a Worker,
}

impl Base<'_> {
    fn participant(&self) -> Option<String> {
        match &self.event.actor {
            Actor::Participant {
                participant: Some(id),
                ..
            } => Some(id.clone()),
            _ => self.worker.participant.clone(),
        }
    }

    fn row(&self, item: String) -> JudgmentRow {
        JudgmentRow {
            study: self.study.to_string(),
            log: self.event.session.clone(),
            participant: self.participant(),
            worker_id: self.worker.worker_id.clone(),
            kind: HUMAN,
            judge: None,
            swapped: false,
            page: None,
            item,
            pool: None,
            gold: false,
            onboarding: false,
            surplus: false,
            counted: false,
            void: false,
            dialogue: None,
            system: None,
            left: None,
            left_system: None,
            right: None,
            right_system: None,
            choice: None,
            choice_system: None,
            justification: None,
            answers: IndexMap::new(),
            adjudicated: BTreeMap::new(),
            adjudicated_turns: Vec::new(),
            turns: Vec::new(),
            lease: None,
            claimed_at_ms: None,
            submitted_at_ms: self.event.at_ms,
            seconds: None,
            gold_correct: None,
        }
    }

    fn judgment(&self, j: &Judgment) -> JudgmentRow {
        let mut row = self.row(j.item.clone());
        row.shown(&j.dialogues, &j.systems);
        row.choice_system = chosen_system(j.choice.as_ref(), &j.dialogues, &j.systems);
        let seconds = self.event.at_ms.saturating_sub(j.claimed_at_ms) as f64 / 1000.0;
        JudgmentRow {
            page: Some(j.page.clone()),
            pool: Some(j.pool.as_str()),
            gold: j.pool == ItemPool::Gold,
            surplus: j.surplus,
            counted: j.counted,
            void: j.void,
            choice: j.choice.clone(),
            justification: j.justification.clone(),
            answers: j.answers.clone(),
            turns: j.turns.clone(),
            lease: Some(j.lease.clone()),
            claimed_at_ms: Some(j.claimed_at_ms),
            seconds: Some(seconds),
            gold_correct: j.gold_correct,
            ..row
        }
    }

    /// The row of a model judge's answer; none when the answer failed.
    fn model(&self, j: &ModelJudgment) -> Option<JudgmentRow> {
        let answer = j.answer.as_ref()?;
        let mut row = self.row(j.item.clone());
        row.participant = None;
        row.worker_id = None;
        row.kind = MODEL;
        row.judge = Some(j.judge.clone());
        row.swapped = j.swapped;
        row.pool = Some(ItemPool::Item.as_str());
        row.shown(&j.dialogues, &j.systems);
        if j.question == CHOICE && row.is_comparison() {
            let chosen = answer.as_str().map(str::to_string);
            row.choice_system = chosen_system(chosen.as_ref(), &j.dialogues, &j.systems);
            row.choice = chosen;
        } else {
            row.answers.insert(j.question.clone(), answer.clone());
        }
        Some(row)
    }

    fn onboarding(&self, key: &str, value: &Value, passed: bool) -> JudgmentRow {
        let mut row = self.row(key.to_string());
        row.onboarding = true;
        row.answers.insert(key.to_string(), value.clone());
        row.gold_correct = Some(passed);
        row
    }
}

/// A text or yes/no answer as a category; `None` for numbers, lists, objects and null.
pub fn answer_category(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A judgment that counts towards its item's numbers: a person's, counted, of the item pool, not
/// surplus, void or onboarding.
pub fn counts_for_item(row: &JudgmentRow) -> bool {
    row.counted && !row.gold && !row.surplus && !row.void && !row.onboarding && !row.is_model()
}

/// The categorical answers of `rows` by question id, then item id: each item's labels in
/// submission order (time, then participant id). Questions whose answers never repeat (free
/// text) are left out. Only the rows given are read: filter them with [`counts_for_item`] first.
pub fn categorical_answers<'a>(
    rows: impl IntoIterator<Item = &'a JudgmentRow>,
) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut rows: Vec<&JudgmentRow> = rows.into_iter().collect();
    rows.sort_by(|a, b| {
        (a.submitted_at_ms, &a.participant).cmp(&(b.submitted_at_ms, &b.participant))
    });
    let mut units: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for row in rows {
        for (question, value) in &row.answers {
            if let Some(label) = answer_category(value) {
                units
                    .entry(question.clone())
                    .or_default()
                    .entry(row.item.clone())
                    .or_default()
                    .push(label);
            }
        }
    }
    units.retain(|_, by_item| {
        let mut all: Vec<&String> = by_item.values().flatten().collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        all.len() < n
    });
    units
}

/// The adjudicated answer of each item by question: item id → question id → majority label (see
/// the module documentation for the rule), over the rows that [`counts_for_item`].
pub fn adjudicated_answers(
    rows: &[JudgmentRow],
) -> BTreeMap<String, BTreeMap<String, Adjudicated>> {
    let mut out: BTreeMap<String, BTreeMap<String, Adjudicated>> = BTreeMap::new();
    for (question, by_item) in categorical_answers(rows.iter().filter(|r| counts_for_item(r))) {
        for (item, labels) in by_item {
            if let Some(a) = adjudicate(&labels) {
                out.entry(item).or_default().insert(question.clone(), a);
            }
        }
    }
    out
}

/// The adjudicated checkbox labels of one turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AdjudicatedTurn {
    pub dialogue: String,
    pub turn: u32,
    /// Labels ticked by more than half of the judgments that labelled the turn, sorted.
    pub labels: Vec<String>,
    /// Labels ticked by exactly half: left out of `labels`.
    pub tied: Vec<String>,
    /// How many judgments labelled the turn.
    pub of: usize,
}

/// The adjudicated checkbox labels of each item's turns (item id → turns in dialogue and turn
/// order), over the rows that [`counts_for_item`]; scale annotations are left out.
pub fn adjudicated_turns(rows: &[JudgmentRow]) -> BTreeMap<String, Vec<AdjudicatedTurn>> {
    type Turn<'a> = (&'a str, &'a str, u32);
    let mut ticks: BTreeMap<Turn, (usize, BTreeMap<&str, usize>)> = BTreeMap::new();
    for row in rows.iter().filter(|r| counts_for_item(r)) {
        for t in row.turns.iter().filter(|t| t.score.is_none()) {
            let (of, labels) = ticks
                .entry((row.item.as_str(), t.dialogue.as_str(), t.turn))
                .or_default();
            *of += 1;
            let unique: BTreeSet<&str> = t.labels.iter().map(String::as_str).collect();
            for label in unique {
                *labels.entry(label).or_default() += 1;
            }
        }
    }
    let mut out: BTreeMap<String, Vec<AdjudicatedTurn>> = BTreeMap::new();
    for ((item, dialogue, turn), (of, labels)) in ticks {
        let pick = |keep: fn(usize, usize) -> bool| {
            labels
                .iter()
                .filter(|(_, n)| keep(**n, of))
                .map(|(l, _)| l.to_string())
                .collect()
        };
        out.entry(item.to_string())
            .or_default()
            .push(AdjudicatedTurn {
                dialogue: dialogue.to_string(),
                turn,
                labels: pick(|n, of| 2 * n > of),
                tied: pick(|n, of| 2 * n == of),
                of,
            });
    }
    out
}

/// Fills each row's `adjudicated` and `adjudicated_turns` with its item's (onboarding rows,
/// whose `item` is an answer key, get none).
pub fn adjudicate_rows(rows: &mut [JudgmentRow]) {
    let answers = adjudicated_answers(rows);
    let turns = adjudicated_turns(rows);
    for row in rows.iter_mut().filter(|r| !r.onboarding) {
        if let Some(a) = answers.get(&row.item) {
            row.adjudicated = a.clone();
        }
        if let Some(t) = turns.get(&row.item) {
            row.adjudicated_turns = t.clone();
        }
    }
}

/// Collects rows and writes them as JSON Lines at the end, once every item's adjudicated answers
/// are known. Memory holds the rows of the export, not the events.
pub struct JudgmentsJsonl<W: Write> {
    out: W,
    rows: Vec<JudgmentRow>,
}

impl<W: Write> JudgmentsJsonl<W> {
    pub fn new(out: W) -> Self {
        JudgmentsJsonl {
            out,
            rows: Vec::new(),
        }
    }

    /// Adds rows (written by [`JudgmentsJsonl::finish`]).
    pub fn rows(&mut self, rows: Vec<JudgmentRow>) {
        self.rows.extend(rows);
    }

    /// Adjudicates and writes one line per row, in the order added.
    pub fn finish(mut self) -> Result<W, ExportError> {
        adjudicate_rows(&mut self.rows);
        for row in &self.rows {
            serde_json::to_writer(&mut self.out, row)?;
            self.out.write_all(b"\n")?;
        }
        Ok(self.out)
    }
}

/// The fixed CSV columns before the answer columns.
const CSV_HEAD: [&str; 24] = [
    "study",
    "log",
    "participant",
    "worker_id",
    "kind",
    "judge",
    "swapped",
    "page",
    "item",
    "pool",
    "gold",
    "onboarding",
    "surplus",
    "counted",
    "void",
    "dialogue",
    "system",
    "left",
    "left_system",
    "right",
    "right_system",
    "choice",
    "choice_system",
    "justification",
];

/// The fixed CSV columns after the answer columns.
const CSV_TAIL: [&str; 7] = [
    "adjudicated_turns",
    "turns",
    "lease",
    "claimed_at_ms",
    "submitted_at_ms",
    "seconds",
    "gold_correct",
];

/// The prefix of an answer column's name.
pub const ANSWER_COLUMN: &str = "answer.";

/// The prefix of an adjudicated answer's column name.
pub const ADJUDICATED_COLUMN: &str = "adjudicated.";

/// Collects rows and writes them as CSV at the end, once every answer key (one column each) is
/// known. Memory holds the rows of the export, not the events.
#[derive(Default)]
pub struct JudgmentsCsv {
    rows: Vec<JudgmentRow>,
    keys: BTreeSet<String>,
}

impl JudgmentsCsv {
    pub fn new() -> Self {
        JudgmentsCsv::default()
    }

    pub fn rows(&mut self, rows: Vec<JudgmentRow>) {
        for row in &rows {
            self.keys.extend(row.answers.keys().cloned());
        }
        self.rows.extend(rows);
    }

    /// Adjudicates, then writes the header and every row.
    pub fn write(mut self, out: impl Write) -> Result<(), ExportError> {
        adjudicate_rows(&mut self.rows);
        let adjudicated: BTreeSet<String> = self
            .rows
            .iter()
            .flat_map(|r| r.adjudicated.keys().cloned())
            .collect();
        let mut csv = csv::Writer::from_writer(out);
        let mut header: Vec<String> = CSV_HEAD.iter().map(|c| c.to_string()).collect();
        header.extend(self.keys.iter().map(|k| format!("{ANSWER_COLUMN}{k}")));
        header.extend(
            adjudicated
                .iter()
                .map(|k| format!("{ADJUDICATED_COLUMN}{k}")),
        );
        header.extend(CSV_TAIL.iter().map(|c| c.to_string()));
        csv.write_record(&header)?;
        for row in &self.rows {
            let mut record = csv_record(row, &self.keys)?;
            let at = record.len() - CSV_TAIL.len();
            let labels = adjudicated.iter().map(|k| {
                row.adjudicated
                    .get(k)
                    .map(|a| a.label.clone())
                    .unwrap_or_default()
            });
            record.splice(at..at, labels);
            csv.write_record(record)?;
        }
        csv.flush()?;
        Ok(())
    }
}

fn csv_record(row: &JudgmentRow, keys: &BTreeSet<String>) -> Result<Vec<String>, ExportError> {
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let flag = |b: bool| b.to_string();
    let mut record = vec![
        row.study.clone(),
        row.log.clone(),
        text(&row.participant),
        text(&row.worker_id),
        row.kind.to_string(),
        text(&row.judge),
        flag(row.swapped),
        text(&row.page),
        row.item.clone(),
        row.pool.unwrap_or_default().to_string(),
        flag(row.gold),
        flag(row.onboarding),
        flag(row.surplus),
        flag(row.counted),
        flag(row.void),
        text(&row.dialogue),
        text(&row.system),
        text(&row.left),
        text(&row.left_system),
        text(&row.right),
        text(&row.right_system),
        text(&row.choice),
        text(&row.choice_system),
        text(&row.justification),
    ];
    for key in keys {
        record.push(match row.answers.get(key) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        });
    }
    record.push(serde_json::to_string(&row.adjudicated_turns)?);
    record.push(serde_json::to_string(&row.turns)?);
    record.push(text(&row.lease));
    record.push(row.claimed_at_ms.map(|v| v.to_string()).unwrap_or_default());
    record.push(row.submitted_at_ms.to_string());
    record.push(row.seconds.map(|v| v.to_string()).unwrap_or_default());
    record.push(row.gold_correct.map(flag).unwrap_or_default());
    Ok(record)
}
