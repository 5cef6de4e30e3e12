//! The researcher console's home: every study's live figures (waiting per role, rooms, finished,
//! abandoned, screened out, codes, spend against the budget, median duration) pushed as
//! server-sent events, and downloads of every export and the HTML report.
//!
//! | route | access |
//! |---|---|
//! | `GET /researcher` (the overview cards, [`overview_html`], from `researcher::index`) | observer |
//! | `GET /researcher/live`: `text/event-stream`, one `figures` event (an [`Overview`] as JSON) now and at each change | observer |
//! | `GET /researcher/study/{study}/download/{what}`: [`DOWNLOADS`]; `?test=1` keeps test sessions | observer |
//!
//! The figures are computed at most every [`FRESH`] and shared by every console open on the
//! server: a cheap fingerprint (every session's and participant log's last event, the waiting
//! room) is read first, and the figures (which read the payment table, so every event of the
//! studies) are rebuilt only when it changed, or at least every [`MAX_STALE`]. While a console
//! listens, one task per server checks every [`FRESH`] and sends the figures to all of them when
//! they differ. The rebuild runs on a blocking thread. Its cost grows with the events stored:
//! measured in a debug build on a busy two-core machine, 2000 two-person sessions (4000 payment
//! rows) took 0.4–1.1 s for the payment table and 0.6–0.8 s for all the figures, 6000 sessions
//! 1.5–3.4 s and 1.7–4.5 s (`figures_cost_with_many_sessions` in the API tests prints it); a
//! cached answer takes milliseconds.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use wozkit_core::evaluation::EvalTask;
use wozkit_core::event::EndReason;
use wozkit_core::load::LoadedStudy;
use wozkit_data::download::{NamedFile, export_into_memory, zip_files};
use wozkit_data::report::html::render_html;
use wozkit_data::report::questionnaire::Questionnaires;
use wozkit_data::report::{Filter, ReportOptions, build_report};
use wozkit_data::stored::ExportFormat;
use wozkit_store::{SessionFilter, SessionKind, Store, StoreError, TEST_KEY};

use super::html::{esc, path_escape};
use super::researcher::require_page;
use crate::app::{AppState, now_ms};
use crate::auth::Access;
use crate::error::HttpError;
use crate::records::payments::{PaymentRow, payments, write_csv};
use crate::records::{is_test_session, session_log, sessions};

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
    /// The payment table's total.
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

/// Computes every served study's figures from the store and the lobby.
pub async fn compute(app: &AppState) -> Result<Overview, StoreError> {
    let store = app.store.as_ref();
    let served = |id: &str| app.study(Some(id));
    // One pass over the store: every row, test ones too, which also tell the test sessions
    // (a session with a test participant is a test session, as in the exports).
    let all = payments(store, None, &served, true).await?;
    let test_mark = format!("{TEST_KEY}=1");
    let test_sessions: HashSet<&str> = all
        .iter()
        .filter(|r| r.crowd_ids.split(';').any(|kv| kv == test_mark))
        .map(|r| r.session.as_str())
        .collect();
    let mut by_study: HashMap<&str, Vec<&PaymentRow>> = HashMap::new();
    for row in all
        .iter()
        .filter(|r| !test_sessions.contains(r.session.as_str()))
    {
        by_study.entry(row.study.as_str()).or_default().push(row);
    }
    let counts = app.lobby.counts();
    let mut out = Vec::with_capacity(app.studies.len());
    for (id, study) in &app.studies {
        let mut f = StudyFigures {
            study: id.clone(),
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
        };
        for q in counts.iter().filter(|q| q.key.study == *id) {
            f.waiting_users += q.users as u64;
            f.waiting_wizards += q.wizards as u64;
        }
        let mut durations = vec![];
        for record in sessions(store, Some(id)).await? {
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
        let mut spent = 0.0;
        for row in by_study.get(id.as_str()).into_iter().flatten() {
            spent += row.total;
            if !row.completion_code.is_empty() {
                f.codes += 1;
            }
            // Evaluation rows are the participant logs' (their session column is the log).
            if row.judgments.is_some() || row.session.starts_with("log-") {
                match row.status.as_str() {
                    "completed" => {
                        f.finished += 1;
                        if let Some(d) = log_duration(store, &row.session).await? {
                            durations.push(d);
                        }
                    }
                    s if s.starts_with("screened_") => f.screened_out += 1,
                    "abandoned" => f.unfinished += 1,
                    _ => {}
                }
            }
        }
        f.spent = (spent * 100.0).round() / 100.0;
        if let Some(budget) = f.budget.filter(|b| *b > 0.0) {
            f.budget_percent = Some((f.spent / budget * 1000.0).round() / 10.0);
            f.budget_warning = f.spent > budget * WARN_SHARE;
        }
        f.median_duration_s = median(durations).map(|d| (d * 10.0).round() / 10.0);
        if study.study.evaluation.is_some() {
            let items = store.item_counts(id, now_ms()).await?;
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

/// [`compute`] on a blocking thread: it reads every event of the studies (the payment table),
/// which must not hold up the server's async workers.
async fn compute_off_thread(app: &AppState) -> Result<Overview, StoreError> {
    let app = app.clone();
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(compute(&app)))
        .await
        .unwrap_or_else(|e| match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Cancelled: the runtime is shutting down, and the store with it.
            Err(_) => Err(StoreError::Closed),
        })
}

/// Seconds from a participant log's first to its last event.
async fn log_duration(store: &dyn Store, log: &str) -> Result<Option<f64>, StoreError> {
    let events = store.events(log, 0).await?;
    Ok(match (events.first(), events.last()) {
        (Some(a), Some(b)) => Some(b.at_ms.saturating_sub(a.at_ms) as f64 / 1e3),
        _ => None,
    })
}

/// What changes whenever a figure may: every dialogue's and participant log's end and last
/// event, and the waiting room.
async fn fingerprint(app: &AppState) -> Result<Vec<u64>, StoreError> {
    let mut fp = vec![];
    for kind in [SessionKind::Dialogue, SessionKind::Participant] {
        let list = app
            .store
            .list_sessions(&SessionFilter {
                kind,
                ..SessionFilter::default()
            })
            .await?;
        fp.push(list.len() as u64);
        for r in list {
            fp.push(r.last_seq);
            fp.push(r.ended.map_or(0, |e| e.at_ms));
        }
    }
    for q in app.lobby.counts() {
        fp.push(q.users as u64);
        fp.push(q.wizards as u64);
    }
    Ok(fp)
}

/// The figures shared by every console of one server.
struct Hub {
    store: Weak<dyn Store>,
    /// The latest figures; every live stream watches it.
    tx: watch::Sender<Option<Arc<Overview>>>,
    /// The latest figures computed. Held while computing, so that consoles asking at once
    /// share one computation.
    last: tokio::sync::Mutex<Option<Computed>>,
    /// A task checks for changes while someone listens.
    watching: AtomicBool,
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

/// Hubs by server (the address of its store). A server's hub goes when its store does.
static HUBS: Mutex<Vec<(usize, Arc<Hub>)>> = Mutex::new(Vec::new());

fn hub(app: &AppState) -> Arc<Hub> {
    let key = Arc::as_ptr(&app.store).cast::<()>() as usize;
    let mut hubs = HUBS.lock().unwrap_or_else(|p| p.into_inner());
    hubs.retain(|(_, h)| h.store.strong_count() > 0);
    if let Some((_, h)) = hubs.iter().find(|(k, _)| *k == key) {
        return h.clone();
    }
    let h = Arc::new(Hub {
        store: Arc::downgrade(&app.store),
        tx: watch::channel(None).0,
        last: tokio::sync::Mutex::new(None),
        watching: AtomicBool::new(false),
    });
    hubs.push((key, h.clone()));
    h
}

/// The figures, at most [`FRESH`] old; recomputed only when the fingerprint changed. Sends
/// them to the live streams when they differ from the last sent.
pub async fn current(app: &AppState) -> Result<Arc<Overview>, StoreError> {
    let hub = hub(app);
    let mut last = hub.last.lock().await;
    if let Some(c) = last.as_ref()
        && c.at.elapsed() < FRESH
    {
        return Ok(c.overview.clone());
    }
    let fp = fingerprint(app).await?;
    if let Some(c) = last.as_mut()
        && c.fingerprint == fp
        && c.computed.elapsed() < MAX_STALE
    {
        c.at = Instant::now();
        return Ok(c.overview.clone());
    }
    let started = Instant::now();
    let overview = Arc::new(compute_off_thread(app).await?);
    tracing::debug!(
        "console figures computed in {} ms",
        started.elapsed().as_millis()
    );
    *last = Some(Computed {
        at: Instant::now(),
        computed: Instant::now(),
        fingerprint: fp,
        overview: overview.clone(),
    });
    hub.tx.send_if_modified(|sent| {
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
fn watch_changes(app: &AppState, hub: &Arc<Hub>) {
    if hub.watching.swap(true, Ordering::AcqRel) {
        return;
    }
    let app = app.clone();
    let hub = hub.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = app.stopping() => break,
                () = tokio::time::sleep(FRESH) => {}
            }
            if hub.tx.receiver_count() == 0 {
                hub.watching.store(false, Ordering::Release);
                // A console that came meanwhile found the task running: keep it.
                if hub.tx.receiver_count() == 0 || hub.watching.swap(true, Ordering::AcqRel) {
                    break;
                }
            }
            if let Err(e) = current(&app).await {
                tracing::warn!("console figures: {e}");
            }
        }
        hub.watching.store(false, Ordering::Release);
    });
}

fn figures_event(o: &Overview) -> SseEvent {
    SseEvent::default()
        .event("figures")
        .data(serde_json::to_string(o).unwrap_or_else(|_| "{}".into()))
}

/// `GET /researcher/live`: the figures now, then whenever they change.
pub async fn live(State(app): State<AppState>, headers: HeaderMap) -> Result<Response, HttpError> {
    if let Err(res) = require_page(&app, &headers, "/researcher", Access::Observer).await {
        return Ok(res);
    }
    let hub = hub(&app);
    let mut rx = hub.tx.subscribe();
    watch_changes(&app, &hub);
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

fn card(f: &StudyFigures) -> String {
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
    let downloads: String = DOWNLOADS
        .iter()
        .map(|d| {
            format!("<li><a href=\"/researcher/study/{id}/download/{d}\" download>{d}</a></li>")
        })
        .collect();
    format!(
        "<section class=\"study-card\" data-study=\"{study}\"><h2>{title} <code>{study}</code> \
         <span class=\"muted\">{kind}</span></h2><dl class=\"figures\">{figures}</dl>\
         <p class=\"spend{warn}\" data-figure=\"spend\">{spend}</p>\
         <nav class=\"study-links\">{links}</nav>\
         <details><summary>Downloads</summary><ul class=\"downloads\">{downloads}</ul>\
         <p class=\"muted\">Test sessions are left out; add <code>?test=1</code> to a link to keep them.</p></details></section>",
        study = esc(&f.study),
        title = esc(&f.title),
        kind = f.kind,
        warn = if f.budget_warning { " over-budget" } else { "" },
        spend = esc(&spend_text(f)),
    )
}

/// The overview: one card per served study, with its figures as of now. `console.js` keeps them
/// up to date from [`live`].
pub async fn overview_html(app: &AppState) -> Result<String, StoreError> {
    let o = current(app).await?;
    let cards: String = o.studies.iter().map(card).collect();
    Ok(format!(
        "<section id=\"overview\" data-live-url=\"/researcher/live\">\
         <p class=\"muted\" id=\"overview-state\">Figures as of the page's loading.</p>{cards}</section>"
    ))
}

// ----- downloads -----

/// `?test=1` keeps test sessions.
#[derive(Deserialize)]
pub struct DownloadQuery {
    test: Option<String>,
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
) -> Result<Response, DownloadError> {
    let store = app.store.clone();
    let base = file_name_part(&study);
    let err = |e: &dyn std::fmt::Display| DownloadError(format!("{what} of study {study}: {e}"));
    match what.as_str() {
        "report" | "report-json" => {
            let options = ReportOptions {
                filters: vec![Filter {
                    key: "study".into(),
                    value: study.clone(),
                }],
                questionnaires: questionnaires(&app),
                include_test,
                ..ReportOptions::default()
            };
            let report = build_report(store.as_ref(), &options)
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
        "payments" => {
            let served = |id: &str| app.study(Some(id));
            let rows = payments(store.as_ref(), Some(&study), &served, include_test)
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
        "log" => {
            let mut out = vec![];
            for r in sessions(store.as_ref(), Some(&study))
                .await
                .map_err(|e| err(&e))?
            {
                if !include_test
                    && is_test_session(store.as_ref(), &r.id)
                        .await
                        .map_err(|e| err(&e))?
                {
                    continue;
                }
                let log = session_log(store.as_ref(), r).await.map_err(|e| err(&e))?;
                serde_json::to_writer(&mut out, &log).map_err(|e| err(&e))?;
                out.push(b'\n');
            }
            Ok(attachment(
                &format!("{base}.log.jsonl"),
                "application/x-ndjson",
                out,
            ))
        }
        name => {
            let format = ExportFormat::parse(name).ok_or_else(|| err(&"unknown format"))?;
            let files: Vec<NamedFile> =
                export_into_memory(store.as_ref(), format, Some(&study), include_test, &base)
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
    }
}

/// `GET /researcher/study/{study}/download/{what}`: an export of a served study, built on a
/// blocking thread (the exports write and read files, the report computes) so the server keeps
/// serving meanwhile.
pub async fn download(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path((study, what)): Path<(String, String)>,
    Query(q): Query<DownloadQuery>,
) -> Result<Response, HttpError> {
    let next = format!(
        "/researcher/study/{}/download/{}",
        path_escape(&study),
        path_escape(&what)
    );
    if let Err(res) = require_page(&app, &headers, &next, Access::Observer).await {
        return Ok(res);
    }
    if app.study(Some(&study)).is_none() || !DOWNLOADS.contains(&what.as_str()) {
        return Err(HttpError::NotFound);
    }
    let include_test = q.test.as_deref().is_some_and(|t| t == "1" || t == "true");
    let runtime = tokio::runtime::Handle::current();
    let work = tokio::task::spawn_blocking(move || {
        runtime.block_on(build_download(app, study, what, include_test))
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

    #[test]
    fn the_median_is_the_middle_or_the_mean_of_the_two_middles() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn every_export_format_can_be_downloaded() {
        for name in ExportFormat::NAMES {
            assert!(DOWNLOADS.contains(&name), "{name} is not offered");
        }
    }

    #[test]
    fn file_names_keep_to_safe_characters() {
        assert_eq!(file_name_part("a b\"/c.json"), "a_b__c.json");
    }
}
