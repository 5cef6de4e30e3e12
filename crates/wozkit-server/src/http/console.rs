//! The researcher console's home: every study's live figures (waiting per role, rooms, finished,
//! abandoned, screened out, codes, spend against the budget, median duration) pushed as
//! server-sent events, and downloads of every export and the HTML report.
//!
//! | route | access |
//! |---|---|
//! | `GET /researcher` (the overview cards, [`overview_html`], from `researcher::index`) | observer |
//! | `GET /researcher/live`: `text/event-stream`, one `figures` event (an [`Overview`] as JSON) now and at each change | observer |
//! | `GET /researcher/study/{study}/download/{what}`: [`DOWNLOADS`]; `?test=1` keeps test sessions; `?acts=STUDY` (repeatable, [`ACTS_DOWNLOADS`] only) writes an act-annotation study's adjudicated acts | observer |
//!
//! The figures are computed at most every [`FRESH`] and shared by every console open on the
//! server ([`Figures`], in the app state): a cheap fingerprint (every session's and participant
//! log's last event and end, the waiting room) is read first, and the figures are rebuilt only
//! when it changed, or at least every [`MAX_STALE`]. While a console listens, one task per
//! server checks every [`FRESH`] and sends the figures to all of them when they differ.
//!
//! A rebuild costs about what changed: each dialogue's and participant log's share (its rows of
//! the payment table, which `payments` itself prices) is kept with its last `seq`, its end and
//! its participants as stored, read for every session at once; only sessions where one of those
//! differs are priced again, on a blocking thread. Before, every rebuild priced every session
//! with two or three store queries each (participants, events, and the log's events again),
//! and those round trips to the store's worker thread were the cost: in a release build on a
//! loaded two-core machine, 2000 two-person sessions took 0.4–0.9 s a rebuild and 10,000
//! 1.5–1.9 s. Now (same build and machine, load 4–6), a first computation takes 0.24 s for
//! 2000 and 0.65 s for 10,000 sessions, and a rebuild after one session ended 0.09 s and
//! 0.23 s (it still lists every session and reads every participant once, not profiled apart);
//! `figures_cost_with_many_sessions`
//! in the API tests prints them.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use wozkit_core::evaluation::EvalTask;
use wozkit_core::event::EndReason;
use wozkit_core::event::Event;
use wozkit_core::load::LoadedStudy;
use wozkit_data::acts::{TurnActs, label_of};
use wozkit_data::download::{NamedFile, export_into_memory_annotated, zip_files};
use wozkit_data::mapping::Mappings;
use wozkit_data::report::html::render_html;
use wozkit_data::report::questionnaire::Questionnaires;
use wozkit_data::report::{Filter, ReportOptions, build_report};
use wozkit_data::stored::ExportFormat;
use wozkit_store::store::{
    Forward, ForwardAccounts, ForwardClaims, ForwardLobby, ForwardMeta, RoomLeaseStore,
};
use wozkit_store::{
    EventCursor, EventStore, NewEvent, NewParticipant, NewSession, Participant, ParticipantPatch,
    ParticipantStore, Platform, SessionEnd, SessionFilter, SessionKind, SessionRecord,
    SessionStore, Store, StoreError, TEST_KEY,
};

use super::extract::ResearcherPage;
use super::html::{esc, path_escape, query_escape};
use crate::app::{AppState, now_ms};
use crate::auth::{Access, Researcher};
use crate::error::HttpError;
use crate::lobby::QueueCount;
use wozkit_data::records::payments::{PaymentRow, payments, write_csv};
use wozkit_data::records::{is_test_session, session_log, sessions};

/// Figures are recomputed at most this often.
pub const FRESH: Duration = Duration::from_secs(2);

/// Figures are recomputed at least this often while watched, even when the fingerprint is the
/// same: a completion code is stored on the participant just after its event, so a computation
/// between the two misses it until the next change.
const MAX_STALE: Duration = Duration::from_secs(30);

/// Share of the budget spent past which the card warns.
const WARN_SHARE: f64 = 0.9;

/// What a study's download menu offers: the export formats of `wozkit export` (`log` included),
/// the payment table (`payments`, as `wozkit payments` writes it) and the report (`report`, the
/// HTML page; `report-json`, its numbers).
pub const DOWNLOADS: [&str; 16] = [
    "report",
    "report-json",
    "payments",
    "log",
    "jsonl",
    "survey-csv",
    "votes-csv",
    "judgments-jsonl",
    "judgments-csv",
    "taskmaster1",
    "crosswoz",
    "multiwoz",
    "convlab3",
    "crsarena",
    "crsarena_eval",
    "crwiz",
];

/// The downloads of votes and judgments: a dialogue study has none, so its menu leaves them out
/// (the links still answer, with empty files).
const JUDGMENT_DOWNLOADS: [&str; 4] = [
    "votes-csv",
    "judgments-jsonl",
    "judgments-csv",
    "crsarena_eval",
];

/// The downloads a study card's menu offers for a study of `kind` (`dialogue`, `evaluation`,
/// `arena`): [`DOWNLOADS`], less the vote and judgment formats for a dialogue study.
fn menu(kind: &str) -> impl Iterator<Item = &'static str> {
    DOWNLOADS
        .into_iter()
        .filter(move |d| kind != "dialogue" || !JUDGMENT_DOWNLOADS.contains(d))
}

/// The downloads that take `?acts=STUDY`: the formats with dialogue acts (MultiWOZ 2.1,
/// ConvLab-3, CrossWOZ), as `wozkit export --acts-from`.
pub const ACTS_DOWNLOADS: [&str; 3] = ["multiwoz", "convlab3", "crosswoz"];

/// This module's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/researcher/live", get(live))
        .route("/researcher/study/{study}/download/{what}", get(download))
}

// ----- figures -----

/// One study's figures, as the card shows them and the live stream sends them. Test
/// participants and their sessions are left out, as in the exports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StudyFigures {
    pub study: String,
    pub title: String,
    /// `dialogue`, `evaluation` or `arena`.
    pub kind: &'static str,
    /// Users waiting in the lobby (every pair key).
    pub waiting_users: u64,
    /// Wizards waiting in the lobby.
    pub waiting_wizards: u64,
    /// Dialogue sessions not ended.
    pub live: u64,
    /// Dialogue sessions ended at a terminal state, the time limit or a finish, plus evaluation
    /// participants who completed.
    pub finished: u64,
    /// Dialogue sessions ended by a disconnect or aborted.
    pub abandoned: u64,
    /// Dialogue sessions ended because no partner came.
    pub no_partner: u64,
    /// Evaluation participants without a code yet (still judging, or gone).
    pub unfinished: u64,
    /// Evaluation participants screened out (onboarding, attention checks, block list).
    pub screened_out: u64,
    /// Participants given a completion code.
    pub codes: u64,
    /// The payment table's total with the review bonuses (its `total_with_bonus` column).
    pub spent: f64,
    pub currency: String,
    /// `payment.budget`.
    pub budget: Option<f64>,
    /// Spent over budget, in percent.
    pub budget_percent: Option<f64>,
    /// More than 90 % of the budget is spent.
    pub budget_warning: bool,
    /// Median duration in seconds: finished dialogue sessions (creation to end), or evaluation
    /// participants who completed (their log's first to last event).
    pub median_duration_s: Option<f64>,
    /// Evaluation studies: items with all their judgments.
    pub items_done: Option<u64>,
    /// Evaluation studies: items in all.
    pub items_total: Option<u64>,
}

/// Every served study's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overview {
    pub studies: Vec<StudyFigures>,
    /// When they were computed (epoch milliseconds).
    pub computed_at_ms: u64,
}

impl Overview {
    fn same_figures(&self, other: &Overview) -> bool {
        self.studies == other.studies
    }
}

fn kind_of(study: &LoadedStudy) -> &'static str {
    match &study.study.evaluation {
        Some(e) if e.task == EvalTask::Arena => "arena",
        Some(_) => "evaluation",
        None => "dialogue",
    }
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// The dialogues and participant logs as listed at one moment, which the figures are computed
/// from and the fingerprint is taken of.
struct Listed {
    dialogues: Vec<SessionRecord>,
    logs: Vec<SessionRecord>,
    /// Who waits for a partner, on every instance (live places of the lobby's table).
    waiting: Vec<QueueCount>,
}

impl Listed {
    async fn read(app: &AppState) -> Result<Listed, StoreError> {
        let store = app.store.as_ref();
        let list = |kind| SessionFilter {
            kind,
            ..SessionFilter::default()
        };
        let stale = Duration::from_millis(app.tunables.stale_after_ms);
        Ok(Listed {
            dialogues: store.list_sessions(&list(SessionKind::Dialogue)).await?,
            logs: store.list_sessions(&list(SessionKind::Participant)).await?,
            waiting: app.lobby.waiting(store, None, now_ms(), stale).await?,
        })
    }

    /// What changes whenever a figure may, but for a participant's completion code (stored
    /// just after its event): every dialogue's and participant log's end and last event, and
    /// the waiting room.
    fn fingerprint(&self) -> Vec<u64> {
        let mut fp = vec![];
        for list in [&self.dialogues, &self.logs] {
            fp.push(list.len() as u64);
            for r in list {
                fp.push(r.last_seq);
                fp.push(r.ended.map_or(0, |e| e.at_ms));
            }
        }
        for q in &self.waiting {
            fp.push(q.users as u64);
            fp.push(q.wizards as u64);
        }
        fp
    }
}

/// One dialogue's or participant log's share of the figures: its rows of the payment table
/// (test ones too) and, for a participant log, the seconds from its first to its last event.
/// They depend only on the session's record (its end), its events (append-only, so its last
/// `seq` names them), its participants as stored and the study, so a part is kept while those
/// stay the same: an ended session whose participants got their codes is priced once.
struct Part {
    last_seq: u64,
    ended: Option<SessionEnd>,
    people: Vec<Participant>,
    rows: Vec<PaymentRow>,
    span_s: Option<f64>,
}

impl Part {
    fn is_for(&self, record: &SessionRecord, people: &[Participant]) -> bool {
        self.last_seq == record.last_seq && self.ended == record.ended && self.people == people
    }
}

/// The console's figures, shared by every console open on one server: a field of the app
/// state ([`crate::app::Inner`]).
pub struct Figures {
    /// The latest figures; every live stream watches it.
    tx: watch::Sender<Option<Arc<Overview>>>,
    /// The latest figures computed and the parts they were summed from. Held while
    /// computing, so that consoles asking at once share one computation.
    state: tokio::sync::Mutex<FiguresState>,
    /// A task checks for changes while someone listens.
    watching: AtomicBool,
}

impl Default for Figures {
    fn default() -> Figures {
        Figures {
            tx: watch::channel(None).0,
            state: tokio::sync::Mutex::new(FiguresState::default()),
            watching: AtomicBool::new(false),
        }
    }
}

#[derive(Default)]
struct FiguresState {
    computed: Option<Computed>,
    /// By session (dialogue or participant log) id.
    parts: HashMap<String, Part>,
}

/// Figures computed, with when and from what.
struct Computed {
    /// When the fingerprint was last read (and found the same).
    at: Instant,
    /// When the figures were computed.
    computed: Instant,
    fingerprint: Vec<u64>,
    overview: Arc<Overview>,
}

/// Every served study's figures, computed from scratch (no part kept from before): what the
/// kept parts must add up to.
#[cfg(test)]
async fn compute(app: &AppState) -> Result<Overview, StoreError> {
    let listed = Listed::read(app).await?;
    Ok(rebuild(app, &mut HashMap::new(), listed).await?.0)
}

/// Every served study's figures from `listed` (with the lobby's counts) and `parts`: the parts of sessions
/// that changed (or are new) are priced again and replaced, those of sessions gone dropped.
/// Returns the figures and how many sessions were priced.
async fn rebuild(
    app: &AppState,
    parts: &mut HashMap<String, Part>,
    listed: Listed,
) -> Result<(Overview, usize), StoreError> {
    let store = app.store.as_ref();
    // Every participant in one read, grouped as `payments` asks for them.
    let mut in_session: HashMap<String, Vec<Participant>> = HashMap::new();
    let mut by_id: HashMap<String, Participant> = HashMap::new();
    for p in store.list_participants(None).await? {
        if let Some(s) = &p.session_id {
            in_session.entry(s.clone()).or_default().push(p.clone());
        }
        by_id.insert(p.id.clone(), p);
    }
    let mut changed = Scoped::new(app.store.clone());
    for r in &listed.dialogues {
        let people = in_session.get(&r.id).map_or(&[][..], Vec::as_slice);
        if !parts.get(&r.id).is_some_and(|p| p.is_for(r, people)) {
            changed.dialogues.push(r.clone());
        }
    }
    for r in &listed.logs {
        let people = log_people(&by_id, r);
        if !parts.get(&r.id).is_some_and(|p| p.is_for(r, &people)) {
            changed.logs.push(r.clone());
        }
    }
    let repriced = changed.dialogues.len() + changed.logs.len();
    let listed_ids: HashSet<&str> = listed
        .dialogues
        .iter()
        .chain(&listed.logs)
        .map(|r| r.id.as_str())
        .collect();
    parts.retain(|id, _| listed_ids.contains(id.as_str()));
    if repriced > 0 {
        reprice(app, parts, changed, &in_session, &by_id).await?;
    }
    Ok((
        sum(app, parts, &listed.dialogues, &listed.waiting).await?,
        repriced,
    ))
}

/// The participant whose log `log` is, if it is one and they are in `by_id`.
fn log_people(by_id: &HashMap<String, Participant>, log: &SessionRecord) -> Vec<Participant> {
    log.id
        .strip_prefix("log-")
        .and_then(|id| by_id.get(id))
        .cloned()
        .into_iter()
        .collect()
}

/// Prices the sessions of `changed` again and puts their parts in `parts`.
async fn reprice(
    app: &AppState,
    parts: &mut HashMap<String, Part>,
    mut changed: Scoped,
    in_session: &HashMap<String, Vec<Participant>>,
    by_id: &HashMap<String, Participant>,
) -> Result<(), StoreError> {
    // `payments` itself prices them, on a view of the store that lists only these
    // sessions and answers with the participants read above.
    for r in &changed.dialogues {
        if let Some(people) = in_session.get(&r.id) {
            changed.in_session.insert(r.id.clone(), people.clone());
        }
    }
    for r in &changed.logs {
        for p in log_people(by_id, r) {
            changed.by_id.insert(p.id.clone(), p);
        }
    }
    let served = |id: &str| app.study(Some(id));
    let mut rows: HashMap<String, Vec<PaymentRow>> = HashMap::new();
    for row in payments(&changed, None, &served, true).await? {
        rows.entry(row.session.clone()).or_default().push(row);
    }
    let spans = std::mem::take(&mut *changed.spans.lock().unwrap_or_else(|p| p.into_inner()));
    for r in &changed.dialogues {
        let people = in_session.get(&r.id).cloned().unwrap_or_default();
        parts.insert(
            r.id.clone(),
            Part {
                last_seq: r.last_seq,
                ended: r.ended,
                people,
                rows: rows.remove(&r.id).unwrap_or_default(),
                span_s: None,
            },
        );
    }
    for r in &changed.logs {
        // None when the payment table did not read the log (no participant, or one
        // placed in a session).
        let span_s = spans
            .get(&r.id)
            .map(|&(first, last)| last.saturating_sub(first) as f64 / 1e3);
        parts.insert(
            r.id.clone(),
            Part {
                last_seq: r.last_seq,
                ended: r.ended,
                people: log_people(by_id, r),
                rows: rows.remove(&r.id).unwrap_or_default(),
                span_s,
            },
        );
    }
    Ok(())
}

/// The figures from the parts, the dialogues' records and `counts`, the people waiting on
/// every instance.
async fn sum(
    app: &AppState,
    parts: &HashMap<String, Part>,
    dialogues: &[SessionRecord],
    counts: &[QueueCount],
) -> Result<Overview, StoreError> {
    // A session with a test participant is a test session, as in the exports.
    let test_mark = format!("{TEST_KEY}=1");
    let test_sessions: HashSet<&str> = parts
        .iter()
        .filter(|(_, p)| {
            p.rows
                .iter()
                .any(|r| r.crowd_ids.split(';').any(|kv| kv == test_mark))
        })
        .map(|(id, _)| id.as_str())
        .collect();
    let mut by_study: HashMap<&str, Vec<(&PaymentRow, Option<f64>)>> = HashMap::new();
    for (id, part) in parts {
        if test_sessions.contains(id.as_str()) {
            continue;
        }
        for row in &part.rows {
            by_study
                .entry(row.study.as_str())
                .or_default()
                .push((row, part.span_s));
        }
    }
    let mut out = Vec::with_capacity(app.studies.len());
    for (id, study) in &app.studies {
        let mut f = new_figures(id, study);
        for q in counts.iter().filter(|q| q.key.study == *id) {
            f.waiting_users += q.users as u64;
            f.waiting_wizards += q.wizards as u64;
        }
        let mut durations = count_dialogues(&mut f, dialogues, &test_sessions);
        // In cents: each row's total is, so the sum is exact whatever the order. The review
        // bonuses are read afresh from the study's review log (a bonus changes no session, so
        // the kept parts do not see it): the spend is the payment table's total_with_bonus.
        let review = crate::review::read(app.store.as_ref(), id).await?;
        let rows = by_study.get(id.as_str()).map_or(&[][..], Vec::as_slice);
        let spent_cents = count_rows(&mut f, rows, &review, &mut durations);
        f.spent = spent_cents as f64 / 100.0;
        if let Some(budget) = f.budget.filter(|b| *b > 0.0) {
            f.budget_percent = Some((f.spent / budget * 1000.0).round() / 10.0);
            f.budget_warning = f.spent > budget * WARN_SHARE;
        }
        f.median_duration_s = median(durations).map(|d| (d * 10.0).round() / 10.0);
        if study.study.evaluation.is_some() {
            let items = app.store.item_counts(id, now_ms()).await?;
            f.items_total = Some(items.len() as u64);
            f.items_done = Some(items.iter().filter(|i| i.done >= i.needed).count() as u64);
        }
        out.push(f);
    }
    Ok(Overview {
        studies: out,
        computed_at_ms: now_ms(),
    })
}

/// The figures of study `id` before anything is counted: its title, kind and budget.
fn new_figures(id: &str, study: &LoadedStudy) -> StudyFigures {
    StudyFigures {
        study: id.to_string(),
        title: study.study.title.clone(),
        kind: kind_of(study),
        waiting_users: 0,
        waiting_wizards: 0,
        live: 0,
        finished: 0,
        abandoned: 0,
        no_partner: 0,
        unfinished: 0,
        screened_out: 0,
        codes: 0,
        spent: 0.0,
        currency: study
            .study
            .payment
            .as_ref()
            .map_or_else(String::new, |p| p.currency.clone()),
        budget: study.study.payment.as_ref().and_then(|p| p.budget),
        budget_percent: None,
        budget_warning: false,
        median_duration_s: None,
        items_done: None,
        items_total: None,
    }
}

/// Counts the study's dialogues (test sessions left out) into `f` by how they ended; returns
/// the durations of those finished, in seconds.
fn count_dialogues(
    f: &mut StudyFigures,
    dialogues: &[SessionRecord],
    test_sessions: &HashSet<&str>,
) -> Vec<f64> {
    let mut durations = vec![];
    for record in dialogues.iter().filter(|r| r.study_id == f.study) {
        if test_sessions.contains(record.id.as_str()) {
            continue;
        }
        match record.ended {
            None => f.live += 1,
            Some(end) => match end.reason {
                EndReason::Terminal | EndReason::TimeLimit | EndReason::Finished => {
                    f.finished += 1;
                    durations.push(end.at_ms.saturating_sub(record.created_at_ms) as f64 / 1e3);
                }
                EndReason::NoPartner => f.no_partner += 1,
                EndReason::Disconnect | EndReason::Aborted => f.abandoned += 1,
            },
        }
    }
    durations
}

/// Counts the study's payment rows into `f` (codes, and the evaluation participants by their
/// status, their durations added to `durations`); returns the spend with the review bonuses,
/// in cents.
fn count_rows(
    f: &mut StudyFigures,
    rows: &[(&PaymentRow, Option<f64>)],
    review: &HashMap<String, crate::review::Reviewed>,
    durations: &mut Vec<f64>,
) -> i64 {
    let mut spent_cents: i64 = 0;
    for (row, span_s) in rows {
        let bonus = review
            .get(&row.participant)
            .map_or(0, |r| i64::try_from(r.bonus_cents()).unwrap_or(i64::MAX));
        spent_cents = spent_cents
            .saturating_add(cents(row.total))
            .saturating_add(bonus);
        if !row.completion_code.is_empty() {
            f.codes += 1;
        }
        // Evaluation rows are the participant logs' (their session column is the log).
        if row.judgments.is_some() || row.session.starts_with("log-") {
            match row.status.as_str() {
                "completed" => {
                    f.finished += 1;
                    durations.extend(span_s);
                }
                s if s.starts_with("screened_") => f.screened_out += 1,
                "abandoned" => f.unfinished += 1,
                _ => {}
            }
        }
    }
    spent_cents
}

/// An amount of the payment table (rounded to cents there) in cents.
fn cents(amount: f64) -> i64 {
    (amount * 100.0).round() as i64
}

/// [`rebuild`] on a blocking thread: pricing reads every event of the sessions that changed,
/// which must not hold up the server's async workers.
async fn rebuild_off_thread(
    app: &AppState,
    parts: &mut HashMap<String, Part>,
    listed: Listed,
) -> Result<(Overview, usize), StoreError> {
    let app = app.clone();
    let mut owned = std::mem::take(parts);
    let runtime = tokio::runtime::Handle::current();
    let work = tokio::task::spawn_blocking(move || {
        let out = runtime.block_on(rebuild(&app, &mut owned, listed));
        (out, owned)
    })
    .await;
    match work {
        Ok((out, owned)) => {
            *parts = owned;
            out
        }
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Cancelled: the runtime is shutting down, and the store with it.
            Err(_) => Err(StoreError::Closed),
        },
    }
}

/// The store as `payments` sees it while the changed sessions are priced: it lists only
/// those, answers participant questions from one bulk read, and notes each log's first and
/// last event as they are read. Everything else goes to the store.
struct Scoped {
    inner: Arc<dyn Store>,
    dialogues: Vec<SessionRecord>,
    logs: Vec<SessionRecord>,
    in_session: HashMap<String, Vec<Participant>>,
    by_id: HashMap<String, Participant>,
    /// Participant logs read whole: their first and last event's time.
    spans: Mutex<HashMap<String, (u64, u64)>>,
}

impl Scoped {
    fn new(inner: Arc<dyn Store>) -> Scoped {
        Scoped {
            inner,
            dialogues: vec![],
            logs: vec![],
            in_session: HashMap::new(),
            by_id: HashMap::new(),
            spans: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait::async_trait]
impl SessionStore for Scoped {
    async fn create_session(&self, new: NewSession) -> wozkit_store::Result<SessionRecord> {
        self.inner.create_session(new).await
    }
    async fn session(&self, id: &str) -> wozkit_store::Result<Option<SessionRecord>> {
        self.inner.session(id).await
    }
    async fn list_sessions(
        &self,
        filter: &SessionFilter,
    ) -> wozkit_store::Result<Vec<SessionRecord>> {
        let listed = match filter.kind {
            SessionKind::Dialogue => &self.dialogues,
            SessionKind::Participant => &self.logs,
        };
        Ok(listed
            .iter()
            .filter(|r| filter.study_id.as_ref().is_none_or(|s| *s == r.study_id))
            .cloned()
            .collect())
    }
    async fn count_sessions(&self, filter: &SessionFilter) -> wozkit_store::Result<u64> {
        self.inner.count_sessions(filter).await
    }
    async fn end_session(
        &self,
        id: &str,
        reason: EndReason,
        at_ms: u64,
    ) -> wozkit_store::Result<bool> {
        self.inner.end_session(id, reason, at_ms).await
    }
}

#[async_trait::async_trait]
impl EventStore for Scoped {
    async fn append(
        &self,
        session: &str,
        events: Vec<NewEvent>,
    ) -> wozkit_store::Result<Vec<Event>> {
        self.inner.append(session, events).await
    }
    async fn append_after(
        &self,
        session: &str,
        after_seq: u64,
        events: Vec<NewEvent>,
    ) -> wozkit_store::Result<Vec<Event>> {
        self.inner.append_after(session, after_seq, events).await
    }
    async fn append_once(
        &self,
        session: &str,
        key: &str,
        events: Vec<NewEvent>,
    ) -> wozkit_store::Result<Option<Vec<Event>>> {
        self.inner.append_once(session, key, events).await
    }
    async fn events(&self, session: &str, after_seq: u64) -> wozkit_store::Result<Vec<Event>> {
        let events = self.inner.events(session, after_seq).await?;
        if after_seq == 0
            && let (Some(first), Some(last)) = (events.first(), events.last())
        {
            self.spans
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(session.to_string(), (first.at_ms, last.at_ms));
        }
        Ok(events)
    }
    async fn events_page(
        &self,
        study_id: Option<&str>,
        after: Option<&EventCursor>,
        limit: u32,
    ) -> wozkit_store::Result<Vec<Event>> {
        self.inner.events_page(study_id, after, limit).await
    }
}

#[async_trait::async_trait]
impl ParticipantStore for Scoped {
    async fn create_participant(&self, new: NewParticipant) -> wozkit_store::Result<Participant> {
        self.inner.create_participant(new).await
    }
    async fn participant(&self, id: &str) -> wozkit_store::Result<Option<Participant>> {
        Ok(self.by_id.get(id).cloned())
    }
    async fn participant_by_token_hash(
        &self,
        token_hash: &str,
    ) -> wozkit_store::Result<Option<Participant>> {
        self.inner.participant_by_token_hash(token_hash).await
    }
    async fn participant_by_worker(
        &self,
        study_id: &str,
        platform: Platform,
        worker_id: &str,
    ) -> wozkit_store::Result<Option<Participant>> {
        self.inner
            .participant_by_worker(study_id, platform, worker_id)
            .await
    }
    async fn participants_in_session(
        &self,
        session_id: &str,
    ) -> wozkit_store::Result<Vec<Participant>> {
        Ok(self.in_session.get(session_id).cloned().unwrap_or_default())
    }
    async fn list_participants(
        &self,
        study_id: Option<&str>,
    ) -> wozkit_store::Result<Vec<Participant>> {
        self.inner.list_participants(study_id).await
    }
    async fn update_participant(
        &self,
        id: &str,
        patch: ParticipantPatch,
    ) -> wozkit_store::Result<Participant> {
        self.inner.update_participant(id, patch).await
    }
    async fn open_participant_log(&self, new: NewSession) -> wozkit_store::Result<SessionRecord> {
        self.inner.open_participant_log(new).await
    }
}

#[async_trait::async_trait]
impl Store for Scoped {
    async fn close(&self) {
        self.inner.close().await
    }
}

/// A view: no room is run through it (the leases' defaults refuse).
#[async_trait::async_trait]
impl RoomLeaseStore for Scoped {}

/// Claims, accounts, the lobby and settings go to the store as they are.
impl Forward for Scoped {
    type To = dyn Store;
    fn inner(&self) -> &dyn Store {
        self.inner.as_ref()
    }
}
impl ForwardClaims for Scoped {}
impl ForwardAccounts for Scoped {}
impl ForwardLobby for Scoped {}
impl ForwardMeta for Scoped {}

/// The figures, at most [`FRESH`] old; recomputed only when the fingerprint changed (or after
/// [`MAX_STALE`]), and then only the parts of sessions that changed. Sends them to the live
/// streams when they differ from the last sent.
pub async fn current(app: &AppState) -> Result<Arc<Overview>, StoreError> {
    let figures = &app.console_figures;
    let mut state = figures.state.lock().await;
    if let Some(c) = state.computed.as_ref()
        && c.at.elapsed() < FRESH
    {
        return Ok(c.overview.clone());
    }
    let listed = Listed::read(app).await?;
    let fp = listed.fingerprint();
    if let Some(c) = state.computed.as_mut()
        && c.fingerprint == fp
        && c.computed.elapsed() < MAX_STALE
    {
        c.at = Instant::now();
        return Ok(c.overview.clone());
    }
    let started = Instant::now();
    let (overview, repriced) = rebuild_off_thread(app, &mut state.parts, listed).await?;
    let overview = Arc::new(overview);
    tracing::debug!(
        "console figures computed in {} ms ({repriced} sessions priced)",
        started.elapsed().as_millis()
    );
    state.computed = Some(Computed {
        at: Instant::now(),
        computed: Instant::now(),
        fingerprint: fp,
        overview: overview.clone(),
    });
    figures.tx.send_if_modified(|sent| {
        if sent.as_ref().is_some_and(|s| s.same_figures(&overview)) {
            false
        } else {
            *sent = Some(overview.clone());
            true
        }
    });
    Ok(overview)
}

/// Starts the task that checks for changes every [`FRESH`], unless it runs; it stops when no
/// console listens any more, or the server stops.
fn watch_changes(app: &AppState) {
    let figures = &app.console_figures;
    if figures.watching.swap(true, Ordering::AcqRel) {
        return;
    }
    let app = app.clone();
    tokio::spawn(async move {
        let figures = &app.console_figures;
        loop {
            tokio::select! {
                () = app.stopping() => break,
                () = tokio::time::sleep(FRESH) => {}
            }
            if figures.tx.receiver_count() == 0 {
                figures.watching.store(false, Ordering::Release);
                // A console that came meanwhile found the task running: keep it.
                if figures.tx.receiver_count() == 0 || figures.watching.swap(true, Ordering::AcqRel)
                {
                    break;
                }
            }
            if let Err(e) = current(&app).await {
                tracing::warn!("console figures: {e}");
            }
        }
        figures.watching.store(false, Ordering::Release);
    });
}

fn figures_event(o: &Overview) -> SseEvent {
    SseEvent::default()
        .event("figures")
        .data(serde_json::to_string(o).unwrap_or_else(|_| "{}".into()))
}

/// `GET /researcher/live`: the figures now, then whenever they change.
pub async fn live(State(app): State<AppState>, _: ResearcherPage) -> Result<Response, HttpError> {
    let mut rx = app.console_figures.tx.subscribe();
    watch_changes(&app);
    let first = current(&app).await?;
    rx.mark_unchanged();
    let stream =
        futures_util::stream::unfold((Some(first), rx, app), |(first, mut rx, app)| async move {
            if let Some(o) = first {
                return Some((
                    Ok::<_, std::convert::Infallible>(figures_event(&o)),
                    (None, rx, app),
                ));
            }
            tokio::select! {
                () = app.stopping() => None,
                changed = rx.changed() => {
                    changed.ok()?;
                    let o = rx.borrow_and_update().clone()?;
                    Some((Ok(figures_event(&o)), (None, rx, app)))
                }
            }
        });
    let mut res = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    res.headers_mut().insert(
        CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    Ok(res)
}

// ----- the overview page -----

fn money(amount: f64, currency: &str) -> String {
    format!("{amount:.2} {currency}").trim_end().to_string()
}

fn duration_text(s: Option<f64>) -> String {
    match s {
        None => "—".into(),
        Some(s) if s < 120.0 => format!("{s:.0} s"),
        Some(s) => format!("{:.1} min", s / 60.0),
    }
}

fn spend_text(f: &StudyFigures) -> String {
    match (f.budget, f.budget_percent) {
        (Some(b), Some(p)) => format!(
            "spent {} of {} ({p:.1} %)",
            money(f.spent, &f.currency),
            money(b, &f.currency)
        ),
        _ => format!("spent {}", money(f.spent, &f.currency)),
    }
}

fn figure(key: &str, label: &str, value: String) -> String {
    format!(
        "<div class=\"figure\"><dt>{}</dt><dd data-figure=\"{}\">{}</dd></div>",
        esc(label),
        esc(key),
        esc(&value)
    )
}

/// The served `turn_acts` studies whose `from_store` selects `study`: the act annotations its
/// downloads can carry.
fn act_studies(app: &AppState, study: &str) -> Vec<String> {
    let mut out: Vec<String> = app
        .studies
        .values()
        .filter_map(|s| s.study.evaluation.as_ref().map(|e| (&s.study.id, e)))
        .filter(|(_, e)| {
            e.task == EvalTask::TurnActs && e.store_selections().iter().any(|s| s.study == study)
        })
        .map(|(id, _)| id.clone())
        .collect();
    out.sort();
    out
}

/// The download links with the adjudicated acts of each of `act_studies` (one per format of
/// [`ACTS_DOWNLOADS`]), as list items of the card's download menu.
fn acts_links(study: &str, act_studies: &[String]) -> String {
    let id = path_escape(study);
    act_studies
        .iter()
        .map(|a| {
            let links: Vec<String> = ACTS_DOWNLOADS
                .iter()
                .map(|d| {
                    format!(
                        "<a href=\"/researcher/study/{id}/download/{d}?acts={q}\" download \
                         data-acts=\"{name}\">{d}</a>",
                        q = query_escape(a),
                        name = esc(a),
                    )
                })
                .collect();
            format!(
                "<li class=\"acts-downloads\">with the adjudicated acts of <code>{}</code>: {}</li>",
                esc(a),
                links.join(" ")
            )
        })
        .collect()
}

fn card(f: &StudyFigures, join_form: &str, act_studies: &[String]) -> String {
    let id = path_escape(&f.study);
    let mut figures = String::new();
    figures.push_str(&figure(
        "waiting_users",
        "waiting users",
        f.waiting_users.to_string(),
    ));
    if f.kind == "dialogue" {
        figures.push_str(&figure(
            "waiting_wizards",
            "waiting wizards",
            f.waiting_wizards.to_string(),
        ));
    }
    // Dialogue studies pair people and lose some; evaluation studies screen and judge.
    let dialogue = f.kind == "dialogue";
    for (key, label, v, shown) in [
        ("live", "live rooms", f.live, true),
        ("finished", "finished", f.finished, true),
        ("abandoned", "abandoned", f.abandoned, dialogue),
        ("no_partner", "no partner", f.no_partner, dialogue),
        ("screened_out", "screened out", f.screened_out, !dialogue),
        ("unfinished", "no code yet", f.unfinished, !dialogue),
        ("codes", "codes issued", f.codes, true),
    ] {
        if shown {
            figures.push_str(&figure(key, label, v.to_string()));
        }
    }
    figures.push_str(&figure(
        "median_duration",
        "median duration",
        duration_text(f.median_duration_s),
    ));
    if let (Some(done), Some(total)) = (f.items_done, f.items_total) {
        figures.push_str(&figure("items", "items done", format!("{done} / {total}")));
    }
    let mut links = format!(
        "<a href=\"/researcher/study/{id}/review\">review and pay</a> \
         <a href=\"/researcher#sessions\">sessions</a>"
    );
    if f.kind == "arena" {
        let _ = write!(links, " <a href=\"/leaderboard/{id}\">leaderboard</a>");
    }
    let downloads: String = menu(f.kind)
        .map(|d| {
            format!("<li><a href=\"/researcher/study/{id}/download/{d}\" download>{d}</a></li>")
        })
        .collect::<String>()
        + &acts_links(&f.study, act_studies);
    format!(
        "<section class=\"study-card\" data-study=\"{study}\"><h2>{title} <code>{study}</code> \
         <span class=\"muted\">{kind}</span></h2><dl class=\"figures\">{figures}</dl>\
         <p class=\"spend{warn}\" data-figure=\"spend\">{spend}</p>\
         <nav class=\"study-links\">{links}</nav>{join_form}\
         <details><summary>Downloads</summary><ul class=\"downloads\">{downloads}</ul>\
         <p class=\"muted\">Test sessions are left out; add <code>?test=1</code> to a link to keep them.</p></details></section>",
        study = esc(&f.study),
        title = esc(&f.title),
        kind = f.kind,
        warn = if f.budget_warning { " over-budget" } else { "" },
        spend = esc(&spend_text(f)),
    )
}

/// The overview for `me`: links to their account (and, for owners, every account), then one
/// card per served study with its figures as of now and, for researchers and owners, the form
/// that joins a dialogue study's waiting room as its wizard. `console.js` keeps the figures up
/// to date from [`live`].
pub async fn overview_html(app: &AppState, me: &Researcher) -> Result<String, StoreError> {
    let o = current(app).await?;
    let cards: String = o
        .studies
        .iter()
        .map(|f| {
            let join = match app.study(Some(&f.study)) {
                Some(study) if f.kind == "dialogue" => {
                    super::observe::join_as_wizard_form(&study, me)
                }
                _ => String::new(),
            };
            card(f, &join, &act_studies(app, &f.study))
        })
        .collect();
    let mut links =
        "<a href=\"/researcher/account\" id=\"account-link\">Your account</a>".to_string();
    if me.may(Access::Owner) {
        links.push_str(" <a href=\"/researcher/accounts\" id=\"accounts-link\">Accounts</a>");
    }
    Ok(format!(
        "<nav class=\"console-links\">{links}</nav>\
         <section id=\"overview\" data-live-url=\"/researcher/live\">\
         <p class=\"muted\" id=\"overview-state\">Figures as of the page's loading.</p>{cards}</section>"
    ))
}

// ----- downloads -----

/// A download's query: `test=1` keeps test sessions; each `acts=STUDY` names an
/// act-annotation study whose adjudicated acts the export carries.
#[derive(Debug, Default)]
pub struct DownloadQuery {
    test: bool,
    acts: Vec<String>,
}

impl DownloadQuery {
    fn parse(pairs: Vec<(String, String)>) -> DownloadQuery {
        let mut q = DownloadQuery::default();
        for (key, value) in pairs {
            match key.as_str() {
                "test" => q.test = value == "1" || value == "true",
                "acts" if !q.acts.contains(&value) => q.acts.push(value),
                _ => {}
            }
        }
        q
    }
}

/// The adjudicated acts of the `acts` studies for the download `what` of `study`: a 400 when
/// `what` has no dialogue acts, when a served study among them is not a `turn_acts` study, or
/// when one not served holds no act labels in the store. Read as `wozkit export --acts-from`.
async fn download_acts(
    app: &AppState,
    study: &str,
    what: &str,
    acts: &[String],
) -> Result<TurnActs, HttpError> {
    if acts.is_empty() {
        return Ok(TurnActs::default());
    }
    if !ACTS_DOWNLOADS.contains(&what) {
        return Err(HttpError::BadRequest(format!(
            "download {what} of study `{study}`: ?acts={} is for the formats with dialogue acts \
             ({}), not {what}",
            acts.join(","),
            ACTS_DOWNLOADS.join(", ")
        )));
    }
    let mut judgments = vec![];
    for a in acts {
        let served = app.study(Some(a));
        if let Some(s) = &served {
            let task = s.study.evaluation.as_ref().map(|e| e.task);
            if task != Some(EvalTask::TurnActs) {
                return Err(HttpError::BadRequest(format!(
                    "download {what} of study `{study}`: ?acts={a}: study `{a}` is not an \
                     act-annotation study (`evaluation.task: turn_acts`)"
                )));
            }
        }
        let own = wozkit_data::stored::span_judgments(app.store.as_ref(), std::slice::from_ref(a))
            .await?;
        if served.is_none() && !own.iter().any(|j| label_of(j).is_some()) {
            return Err(HttpError::BadRequest(format!(
                "download {what} of study `{study}`: ?acts={a}: study `{a}` is not served and \
                 the store holds no act labels of it"
            )));
        }
        judgments.extend(own);
    }
    Ok(TurnActs::from_judgments(&judgments))
}

fn file_name_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn attachment(name: &str, content_type: &'static str, body: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [
            (CONTENT_TYPE, content_type.to_string()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"{}\"", file_name_part(name)),
            ),
            (CACHE_CONTROL, "no-store".to_string()),
        ],
        body,
    )
        .into_response()
}

fn content_type(name: &str) -> &'static str {
    if name.ends_with(".csv") {
        "text/csv; charset=utf-8"
    } else if name.ends_with(".jsonl") {
        "application/x-ndjson"
    } else if name.ends_with(".json") {
        "application/json"
    } else if name.ends_with(".html") {
        "text/html; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

/// Why a download failed.
#[derive(Debug)]
struct DownloadError(String);

impl IntoResponse for DownloadError {
    fn into_response(self) -> Response {
        tracing::error!("console download: {}", self.0);
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("The export could not be made: {}", self.0),
        )
            .into_response()
    }
}

/// The questionnaires the report scores answers with: the built-in studies', then the served
/// ones' (as `wozkit report --study`).
fn questionnaires(app: &AppState) -> Questionnaires {
    let mut q = Questionnaires::default();
    for name in wozkit_core::load::builtin_names() {
        if let Ok(s) = wozkit_core::load::load_builtin(&name) {
            q.add(&s.study);
        }
    }
    for s in app.studies.values() {
        q.add(&s.study);
    }
    q
}

/// Builds the download `what` of `study` (one file, or several zipped).
async fn build_download(
    app: AppState,
    study: String,
    what: String,
    include_test: bool,
    acts: TurnActs,
) -> Result<Response, DownloadError> {
    let base = file_name_part(&study);
    let err = |e: &dyn std::fmt::Display| DownloadError(format!("{what} of study {study}: {e}"));
    match what.as_str() {
        "report" | "report-json" => {
            report_download(&app, &study, &what, &base, include_test, &err).await
        }
        "payments" => payments_download(&app, &study, &base, include_test, &err).await,
        "log" => log_download(&app, &study, &base, include_test, &err).await,
        name => export_download(&app, &study, name, &base, include_test, &acts, &err).await,
    }
}

/// The study's report, as a page (`report`) or as JSON (`report-json`).
async fn report_download(
    app: &AppState,
    study: &str,
    what: &str,
    base: &str,
    include_test: bool,
    err: &impl Fn(&dyn std::fmt::Display) -> DownloadError,
) -> Result<Response, DownloadError> {
    let options = ReportOptions {
        filters: vec![Filter {
            key: "study".into(),
            value: study.to_string(),
        }],
        questionnaires: questionnaires(app),
        include_test,
        ..ReportOptions::default()
    };
    let report = build_report(app.store.as_ref(), &options)
        .await
        .map_err(|e| err(&e))?;
    Ok(if what == "report" {
        attachment(
            &format!("{base}.report.html"),
            "text/html; charset=utf-8",
            render_html(&report).into_bytes(),
        )
    } else {
        let json = serde_json::to_vec_pretty(&report).map_err(|e| err(&e))?;
        attachment(&format!("{base}.report.json"), "application/json", json)
    })
}

/// The study's payment table, as CSV.
async fn payments_download(
    app: &AppState,
    study: &str,
    base: &str,
    include_test: bool,
    err: &impl Fn(&dyn std::fmt::Display) -> DownloadError,
) -> Result<Response, DownloadError> {
    let served = |id: &str| app.study(Some(id));
    let rows = payments(app.store.as_ref(), Some(study), &served, include_test)
        .await
        .map_err(|e| err(&e))?;
    let mut csv = vec![];
    write_csv(&rows, &mut csv).map_err(|e| err(&e))?;
    Ok(attachment(
        &format!("{base}.payments.csv"),
        "text/csv; charset=utf-8",
        csv,
    ))
}

/// The study's sessions' logs, one JSON line each.
async fn log_download(
    app: &AppState,
    study: &str,
    base: &str,
    include_test: bool,
    err: &impl Fn(&dyn std::fmt::Display) -> DownloadError,
) -> Result<Response, DownloadError> {
    let store = app.store.as_ref();
    let mut out = vec![];
    for r in sessions(store, Some(study)).await.map_err(|e| err(&e))? {
        if !include_test && is_test_session(store, &r.id).await.map_err(|e| err(&e))? {
            continue;
        }
        let log = session_log(store, r).await.map_err(|e| err(&e))?;
        serde_json::to_writer(&mut out, &log).map_err(|e| err(&e))?;
        out.push(b'\n');
    }
    Ok(attachment(
        &format!("{base}.log.jsonl"),
        "application/x-ndjson",
        out,
    ))
}

/// The study exported in format `name`: one file as it is, several in a zip.
async fn export_download(
    app: &AppState,
    study: &str,
    name: &str,
    base: &str,
    include_test: bool,
    acts: &TurnActs,
    err: &impl Fn(&dyn std::fmt::Display) -> DownloadError,
) -> Result<Response, DownloadError> {
    let format = ExportFormat::parse(name).ok_or_else(|| err(&"unknown format"))?;
    // The served study's own `datasets:` mapping, as `wozkit export --mapping` gives it.
    let served = app.study(Some(study));
    let mappings = Mappings::with_studies(served.iter().map(|s| &s.study));
    let files: Vec<NamedFile> = export_into_memory_annotated(
        app.store.as_ref(),
        format,
        Some(study),
        include_test,
        base,
        acts,
        &mappings,
    )
    .await
    .map_err(|e| err(&e))?;
    match files.as_slice() {
        [(file, bytes)] if !file.contains('/') => {
            Ok(attachment(file, content_type(file), bytes.clone()))
        }
        _ => {
            let zip = zip_files(&files).map_err(|e| err(&e))?;
            Ok(attachment(
                &format!("{base}.{name}.zip"),
                "application/zip",
                zip,
            ))
        }
    }
}

/// `GET /researcher/study/{study}/download/{what}`: an export of a served study, built on a
/// blocking thread (the exports write and read files, the report computes) so the server keeps
/// serving meanwhile. With `?acts=STUDY` (repeatable) the MultiWOZ, ConvLab-3 and CrossWOZ
/// exports carry that act-annotation study's adjudicated acts ([`download_acts`]).
pub async fn download(
    State(app): State<AppState>,
    _: ResearcherPage,
    Path((study, what)): Path<(String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, HttpError> {
    let q = DownloadQuery::parse(pairs);
    if app.study(Some(&study)).is_none() || !DOWNLOADS.contains(&what.as_str()) {
        return Err(HttpError::NotFound);
    }
    let include_test = q.test;
    let acts = download_acts(&app, &study, &what, &q.acts).await?;
    let runtime = tokio::runtime::Handle::current();
    let work = tokio::task::spawn_blocking(move || {
        runtime.block_on(build_download(app, study, what, include_test, acts))
    })
    .await;
    Ok(match work {
        Ok(Ok(res)) => res,
        Ok(Err(e)) => e.into_response(),
        Err(e) => DownloadError(format!("the export task failed: {e}")).into_response(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeMap;

    use wozkit_core::event::{Actor, EventKind, Role};
    use wozkit_core::load::{StudySource, load_text};
    use wozkit_store::{NewEvent, NewParticipant, NewSession, ParticipantPatch, Platform};

    use crate::app::{Config, Tunables};

    const PAID: &str = r#"
id: paid
title: Paid study
roles:
  user: {label: Operator}
  wizard: {label: Assistant}
session: {time_limit_s: 600, clock_starts: start}
states:
  - {id: start, type: interaction, initial: true, transitions: [bye]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
payment: {currency: EUR, base: 1.00, per_minute: 0.15, max_minutes: 5, no_partner: 0.35, budget: 20}
"#;

    const T0: u64 = 1_700_000_000_000;
    const MINUTE: u64 = 60_000;

    async fn app(dir: &std::path::Path) -> (AppState, watch::Sender<bool>) {
        let study = load_text("paid.yaml", PAID, StudySource::Dir(".".into())).expect("study");
        let store = wozkit_store::open(dir.to_str().expect("path"))
            .await
            .expect("store");
        let (stop, stop_rx) = watch::channel(false);
        let (alive, _) = tokio::sync::mpsc::channel(1);
        let config = Config {
            studies: vec![study],
            tunables: Tunables::default(),
        };
        let app = AppState::new(config, store, stop_rx, alive)
            .await
            .expect("app");
        (app, stop)
    }

    fn system(at_ms: u64, kind: EventKind) -> NewEvent {
        NewEvent {
            actor: Actor::System,
            kind,
            at_ms,
        }
    }

    /// A dialogue started (clock too) at `T0`, with a user and a wizard (`test` ones if asked).
    async fn start(store: &dyn Store, id: &str, test: bool) {
        store
            .create_session(NewSession {
                id: id.into(),
                study_id: "paid".into(),
                study_version: "1".into(),
                seed: 0,
                created_at_ms: T0 - MINUTE,
            })
            .await
            .expect("session");
        let started = EventKind::SessionStarted {
            study: "paid".into(),
            study_version: "1".into(),
            seed: 0,
            initial_state: "start".into(),
        };
        let clock = EventKind::ClockStarted {
            deadline_ms: T0 + 10 * MINUTE,
        };
        store
            .append(id, vec![system(T0, started), system(T0, clock)])
            .await
            .expect("append");
        for role in [Role::User, Role::Wizard] {
            let pid = format!("{id}-{}", role.as_str());
            let mut external_ids = BTreeMap::new();
            if test {
                external_ids.insert(TEST_KEY.to_string(), "1".to_string());
            }
            store
                .create_participant(NewParticipant {
                    id: pid.clone(),
                    token_hash: format!("hash-{pid}"),
                    study_id: "paid".into(),
                    platform: Platform::Lab,
                    worker_id: None,
                    external_ids,
                    flow_step: "room".into(),
                    created_at_ms: T0 - MINUTE,
                })
                .await
                .expect("participant");
            store
                .update_participant(
                    &pid,
                    ParticipantPatch {
                        role: Some(Some(role)),
                        session_id: Some(Some(id.into())),
                        ..ParticipantPatch::default()
                    },
                )
                .await
                .expect("place");
        }
    }

    async fn end(store: &dyn Store, id: &str, reason: EndReason, minutes: u64) {
        let at = T0 + minutes * MINUTE;
        let ended = EventKind::SessionEnded {
            reason,
            goal_reached: false,
        };
        store
            .append(id, vec![system(at, ended)])
            .await
            .expect("append end");
        store.end_session(id, reason, at).await.expect("end");
    }

    async fn code(store: &dyn Store, participant: &str, code: &str) {
        store
            .update_participant(
                participant,
                ParticipantPatch {
                    completion_code: Some(Some(code.into())),
                    ..ParticipantPatch::default()
                },
            )
            .await
            .expect("code");
    }

    /// Rebuilds with the kept parts; checks the figures against a computation from scratch
    /// and the spend and codes against the payment table; returns how many were priced.
    async fn check(app: &AppState, parts: &mut HashMap<String, Part>) -> usize {
        let listed = Listed::read(app).await.expect("list");
        let (kept, priced) = rebuild(app, parts, listed).await.expect("rebuild");
        let fresh = compute(app).await.expect("compute");
        assert_eq!(
            kept.studies, fresh.studies,
            "kept parts against from scratch"
        );
        let served = |id: &str| app.study(Some(id));
        let rows = payments(app.store.as_ref(), Some("paid"), &served, false)
            .await
            .expect("payments");
        let spent: i64 = rows.iter().map(|r| cents(r.total)).sum();
        let f = &kept.studies[0];
        assert_eq!(cents(f.spent), spent, "spend is the payment table's total");
        let codes = rows
            .iter()
            .filter(|r| !r.completion_code.is_empty())
            .count();
        assert_eq!(f.codes, codes as u64);
        priced
    }

    #[tokio::test]
    async fn kept_parts_give_the_figures_from_scratch_and_only_changes_are_priced() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let (app, _stop) = app(tmp.path()).await;
        let store = app.store.as_ref();
        let mut parts = HashMap::new();
        start(store, "a", false).await;
        end(store, "a", EndReason::Terminal, 3).await;
        code(store, "a-user", "CA").await;
        code(store, "a-wizard", "CB").await;
        start(store, "b", false).await;
        end(store, "b", EndReason::Disconnect, 1).await;
        start(store, "c", false).await;
        assert_eq!(
            check(&app, &mut parts).await,
            3,
            "everything priced at first"
        );
        assert_eq!(check(&app, &mut parts).await, 0, "nothing changed");
        // A code stored after its session ended (no new event): only that session.
        code(store, "b-user", "CC").await;
        assert_eq!(check(&app, &mut parts).await, 1);
        // The live one ends with codes; a test session starts and ends.
        end(store, "c", EndReason::TimeLimit, 10).await;
        code(store, "c-user", "CD").await;
        code(store, "c-wizard", "CE").await;
        start(store, "t", true).await;
        end(store, "t", EndReason::Terminal, 2).await;
        code(store, "t-user", "CT").await;
        assert_eq!(check(&app, &mut parts).await, 2);
        // A session no partner came to, a live one.
        start(store, "d", false).await;
        end(store, "d", EndReason::NoPartner, 0).await;
        start(store, "e", false).await;
        assert_eq!(check(&app, &mut parts).await, 2);
        let f = &compute(&app).await.expect("compute").studies[0];
        assert_eq!(
            (f.live, f.finished, f.abandoned, f.no_partner, f.codes),
            (1, 2, 1, 1, 5),
            "{f:?}"
        );
        assert!(f.spent > 0.0);
        assert_eq!(check(&app, &mut parts).await, 0, "nothing changed");
        app.store.close().await;
    }

    #[test]
    fn the_median_is_the_middle_or_the_mean_of_the_two_middles() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    /// An act-annotation study over `source`'s stored sessions.
    fn acts_study(id: &str, source: &str) -> LoadedStudy {
        let text = format!(
            "id: {id}\ntitle: Label turns\nflow:\n  user:\n    - {{kind: consent}}\n    \
             - {{kind: rate}}\n    - {{kind: completion}}\nevaluation:\n  task: turn_acts\n  \
             judgments_per_item: 2\n  acts:\n    which: user\n    acts: [inform, request]\n  \
             from_store: {{study: {source}}}\n"
        );
        load_text("acts.yaml", &text, StudySource::Dir(".".into()))
            .unwrap_or_else(|d| panic!("{d}"))
    }

    #[tokio::test]
    async fn a_study_annotated_by_a_served_act_study_offers_its_acts_downloads() {
        let dir = tempfile::tempdir().expect("dir");
        let store = wozkit_store::open(dir.path().to_str().expect("path"))
            .await
            .expect("store");
        // An ended dialogue with a message in each source study (`from_store` needs one).
        for (id, source) in [("s-paid", "paid"), ("s-elsewhere", "elsewhere")] {
            store
                .create_session(NewSession {
                    id: id.into(),
                    study_id: source.into(),
                    study_version: "1".into(),
                    seed: 0,
                    created_at_ms: T0,
                })
                .await
                .expect("session");
            let said = EventKind::Message {
                role: Role::User,
                text: "Hello.".into(),
                source: wozkit_core::event::MessageSource::Free,
            };
            store
                .append(id, vec![system(T0, said)])
                .await
                .expect("message");
            end(store.as_ref(), id, EndReason::Terminal, 1).await;
        }
        let (_stop, stop_rx) = watch::channel(false);
        let (alive, _) = tokio::sync::mpsc::channel(1);
        let paid = load_text("paid.yaml", PAID, StudySource::Dir(".".into())).expect("study");
        let config = Config {
            studies: vec![
                paid,
                acts_study("acts-b", "paid"),
                acts_study("acts-a", "paid"),
                acts_study("acts-other", "elsewhere"),
            ],
            tunables: Tunables::default(),
        };
        let app = AppState::new(config, store, stop_rx, alive)
            .await
            .expect("app");
        assert_eq!(act_studies(&app, "paid"), ["acts-a", "acts-b"]);
        assert!(act_studies(&app, "acts-a").is_empty());
        let me = Researcher {
            id: "owner".into(),
            name: "owner".into(),
            access: Access::Owner,
            csrf: String::new(),
        };
        let html = overview_html(&app, &me).await.expect("overview");
        for a in ["acts-a", "acts-b"] {
            for d in ACTS_DOWNLOADS {
                let link = format!("href=\"/researcher/study/paid/download/{d}?acts={a}\"");
                assert!(html.contains(&link), "{link} in {html}");
            }
        }
        assert!(!html.contains("?acts=acts-other"), "{html}");
        // The act studies' own cards offer no acts downloads.
        assert_eq!(
            html.matches("class=\"acts-downloads\"").count(),
            2,
            "{html}"
        );
    }

    #[test]
    fn the_acts_of_a_download_are_repeatable_and_only_for_formats_with_acts() {
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let q = DownloadQuery::parse(pairs(&[
            ("acts", "a"),
            ("test", "1"),
            ("acts", "b"),
            ("acts", "a"),
        ]));
        assert!(q.test);
        assert_eq!(q.acts, ["a", "b"]);
        assert!(!DownloadQuery::parse(pairs(&[("test", "0")])).test);
        for d in ACTS_DOWNLOADS {
            assert!(DOWNLOADS.contains(&d), "{d} is a download");
        }
    }

    #[test]
    fn every_export_format_can_be_downloaded() {
        for name in ExportFormat::NAMES {
            assert!(DOWNLOADS.contains(&name), "{name} is not offered");
        }
    }

    #[test]
    fn a_dialogue_study_is_offered_no_vote_or_judgment_downloads() {
        let dialogue: Vec<&str> = menu("dialogue").collect();
        for d in JUDGMENT_DOWNLOADS {
            assert!(DOWNLOADS.contains(&d), "{d} is a download");
            assert!(!dialogue.contains(&d), "{d} offered for a dialogue study");
        }
        for d in [
            "log",
            "jsonl",
            "multiwoz",
            "convlab3",
            "taskmaster1",
            "payments",
            "report",
        ] {
            assert!(
                dialogue.contains(&d),
                "{d} not offered for a dialogue study"
            );
        }
        for kind in ["evaluation", "arena"] {
            assert_eq!(menu(kind).collect::<Vec<_>>(), DOWNLOADS, "{kind}");
        }
    }

    #[test]
    fn file_names_keep_to_safe_characters() {
        assert_eq!(file_name_part("a b\"/c.json"), "a_b__c.json");
    }
}
