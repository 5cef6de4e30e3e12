//! The evaluation side of a participant's flow: their own log, the facts page conditions read,
//! items claimed under leases, judgments stored with the lease closed in the same transaction,
//! gold checks, onboarding and screening.
//!
//! A participant's log is a session of kind `participant` with id `log-<participant id>`,
//! opened the first time something is recorded. Everything a flow decides is read back from that
//! log (answers, onboarding result, judgments, gold failures), so a reload, a reconnect or a
//! server restart resumes exactly where the participant was.
//!
//! At start, the dialogues an evaluation selects in the store (`evaluation.from_store`) are read
//! into it, then its items are registered.

use indexmap::IndexMap;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use wozkit_core::evaluation::{Dialogue, Evaluation, StoreSelection, StoreStatus, StoreValue};
use wozkit_core::event::{Actor, Event, EventKind, ItemPool, Role, ScreenReason};
use wozkit_core::expr::{Vars, json_to_cel};
use wozkit_core::load::LoadedStudy;
use wozkit_core::questions::seed_of;
use wozkit_store::{
    ClaimRequest, EvalItem, Lease, NewEvent, NewSession, Participant, ParticipantPatch,
    SessionFilter, SessionKind, SessionStatus, Store, StoreError, new_id,
};

use crate::app::{AppState, now_ms};
use crate::error::{HttpError, StartError};

/// The flow step of a participant who was screened out.
pub const SCREENED: &str = "screened";

/// The id of a participant's own log.
pub fn log_id(p: &Participant) -> String {
    format!("log-{}", p.id)
}

/// Opens the participant's log if needed (its first event names the participant).
pub async fn ensure_log(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
) -> Result<String, HttpError> {
    let id = log_id(p);
    let now = now_ms();
    let record = app
        .store
        .open_participant_log(NewSession {
            id: id.clone(),
            study_id: study.study.id.clone(),
            study_version: study.study.version.clone(),
            seed: seed_of(&p.id),
            created_at_ms: now,
        })
        .await?;
    if record.last_seq == 0 {
        let start = NewEvent {
            actor: actor(p),
            kind: EventKind::ParticipantLogStarted {
                participant: p.id.clone(),
                study: study.study.id.clone(),
                study_version: study.study.version.clone(),
            },
            at_ms: now,
        };
        app.store.append_once(&id, "log-start", vec![start]).await?;
    }
    Ok(id)
}

/// The participant as the actor of their events.
pub fn actor(p: &Participant) -> Actor {
    Actor::Participant {
        role: p.role.unwrap_or(Role::User),
        participant: Some(p.id.clone()),
    }
}

/// Appends events to the participant's log (opening it first).
pub async fn record(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    kinds: Vec<EventKind>,
) -> Result<(), HttpError> {
    let log = ensure_log(app, p, study).await?;
    let at_ms = now_ms();
    let events = kinds
        .into_iter()
        .map(|kind| NewEvent {
            actor: actor(p),
            kind,
            at_ms,
        })
        .collect();
    app.store.append(&log, events).await?;
    Ok(())
}

/// What the participant's log says so far.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// Every answer of every questions page, by question id.
    pub answers: IndexMap<String, Value>,
    /// `"passed"`, `"failed"` or `"none"`.
    pub onboarding: &'static str,
    /// Ordinary items judged.
    pub judged: u32,
    /// Items (of either pool) claimed: the position of the next one.
    pub claimed: u32,
    pub gold_failures: u32,
    /// Pages answered, by page id.
    pub pages: Vec<String>,
}

/// Reads the participant's log (empty when there is none yet).
pub async fn facts(app: &AppState, p: &Participant) -> Result<Facts, StoreError> {
    let events = app.store.events(&log_id(p), 0).await?;
    Ok(facts_of(&events))
}

pub fn facts_of(events: &[Event]) -> Facts {
    let mut f = Facts {
        onboarding: "none",
        ..Facts::default()
    };
    for e in events {
        match &e.kind {
            EventKind::PageAnswered { page, answers } => {
                f.answers
                    .extend(answers.iter().map(|(k, v)| (k.clone(), v.clone())));
                f.pages.push(page.clone());
            }
            EventKind::OnboardingDone { passed, .. } => {
                f.onboarding = if *passed { "passed" } else { "failed" };
            }
            EventKind::ItemClaimed { .. } => f.claimed += 1,
            EventKind::Judged(j) => {
                if j.pool == ItemPool::Item {
                    f.judged += 1;
                }
                if j.gold_correct == Some(false) {
                    f.gold_failures += 1;
                }
            }
            _ => {}
        }
    }
    f
}

/// The variables of a page's `when`.
pub fn vars(p: &Participant, f: &Facts) -> Vars<'static> {
    let mut vars = Vars::default();
    let answers: serde_json::Map<String, Value> = f
        .answers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    vars.set("answers", json_to_cel(&Value::Object(answers)));
    vars.set(
        "platform",
        json_to_cel(&Value::String(p.platform.as_str().into())),
    );
    let params: serde_json::Map<String, Value> = p
        .external_ids
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    vars.set("params", json_to_cel(&Value::Object(params)));
    vars.set(
        "onboarding",
        json_to_cel(&Value::String(f.onboarding.into())),
    );
    vars.set("judged", json_to_cel(&Value::from(f.judged)));
    vars.set("test", json_to_cel(&Value::Bool(p.is_test())));
    vars
}

/// Appends the dialogues of `evaluation.from_store` to the study's evaluation (run at start,
/// before [`register_items`]), so that pairing, items, judging pages and exports treat them like
/// dialogues written in the study. Each selected session becomes a dialogue whose id is its id
/// in the store, so item ids stay the same from one start to the next. A session with no
/// message (or without the annotation its `system` or `scenario` is read from) is skipped with
/// a warning; a selection that gives no dialogue, an id given twice, an item naming an unknown
/// dialogue or an evaluation left with no item stop the start.
pub async fn load_stored_dialogues(
    store: &dyn Store,
    study: &mut LoadedStudy,
) -> Result<(), StartError> {
    let study_id = study.study.id.clone();
    let Some(ev) = study.study.evaluation.as_mut() else {
        return Ok(());
    };
    let fail = |message: String| StartError::Evaluation {
        study: study_id.clone(),
        message,
    };
    for selection in ev.store_selections().to_vec() {
        let found = stored_dialogues(store, &selection).await?;
        if found.is_empty() {
            return Err(fail(format!(
                "`evaluation.from_store` selects no dialogue: no {}session of study `{}` in \
                 the store has messages{}{}; import the dataset (`wozkit import`) into this data \
                 directory or fix the filter",
                match selection.status {
                    StoreStatus::Ended => "ended ",
                    StoreStatus::Any => "",
                },
                selection.study,
                described(" and a `system`", selection.system.as_ref()),
                described(" and a `scenario`", selection.scenario.as_ref()),
            )));
        }
        tracing::info!(
            study = study_id,
            store_study = selection.study,
            dialogues = found.len(),
            "evaluation dialogues read from the store"
        );
        for d in found {
            if ev.dialogue(&d.id).is_some() {
                return Err(fail(format!(
                    "dialogue `{}` is given twice (by the study and `from_store`, or by two \
                     selections); each dialogue may be taken once",
                    d.id
                )));
            }
            ev.dialogues.push(d);
        }
    }
    if ev.from_store.is_none() {
        return Ok(());
    }
    let unknown = ev.unknown_dialogues();
    if !unknown.is_empty() {
        return Err(fail(format!(
            "the evaluation names dialogues that neither the study nor the store has: {}",
            unknown.join(", ")
        )));
    }
    if !ev.items().iter().any(|i| i.pool == ItemPool::Item) {
        return Err(fail(
            "the evaluation has no items to judge with the stored dialogues (a comparison \
             needs two systems whose dialogues match by `pairs.match_by`)"
                .into(),
        ));
    }
    Ok(())
}

/// The dialogues one selection gives, in the order the store lists the sessions (creation time,
/// then id): ended sessions (or all but unfinished imports), test sessions left out.
async fn stored_dialogues(
    store: &dyn Store,
    selection: &StoreSelection,
) -> Result<Vec<Dialogue>, StoreError> {
    let filter = SessionFilter {
        study_id: Some(selection.study.clone()),
        kind: SessionKind::Dialogue,
        status: match selection.status {
            StoreStatus::Ended => Some(SessionStatus::Ended),
            StoreStatus::Any => None,
        },
        ..SessionFilter::default()
    };
    let limit = selection.limit.map_or(usize::MAX, |n| n as usize);
    let mut out = Vec::new();
    for session in store.list_sessions(&filter).await? {
        if out.len() >= limit {
            break;
        }
        // An import is ended once all its sessions are written; until then they are invisible.
        let imported = session.study_id.starts_with(IMPORT_STUDY_PREFIX);
        if imported && session.is_live() {
            continue;
        }
        if !imported && is_test_session(store, &session.id).await? {
            continue;
        }
        let events = store.events(&session.id, 0).await?;
        if let Some(d) = stored_dialogue(selection, &session.id, &events) {
            out.push(d);
        }
    }
    Ok(out)
}

/// ` and a `system` {annotation: …}` for a value read from the sessions, nothing otherwise.
fn described(what: &str, value: Option<&StoreValue>) -> String {
    match value {
        Some(v @ StoreValue::Field { .. }) => format!("{what} {v}"),
        _ => String::new(),
    }
}

/// The study prefix of sessions written by `wozkit import` (`import:<format>`).
const IMPORT_STUDY_PREFIX: &str = "import:";

/// Whether a live study's session had a test participant (`/try`, a link with `test=1`).
async fn is_test_session(store: &dyn Store, session: &str) -> Result<bool, StoreError> {
    let people = store.participants_in_session(session).await?;
    Ok(people.iter().any(Participant::is_test))
}

/// One stored session as a dialogue, or `None` (with a warning) when it cannot be one.
fn stored_dialogue(selection: &StoreSelection, id: &str, events: &[Event]) -> Option<Dialogue> {
    let skip = |why: String| {
        tracing::warn!(
            session = id,
            store_study = selection.study,
            "{why}; not judged"
        );
        None
    };
    let system = match &selection.system {
        None => selection.study.clone(),
        Some(value) => match value.of(events) {
            Some(system) => system,
            None => return skip(format!("the session has no `system` {value}")),
        },
    };
    let scenario = match &selection.scenario {
        None => None,
        Some(value) => match value.of(events) {
            Some(scenario) => Some(scenario),
            None => return skip(format!("the session has no `scenario` {value}")),
        },
    };
    match Dialogue::from_events(id, system, scenario, events) {
        Some(d) => Some(d),
        None => skip("the session has no messages".into()),
    }
}

/// Registers every study's items with the store (idempotent; run at start).
pub async fn register_items(store: &dyn Store, study: &LoadedStudy) -> Result<(), StoreError> {
    let Some(ev) = &study.study.evaluation else {
        return Ok(());
    };
    let items: Vec<EvalItem> = ev
        .items()
        .into_iter()
        .map(|i| EvalItem {
            id: i.id,
            pool: i.pool,
            dialogues: i.dialogues,
            needed: ev.judgments_per_item,
        })
        .collect();
    store.register_items(&study.study.id, &items).await
}

/// Whether the worker is on the study's blocklist or the server's, or was blocked in a review
/// (of any study).
pub fn blocked(app: &AppState, study: &LoadedStudy, worker: Option<&str>) -> bool {
    let Some(worker) = worker else {
        return false;
    };
    let listed = study
        .study
        .evaluation
        .as_ref()
        .is_some_and(|ev| ev.blocklist.iter().any(|w| w == worker));
    listed || app.tunables.blocklist.contains(worker) || app.review.is_blocked(worker)
}

/// Whether the `position`-th item of a worker is an attention check: drawn from the worker's
/// seed, so the same on every reload, and about `rate` of all positions.
pub fn gold_turn(ev: &Evaluation, p: &Participant, position: u32) -> bool {
    let Some(gold) = &ev.gold else {
        return false;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed_of(&format!("{}/gold/{position}", p.id)));
    rng.random::<f64>() < gold.rate
}

/// The item on the participant's page: their open lease, or a new claim (logged), or `None`
/// when no item is left for them (or they judged their share).
pub async fn current_item(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    ev: &Evaluation,
    page: &str,
    f: &Facts,
) -> Result<Option<Lease>, HttpError> {
    if let Some(lease) = app.store.open_lease(&study.study.id, &p.id).await? {
        return Ok(Some(lease));
    }
    if f.judged >= ev.items_per_worker {
        return Ok(None);
    }
    let now = now_ms();
    let prefer = preferred_items(app, study, ev).await?;
    let request = |pool| ClaimRequest {
        study_id: study.study.id.clone(),
        worker: p.id.clone(),
        pool,
        lease_id: new_id(),
        now_ms: now,
        lease_ms: u64::from(ev.lease_s) * 1000,
        max_per_worker: Some(ev.items_per_worker),
        prefer: prefer.clone(),
    };
    let mut lease = None;
    if gold_turn(ev, p, f.claimed) {
        lease = app.store.claim(request(ItemPool::Gold)).await?;
    }
    if lease.is_none() {
        lease = app.store.claim(request(ItemPool::Item)).await?;
    }
    let Some(lease) = lease else {
        return Ok(None);
    };
    // A conversation's "dialogues" are its sessions, opened before the claim is logged.
    let (shown, systems) = if ev.task.is_live() {
        let sides = crate::chat::sides(ev, &lease);
        crate::chat::open_sessions(app, study, p, page, &lease, &sides).await?;
        sides.into_iter().map(|s| (s.session, s.system)).unzip()
    } else {
        let shown = shown_order(&lease);
        let systems = shown.iter().map(|d| ev.system_of(d)).collect();
        (shown, systems)
    };
    record(
        app,
        p,
        study,
        vec![EventKind::ItemClaimed {
            page: page.to_string(),
            item: lease.item_id.clone(),
            lease: lease.id.clone(),
            systems,
            dialogues: shown,
            pool: lease.pool,
            claimed_at_ms: lease.claimed_at_ms,
            expires_at_ms: lease.expires_at_ms,
        }],
    )
    .await?;
    Ok(Some(lease))
}

/// The items a claim should give first: for an arena scheduled `uncertain`, every pair ordered
/// by how uncertain its outcome is after the counted battles so far (most uncertain first, ties
/// in the study's order); nothing otherwise (the store then gives the least judged item).
async fn preferred_items(
    app: &AppState,
    study: &LoadedStudy,
    ev: &Evaluation,
) -> Result<Vec<String>, HttpError> {
    use wozkit_core::evaluation::{EvalTask, Schedule, pair_uncertainty};
    if ev.task != EvalTask::Arena || ev.schedule != Schedule::Uncertain {
        return Ok(vec![]);
    }
    let board = crate::http::leaderboard::board(app, study).await?;
    let mut pairs: Vec<(f64, usize, String)> = ev
        .system_pairs()
        .into_iter()
        .enumerate()
        .map(|(i, (a, b))| {
            let (wins, losses, ties) = board
                .grid
                .iter()
                .find_map(|g| {
                    if g.a == a && g.b == b {
                        Some((g.a_wins, g.b_wins, g.ties))
                    } else if g.a == b && g.b == a {
                        Some((g.b_wins, g.a_wins, g.ties))
                    } else {
                        None
                    }
                })
                .unwrap_or((0, 0, 0));
            (pair_uncertainty(wins, losses, ties), i, format!("{a}~{b}"))
        })
        .collect();
    pairs.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
    Ok(pairs.into_iter().map(|(_, _, id)| id).collect())
}

/// The lease's dialogues in the order shown: a pair's sides are swapped for half the leases
/// (decided by the lease id, so every reload shows the same sides).
pub fn shown_order(lease: &Lease) -> Vec<String> {
    let mut d = lease.dialogues.clone();
    if d.len() == 2 && seed_of(&lease.id) & 1 == 1 {
        d.swap(0, 1);
    }
    d
}

/// Screens the participant out: logged, and the flow ends on the screened page.
pub async fn screen_out(
    app: &AppState,
    p: &Participant,
    study: &LoadedStudy,
    reason: ScreenReason,
) -> Result<(), HttpError> {
    record(app, p, study, vec![EventKind::ScreenedOut { reason }]).await?;
    let patch = ParticipantPatch {
        flow_step: Some(format!("{SCREENED}:{}", reason_name(reason))),
        ..ParticipantPatch::default()
    };
    app.store.update_participant(&p.id, patch).await?;
    tracing::info!(
        participant = p.id,
        reason = reason_name(reason),
        "screened out"
    );
    Ok(())
}

pub fn reason_name(reason: ScreenReason) -> &'static str {
    match reason {
        ScreenReason::Onboarding => "onboarding",
        ScreenReason::Gold => "gold",
        ScreenReason::Blocklist => "blocklist",
    }
}

/// The reason in a screened flow step.
pub fn screened_reason(flow_step: &str) -> Option<ScreenReason> {
    match flow_step.strip_prefix(SCREENED)?.trim_start_matches(':') {
        "gold" => Some(ScreenReason::Gold),
        "blocklist" => Some(ScreenReason::Blocklist),
        _ => Some(ScreenReason::Onboarding),
    }
}
