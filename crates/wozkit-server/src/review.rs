//! Reviewing a study's participants: the decisions researchers take (approve, reject, bonus,
//! block, note), the flags that help take them, and sending them to the crowd platforms.
//!
//! **The review log.** Every decision is an [`EventKind::Reviewed`] event appended to the
//! study's review log: a log of kind `participant` whose id is `review-<study>` (see
//! [`log_id`]), created with the first decision. Participant logs of evaluation flows are
//! `log-<participant>`, so nothing that reads those mistakes a review log for one, and dialogue
//! exports (which list dialogue sessions) leave it out; exporting the log itself shows every
//! decision with who took it and when.
//!
//! **What counts** (see [`fold`]), per participant, in log order:
//! - the decision is the last `approve` or `reject`; a later one supersedes an earlier one;
//! - the bonus is the last `bonus` amount (a bonus of 0 takes an earlier one back);
//! - a `block` keeps the worker out of every study of this server from then on (the set of
//!   blocked workers is rebuilt from every review log at start);
//! - notes accumulate; every event stays in the row's history.
//!
//! **Sending** ([`send`]). For each participant with a crowd platform client for their study
//! and platform: the decision, if none was sent yet (a platform takes one decision per
//! submission, so a decision changed after sending is not sent again); the part of the bonus
//! not paid yet (so what the platform paid in all equals the payment table's `review_bonus`, to
//! the cent; a raise is sent with its reason followed by what it was raised from and to), one
//! payment per participant; the block, once. Decisions and bonuses go through payment records
//! (see [`send`]'s module): each is sent by one caller at a time and an uncertain answer is
//! settled by asking the platform before anything is sent again. Each outcome is logged as a
//! `sent` or `send_failed` event naming the decision's sequence number (and the record), so
//! nothing is sent twice and a failure is sent again on the next press. A decision the
//! platform's API cannot take at all (a block on Prolific) is logged once as `not_sendable`,
//! with where the researcher does it instead, and never sent again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, RwLock};

use wozkit_core::event::{Actor, Event, EventKind, ReviewAction, ReviewDecision, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_store::{NewEvent, NewSession, Store, StoreError};

use crate::app::{AppState, now_ms};
use wozkit_data::records::payments::{PaymentRow, payments};

pub use wozkit_data::records::review_log::{LOG_PREFIX, Reviewed, fold, log_id, read, review_logs};

/// What the server keeps of the reviews: the workers blocked by a review (any study), and the
/// lock that keeps review writes and platform sends one at a time.
#[derive(Default)]
pub struct ReviewState {
    blocked: RwLock<HashSet<String>>,
    pub(crate) lock: tokio::sync::Mutex<()>,
}

impl ReviewState {
    /// Rebuilds the blocked workers from every review log in the store.
    pub async fn load(store: &dyn Store) -> Result<ReviewState, StoreError> {
        let mut blocked = HashSet::new();
        for (id, _) in review_logs(store).await? {
            for e in store.events(&id, 0).await? {
                if let EventKind::Reviewed(d) = &e.kind
                    && d.action == ReviewAction::Block
                    && let Some(w) = &d.worker
                {
                    blocked.insert(w.clone());
                }
            }
        }
        Ok(ReviewState {
            blocked: RwLock::new(blocked),
            lock: Default::default(),
        })
    }

    /// Whether a review blocked this worker id.
    pub fn is_blocked(&self, worker: &str) -> bool {
        self.blocked
            .read()
            .map(|b| b.contains(worker))
            .unwrap_or(false)
    }

    fn block(&self, worker: &str) {
        if let Ok(mut b) = self.blocked.write() {
            b.insert(worker.to_string());
        }
    }
}

/// Appends decisions to the study's review log (creating it first if needed) and applies
/// blocks at once. The caller holds [`ReviewState::lock`].
pub(crate) async fn append(
    app: &AppState,
    study: &LoadedStudy,
    decisions: Vec<ReviewDecision>,
) -> Result<Vec<Event>, StoreError> {
    if decisions.is_empty() {
        return Ok(vec![]);
    }
    let id = log_id(&study.study.id);
    if app.store.session(&id).await?.is_none() {
        app.store
            .open_participant_log(NewSession {
                id: id.clone(),
                study_id: study.study.id.clone(),
                study_version: study.study.version.clone(),
                seed: 0,
                created_at_ms: now_ms(),
            })
            .await?;
    }
    let at_ms = now_ms();
    for d in &decisions {
        if d.action == ReviewAction::Block
            && let Some(w) = &d.worker
        {
            app.review.block(w);
        }
    }
    app.store
        .append(
            &id,
            decisions
                .into_iter()
                .map(|d| NewEvent {
                    actor: Actor::System,
                    kind: EventKind::Reviewed(Box::new(d)),
                    at_ms,
                })
                .collect(),
        )
        .await
}

/// Limits of the flags; the review page's query can change each.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    /// A duration is an outlier beyond median ± `k` × MAD (the MAD scaled to a standard
    /// deviation, × 1.4826).
    pub k: f64,
    /// A silence this long (milliseconds) of either side of a dialogue is flagged.
    pub idle_ms: u64,
    /// An evaluation participant with attention checks answered right below this share failed
    /// gold (as does anyone screened out on gold).
    pub gold_bar: f64,
    /// Judge durations by the 5th and 95th percentiles instead of the MAD (also used whenever
    /// the MAD is 0, most having taken the same time).
    pub percentiles: bool,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            k: 3.0,
            idle_ms: 120_000,
            gold_bar: 0.8,
            percentiles: false,
        }
    }
}

/// Which side of the typical duration an outlier is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outlier {
    Fast,
    Slow,
}

/// Why a participant may need a closer look.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flags {
    /// Failed gold, and why.
    pub failed_gold: Option<String>,
    /// A time outlier, which side, and why.
    pub time: Option<(Outlier, String)>,
    /// The partner sent nothing for a long stretch, and when.
    pub idle_partner: Option<String>,
    /// The participant's own long silence.
    pub own_silence: Option<String>,
    /// Disconnects of the participant's role.
    pub disconnects: u32,
    /// When a researcher took over the participant's seat (empty when nobody did). Not a flag
    /// of its own: what the participant did is judged up to then.
    pub taken_over: String,
}

impl Flags {
    /// The flag names that apply: `gold`, `time`, `idle`, `disconnect`.
    pub fn names(&self) -> Vec<&'static str> {
        let mut out = vec![];
        if self.failed_gold.is_some() {
            out.push("gold");
        }
        if self.time.is_some() {
            out.push("time");
        }
        if self.idle_partner.is_some() || self.own_silence.is_some() {
            out.push("idle");
        }
        if self.disconnects > 0 {
            out.push("disconnect");
        }
        out
    }
}

/// One participant on the review page.
#[derive(Clone, Debug)]
pub struct ReviewRow {
    /// The participant's payment row (status, amounts, decision and review bonus).
    pub pay: PaymentRow,
    /// Answers: `(page or survey, question, answer)`.
    pub answers: Vec<(String, String, String)>,
    /// How long the participant took (the session, or entry to code for an evaluation).
    pub duration_ms: Option<u64>,
    pub flags: Flags,
    pub review: Reviewed,
}

/// The review rows of a study's participants (test participants only with `include_test`).
pub async fn rows(
    app: &AppState,
    study: &Arc<LoadedStudy>,
    include_test: bool,
    limits: Thresholds,
) -> Result<Vec<ReviewRow>, StoreError> {
    let store = app.store.as_ref();
    let study_id = study.study.id.clone();
    let pays = payments(
        store,
        Some(&study_id),
        &|id| (id == study_id).then(|| study.clone()),
        include_test,
    )
    .await?;
    let reviews = read(store, &study_id).await?;
    let mut cache: HashMap<String, Arc<Vec<Event>>> = HashMap::new();
    let mut out = Vec::with_capacity(pays.len());
    for pay in pays {
        let events = match cache.get(&pay.session) {
            Some(e) => e.clone(),
            None => {
                let e = Arc::new(store.events(&pay.session, 0).await?);
                cache.insert(pay.session.clone(), e.clone());
                e
            }
        };
        let created = store
            .participant(&pay.participant)
            .await?
            .map(|p| p.created_at_ms);
        let role = Role::parse(&pay.role);
        let evaluation = pay.judgments.is_some();
        let (answers, duration_ms, mut flags) = if evaluation {
            evaluation_facts(&events, created, &pay, limits)
        } else {
            dialogue_facts(&events, role, &pay.participant, limits)
        };
        if pay.status != "completed" {
            flags.time = None;
        }
        let review = reviews.get(&pay.participant).cloned().unwrap_or_default();
        out.push(ReviewRow {
            pay,
            answers,
            duration_ms,
            flags,
            review,
        });
    }
    time_outliers(&mut out, limits.k, limits.percentiles);
    Ok(out)
}

type Facts = (Vec<(String, String, String)>, Option<u64>, Flags);

fn answer_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Answers, duration, idle stretches and disconnects of `participant`, who played `role` in a
/// dialogue.
///
/// A seat taken over ([`EventKind::TakenOver`]) belongs from then on to the participant who
/// took it: what the role did afterwards (messages, answers, disconnects) is theirs, and the
/// participant who left is judged on what they did before (their duration and own silence end
/// when they left: their last disconnect before the takeover, else the takeover; their
/// partner is judged over the same stretch). A later takeover naming `participant` gives the
/// seat back.
fn dialogue_facts(
    events: &[Event],
    role: Option<Role>,
    participant: &str,
    limits: Thresholds,
) -> Facts {
    let mut answers = vec![];
    let mut flags = Flags::default();
    let (start, end) = log_span(events);
    // Whether `participant` holds the seat of `role` at this point of the log; since when they
    // have been disconnected (while holding it); and when they left it, if they did not get it
    // back: their last disconnect before the takeover, else the takeover.
    let mut seated = true;
    let mut gone_since: Option<u64> = None;
    let mut left_at: Option<u64> = None;
    let mut said: HashMap<Role, Vec<u64>> = HashMap::new();
    let into = |at: u64| minutes(start.map_or(0, |s| at.saturating_sub(s)));
    for e in events {
        match &e.kind {
            EventKind::TakenOver {
                role: r,
                participant: by,
                ..
            } if Some(*r) == role => {
                let now = by == participant;
                if seated && !now {
                    let left = gone_since.unwrap_or(e.at_ms);
                    left_at = Some(left);
                    note_takeover(&mut flags.taken_over, &into(left), &into(e.at_ms));
                } else if now {
                    left_at = None;
                }
                gone_since = None;
                seated = now;
            }
            // What the role did while someone else held the seat is not this participant's.
            EventKind::SurveyAnswered { role: r, .. }
            | EventKind::Disconnected { role: r, .. }
            | EventKind::Reconnected { role: r }
            | EventKind::Message { role: r, .. }
                if Some(*r) == role && !seated => {}
            EventKind::Reconnected { role: r } if Some(*r) == role => gone_since = None,
            EventKind::SurveyAnswered {
                role: r,
                answers: a,
            } if Some(*r) == role => {
                for (k, v) in a {
                    answers.push(("survey".into(), k.clone(), answer_text(v)));
                }
            }
            EventKind::Disconnected { role: r, .. } if Some(*r) == role => {
                flags.disconnects += 1;
                gone_since = Some(e.at_ms);
            }
            EventKind::Message { role: r, .. } if end.is_none_or(|end| e.at_ms <= end) => {
                said.entry(*r).or_default().push(e.at_ms)
            }
            _ => {}
        }
    }
    // The participant's stretch: to the end, or to when they left if they never got the seat
    // back.
    let end = match (end, left_at) {
        (Some(end), Some(left)) => Some(left.min(end)),
        (end, _) => end,
    };
    let duration = start.zip(end).map(|(s, e)| e.saturating_sub(s));
    if let (Some(role), Some(start), Some(end)) = (role, start, end) {
        flag_silences(&mut flags, role, (start, end), &said, limits);
    }
    (answers, duration, flags)
}

/// When a session's log starts and ends: its start and end events, else its first and last
/// events.
fn log_span(events: &[Event]) -> (Option<u64>, Option<u64>) {
    let start = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::SessionStarted { .. }))
        .or(events.first())
        .map(|e| e.at_ms);
    let end = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::SessionEnded { .. }))
        .or(events.last())
        .map(|e| e.at_ms);
    (start, end)
}

/// Adds to `taken_over` that the participant left the seat `left` into the session and a
/// researcher took it over `at`.
fn note_takeover(taken_over: &mut String, left: &str, at: &str) {
    let _ = write!(
        taken_over,
        "{}left the seat {} into the session; a researcher took it over at {}",
        if taken_over.is_empty() { "" } else { "; " },
        left,
        at
    );
}

/// Flags the longest stretches without a message, the partner's and the participant's own
/// (who played `role`), over the participant's stretch `(start, end)` where they reach the
/// idle limit.
fn flag_silences(
    flags: &mut Flags,
    role: Role,
    (start, end): (u64, u64),
    said: &HashMap<Role, Vec<u64>>,
    limits: Thresholds,
) {
    let longest = |r: Role| -> (u64, u64) {
        let mut points = vec![start];
        points.extend(
            said.get(&r)
                .into_iter()
                .flatten()
                .copied()
                .filter(|t| *t <= end),
        );
        points.push(end);
        points
            .windows(2)
            .map(|w| (w[1].saturating_sub(w[0]), w[0].saturating_sub(start)))
            .max_by_key(|(gap, _)| *gap)
            .unwrap_or((0, 0))
    };
    let say = |who: &str, (gap, from): (u64, u64)| {
        format!(
            "{who} sent nothing for {} (from {} into the session; limit {})",
            minutes(gap),
            minutes(from),
            minutes(limits.idle_ms)
        )
    };
    let partner = longest(role.other());
    if partner.0 >= limits.idle_ms {
        flags.idle_partner = Some(say(
            &format!("the partner ({})", role.other().as_str()),
            partner,
        ));
    }
    let own = longest(role);
    if own.0 >= limits.idle_ms {
        flags.own_silence = Some(say("the participant", own));
    }
}

/// Answers, duration and gold of an evaluation participant (their own log).
fn evaluation_facts(
    events: &[Event],
    created: Option<u64>,
    pay: &PaymentRow,
    limits: Thresholds,
) -> Facts {
    let mut answers = vec![];
    let mut flags = Flags::default();
    let mut end = None;
    for e in events {
        match &e.kind {
            EventKind::PageAnswered { page, answers: a } => {
                for (k, v) in a {
                    answers.push((page.clone(), k.clone(), answer_text(v)));
                }
            }
            EventKind::OnboardingDone { answers: a, .. } => {
                for (k, v) in a {
                    answers.push(("onboarding".into(), k.clone(), answer_text(v)));
                }
            }
            EventKind::CompletionIssued { .. } | EventKind::ScreenedOut { .. } if end.is_none() => {
                end = Some(e.at_ms)
            }
            _ => {}
        }
    }
    let end = end.or(events.last().map(|e| e.at_ms));
    let duration = created.zip(end).map(|(s, e)| e.saturating_sub(s));
    if pay.status == "screened_gold" {
        flags.failed_gold = Some("screened out on attention checks".into());
    } else if let Some(acc) = pay.gold_accuracy
        && acc < limits.gold_bar
    {
        flags.failed_gold = Some(format!(
            "attention checks {:.0}% right, below the bar of {:.0}%",
            acc * 100.0,
            limits.gold_bar * 100.0
        ));
    }
    (answers, duration, flags)
}

/// `m:ss` of milliseconds.
pub fn minutes(ms: u64) -> String {
    let s = ms / 1000;
    format!("{}:{:02} min", s / 60, s % 60)
}

fn median(sorted: &[u64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2] as f64
    } else {
        (sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2.0
    }
}

/// Flags the completed rows whose duration is beyond median ± k × MAD (scaled by 1.4826)
/// among the completed rows of the same kind and role; with `percentiles`, or when the MAD is
/// 0 (most took the same time), beyond the 5th or 95th percentile (interpolated). Groups of
/// fewer than 4 are not judged.
fn time_outliers(rows: &mut [ReviewRow], k: f64, percentiles: bool) {
    let mut groups: BTreeMap<(bool, String), Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if r.pay.status == "completed" && r.duration_ms.is_some() {
            groups
                .entry((r.pay.judgments.is_some(), r.pay.role.clone()))
                .or_default()
                .push(i);
        }
    }
    for idx in groups.values() {
        if idx.len() < 4 {
            continue;
        }
        let mut d: Vec<u64> = idx.iter().filter_map(|&i| rows[i].duration_ms).collect();
        d.sort_unstable();
        let med = median(&d);
        let mut dev: Vec<u64> = d.iter().map(|&x| (x as f64 - med).abs() as u64).collect();
        dev.sort_unstable();
        let mad = median(&dev) * 1.4826;
        // Percentiles interpolated between the closest ranks.
        let pct = |p: f64| {
            let at = p * (d.len() - 1) as f64;
            let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
            d[lo] as f64 + (d[hi] as f64 - d[lo] as f64) * (at - lo as f64)
        };
        let (p5, p95) = (pct(0.05), pct(0.95));
        let percentiles = percentiles || mad == 0.0;
        let why_pct = if mad == 0.0 {
            "MAD is 0"
        } else {
            "percentile rule"
        };
        for &i in idx {
            let Some(x) = rows[i].duration_ms else {
                continue;
            };
            let why = if !percentiles {
                mad_outlier(x, med, mad, k)
            } else {
                percentile_outlier(x, p5, p95, why_pct)
            };
            rows[i].flags.time = why;
        }
    }
}

/// Whether duration `x` is beyond median `med` ± `k` × `mad`, which way, and why.
fn mad_outlier(x: u64, med: f64, mad: f64, k: f64) -> Option<(Outlier, String)> {
    let xf = x as f64;
    let (lo, hi) = (med - k * mad, med + k * mad);
    if xf > hi {
        Some((
            Outlier::Slow,
            format!(
                "took {}, above median {} + {k}×MAD {} = {}",
                minutes(x),
                minutes(med as u64),
                minutes(mad as u64),
                minutes(hi as u64)
            ),
        ))
    } else if xf < lo {
        Some((
            Outlier::Fast,
            format!(
                "took {}, below median {} − {k}×MAD {} = {}",
                minutes(x),
                minutes(med as u64),
                minutes(mad as u64),
                minutes(lo.max(0.0) as u64)
            ),
        ))
    } else {
        None
    }
}

/// Whether duration `x` is beyond the 5th (`p5`) or 95th (`p95`) percentile, which way, and
/// why (`why_pct`: why the percentiles are the rule).
fn percentile_outlier(x: u64, p5: f64, p95: f64, why_pct: &str) -> Option<(Outlier, String)> {
    let xf = x as f64;
    if xf > p95 {
        Some((
            Outlier::Slow,
            format!(
                "took {}, above the 95th percentile {} ({why_pct})",
                minutes(x),
                minutes(p95 as u64)
            ),
        ))
    } else if xf < p5 {
        Some((
            Outlier::Fast,
            format!(
                "took {}, below the 5th percentile {} ({why_pct})",
                minutes(x),
                minutes(p5 as u64)
            ),
        ))
    } else {
        None
    }
}

/// Which rows a bulk action or the page shows.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// `gold`, `time`, `idle`, `disconnect`, `any` (some flag) or `none` (no flag).
    pub flag: Option<String>,
    /// The payment status (`completed`, `incomplete`, ...).
    pub status: Option<String>,
    /// `approve`, `reject`, `none` (undecided), `bonus` (with a bonus) or `blocked`.
    pub decision: Option<String>,
}

impl Filter {
    /// Whether the row passes the filter.
    pub fn matches(&self, r: &ReviewRow) -> bool {
        let names = r.flags.names();
        let flag_ok = match self.flag.as_deref() {
            None | Some("") => true,
            Some("any") => !names.is_empty(),
            Some("none") => names.is_empty(),
            Some(f) => names.contains(&f),
        };
        let status_ok = self
            .status
            .as_deref()
            .is_none_or(|s| s.is_empty() || s == r.pay.status);
        let decision_ok = match self.decision.as_deref() {
            None | Some("") => true,
            Some("none") => r.review.decision.is_none(),
            Some("bonus") => r.review.bonus.is_some(),
            Some("blocked") => r.review.blocked.is_some(),
            Some(d) => r.review.decision_str() == d,
        };
        flag_ok && status_ok && decision_ok
    }
}

pub mod send;

pub use send::{SendReport, send};

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: &str, gold_accuracy: Option<f64>) -> PaymentRow {
        PaymentRow {
            participant: "p".into(),
            platform: "prolific".into(),
            crowd_ids: String::new(),
            worker_id: "W".into(),
            study: "s".into(),
            session: "log-p".into(),
            role: "user".into(),
            status: status.into(),
            completion_code: String::new(),
            judgments: Some(3),
            surplus: Some(0),
            surplus_paid: Some(false),
            items_paid: Some(3),
            gold_accuracy,
            currency: "GBP".into(),
            base: 0.0,
            minutes: 0.0,
            bonus: 0.0,
            total: 0.0,
            decision: String::new(),
            review_bonus: 0.0,
            total_with_bonus: 0.0,
        }
    }

    fn timed(durations_s: &[u64]) -> Vec<ReviewRow> {
        durations_s
            .iter()
            .map(|s| ReviewRow {
                pay: row("completed", None),
                answers: vec![],
                duration_ms: Some(s * 1000),
                flags: Flags::default(),
                review: Reviewed::default(),
            })
            .collect()
    }

    fn sides(rows: &[ReviewRow]) -> Vec<Option<Outlier>> {
        rows.iter()
            .map(|r| r.flags.time.as_ref().map(|t| t.0))
            .collect()
    }

    #[test]
    fn durations_beyond_k_mads_are_outliers() {
        let mut rows = timed(&[300, 310, 290, 305, 295, 1800, 30]);
        time_outliers(&mut rows, 3.0, false);
        let s = sides(&rows);
        assert_eq!(s[..5], [None; 5]);
        assert_eq!(s[5], Some(Outlier::Slow));
        assert_eq!(s[6], Some(Outlier::Fast));
        let why = &rows[5].flags.time.as_ref().expect("slow").1;
        assert!(
            why.contains("median 5:00 min") && why.contains("3×MAD"),
            "{why}"
        );
        // A loose k flags none.
        let mut rows = timed(&[300, 310, 290, 305, 295, 330]);
        time_outliers(&mut rows, 100.0, false);
        assert_eq!(sides(&rows), vec![None; 6]);
        // Fewer than four are not judged.
        let mut rows = timed(&[300, 300, 3000]);
        time_outliers(&mut rows, 3.0, false);
        assert_eq!(sides(&rows), vec![None; 3]);
    }

    #[test]
    fn without_spread_the_percentiles_decide_and_say_so() {
        let mut rows = timed(&[300, 300, 300, 300, 300, 900]);
        time_outliers(&mut rows, 3.0, false);
        assert_eq!(sides(&rows)[5], Some(Outlier::Slow));
        assert_eq!(sides(&rows)[..5], [None; 5]);
        let why = &rows[5].flags.time.as_ref().expect("slow").1;
        assert!(
            why.contains("95th percentile") && why.contains("MAD is 0"),
            "{why}"
        );
        let mut rows = timed(&[100, 300, 310, 290, 305, 295, 320, 900]);
        time_outliers(&mut rows, 3.0, true);
        let s = sides(&rows);
        assert_eq!(s[0], Some(Outlier::Fast));
        assert_eq!(s[7], Some(Outlier::Slow));
        assert!(
            rows[7]
                .flags
                .time
                .as_ref()
                .expect("slow")
                .1
                .contains("percentile rule")
        );
    }

    #[test]
    fn gold_fails_below_the_bar_or_when_screened_on_gold() {
        let limits = Thresholds::default();
        let facts = |r: &PaymentRow| evaluation_facts(&[], Some(0), r, limits).2.failed_gold;
        let low = facts(&row("completed", Some(0.5))).expect("below the bar");
        assert!(low.contains("50%") && low.contains("80%"), "{low}");
        assert!(facts(&row("completed", Some(0.9))).is_none());
        assert!(facts(&row("completed", None)).is_none());
        assert!(facts(&row("screened_gold", Some(0.9))).is_some());
    }

    fn reviewed(
        seq: u64,
        participant: &str,
        action: ReviewAction,
        cents: Option<u64>,
        of_seq: Option<u64>,
    ) -> Event {
        Event {
            v: 1,
            session: log_id("s"),
            seq,
            at_ms: seq,
            actor: Actor::System,
            kind: EventKind::Reviewed(Box::new(ReviewDecision {
                participant: participant.into(),
                worker: Some(format!("W-{participant}")),
                platform: "prolific".into(),
                action,
                reason: "r".into(),
                cents,
                researcher: "acc".into(),
                researcher_name: "admin".into(),
                of_seq,
                payment: None,
            })),
        }
    }

    #[test]
    fn later_decisions_supersede_earlier_ones_and_sends_are_counted() {
        use ReviewAction::*;
        let log = vec![
            reviewed(1, "p", Approve, None, None),
            reviewed(2, "p", Bonus, Some(100), None),
            reviewed(3, "p", Sent, Some(100), Some(2)),
            reviewed(4, "p", Reject, None, None),
            reviewed(5, "p", Bonus, Some(150), None),
            reviewed(6, "q", Bonus, Some(50), None),
            reviewed(7, "q", Bonus, Some(0), None),
            reviewed(8, "q", SendFailed, None, Some(6)),
        ];
        let folded = fold(&log);
        let p = &folded["p"];
        assert_eq!(p.decision, Some((Reject, 4)));
        assert_eq!(p.bonus, Some((150, 5)));
        assert_eq!(p.bonus_sent_cents, 100);
        assert_eq!(p.history.len(), 5);
        let q = &folded["q"];
        assert_eq!(q.bonus, None);
        assert!(q.last_failure.is_some());
    }

    #[test]
    fn a_not_sendable_decision_settles_its_failures_and_is_remembered() {
        use ReviewAction::*;
        let log = vec![
            reviewed(1, "p", Block, None, None),
            reviewed(2, "p", SendFailed, None, Some(1)),
            reviewed(3, "p", NotSendable, None, Some(1)),
            reviewed(4, "q", Approve, None, None),
            reviewed(5, "q", Block, None, None),
            reviewed(6, "q", SendFailed, None, Some(4)),
            reviewed(7, "q", NotSendable, None, Some(5)),
        ];
        let folded = fold(&log);
        let p = &folded["p"];
        assert!(p.is_not_sendable(1));
        assert!(!p.block_sent);
        assert_eq!(p.last_failure, None, "the block's failure is settled");
        let q = &folded["q"];
        assert!(q.is_not_sendable(5) && !q.is_not_sendable(4));
        assert!(q.last_failure.is_some(), "the approval's failure stays");
    }
}
