//! `wozkit prolific submissions` and `wozkit prolific pay`: a Prolific study's submissions next
//! to wozkit's participants, each judged by wozkit's record of the participant with that
//! `PROLIFIC_PID` and `SESSION_ID` (the ending reached), not by the typed code (Prolific's
//! codes are the study's, the same for everyone); and the payment: approve the valid ones,
//! then pay the payment table's bonuses in one bulk bonus payment, without paying anything
//! twice.
//!
//! What was sent is recorded in the store's meta table (keys `prolific:<prolific
//! study>:approved:<submission>`, and a payment record per bonus run,
//! `prolific:<prolific study>:bonus-run:<n>`, see `wozkit_platforms::once`), so a second run
//! sends only what is new and an uncertain payment is settled by asking Prolific, never by
//! paying again.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;
use wozkit_core::load::{self, LoadedStudy};
use wozkit_data::records::ledger::{self, StoreLedger, review_bonus_paid};
use wozkit_data::records::payments::{self, PaymentRow};
use wozkit_data::records::review_log as review;
use wozkit_platforms::once::{self, NewPayment, Outcome, Policy, Stage};
use wozkit_platforms::prolific::{self, AWAITING_REVIEW, Prolific, cents_of};
use wozkit_platforms::{Bonus, Submission};
use wozkit_store::Store;

use crate::data_cmds::{Access, open_store};

#[derive(Subcommand)]
pub enum ProlificCmd {
    /// List a Prolific study's submissions with the check of each completion code.
    Submissions(SubmissionsArgs),
    /// Approve the completed submissions with valid codes and pay the payment table's bonuses.
    Pay(PayArgs),
    /// Create the Prolific study (a draft) with the entry link and the study's completion
    /// codes, one per ending.
    CreateStudy(crate::prolific_create::CreateStudyArgs),
}

#[derive(Args)]
pub struct SubmissionsArgs {
    /// The Prolific study id (STUDY_ID in the entry link).
    #[arg(long, value_name = "ID")]
    prolific_study: String,
    /// Data directory (SQLite), sqlite:FILE, or postgres://….
    #[arg(long, env = "WOZKIT_DATA", default_value = "wozkit-data")]
    data: String,
}

/// Which amount of the payment table is paid as a Prolific bonus.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BonusFrom {
    /// The table's `bonus` column (the study's bonus condition).
    Bonus,
    /// Everything above the base: `total` − `base` (minutes, items, bonus), for a Prolific
    /// reward set to the study's base.
    Extra,
}

#[derive(Args)]
pub struct PayArgs {
    /// The wozkit study (study file, folder or built-in name) whose payment table is paid.
    #[arg(long)]
    study: String,
    /// The Prolific study id (STUDY_ID in the entry link).
    #[arg(long, value_name = "ID")]
    prolific_study: String,
    /// Data directory (SQLite), sqlite:FILE, or postgres://….
    #[arg(long, env = "WOZKIT_DATA", default_value = "wozkit-data")]
    data: String,
    /// Print what would be done; send nothing and record nothing.
    #[arg(long)]
    dry_run: bool,
    /// The amount paid as a bonus to a participant the review did not decide on (with a review
    /// decision or bonus, the table's `review_bonus` is paid instead).
    #[arg(long, value_enum, default_value_t = BonusFrom::Bonus)]
    bonus_from: BonusFrom,
}

/// What wozkit's own record says of a submission. Prolific takes any of the study's codes
/// from anyone, so the typed code proves nothing: a submission is judged by the participant
/// wozkit knows under its `PROLIFIC_PID` and `SESSION_ID` (the submission id), and the ending
/// that participant reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodeCheck {
    /// wozkit participant `participant` has this submission and reached `ending` with a code
    /// (the payment table's status: `completed`, `no_partner`, `screened_gold`, …).
    Valid { participant: String, ending: String },
    /// The worker is known to wozkit under another submission (or none recorded).
    Wrong { detail: String },
    /// The worker's participant for this submission has reached no ending with a code yet.
    Missing { participant: String, status: String },
    /// No wozkit participant has this Prolific participant id.
    UnknownWorker,
}

impl CodeCheck {
    fn word(&self) -> String {
        match self {
            CodeCheck::Valid {
                participant,
                ending,
            } => format!("valid ({participant}, {ending})"),
            CodeCheck::Wrong { detail } => format!("wrong: {detail}"),
            CodeCheck::Missing {
                participant,
                status,
            } => format!("no ending with a code ({participant}, {status})"),
            CodeCheck::UnknownWorker => "worker unknown to wozkit".into(),
        }
    }
}

/// The `SESSION_ID` of a payment row's platform ids (`key=value` joined with `;`).
fn session_id(row: &PaymentRow) -> Option<&str> {
    row.crowd_ids
        .split(';')
        .find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == "SESSION_ID"))
        .map(|(_, v)| v)
}

/// The check of one submission against the Prolific rows of the payment table.
pub fn classify(sub: &Submission, rows: &[&PaymentRow]) -> CodeCheck {
    let mine: Vec<&&PaymentRow> = rows
        .iter()
        .filter(|r| r.worker_id == sub.worker_id)
        .collect();
    if mine.is_empty() {
        return CodeCheck::UnknownWorker;
    }
    let Some(row) = mine.iter().find(|r| session_id(r) == Some(sub.id.as_str())) else {
        let known: Vec<&str> = mine.iter().filter_map(|r| session_id(r)).collect();
        let detail = if known.is_empty() {
            "wozkit has no SESSION_ID for this worker".to_string()
        } else {
            format!(
                "wozkit knows this worker under SESSION_ID {}, not {}",
                known.join(", "),
                sub.id
            )
        };
        return CodeCheck::Wrong { detail };
    };
    if row.completion_code.is_empty() {
        return CodeCheck::Missing {
            participant: row.participant.clone(),
            status: row.status.clone(),
        };
    }
    CodeCheck::Valid {
        participant: row.participant.clone(),
        ending: row.status.clone(),
    }
}

/// Checks every submission against wozkit's record of its participant (the payment table's
/// Prolific rows: `PROLIFIC_PID`, `SESSION_ID`, the ending and its code). The store is not read
/// (the rows are the record).
pub async fn check_codes(
    _store: &dyn Store,
    rows: &[PaymentRow],
    subs: &[Submission],
) -> Result<Vec<CodeCheck>> {
    let prolific: Vec<&PaymentRow> = rows.iter().filter(|r| r.platform == "prolific").collect();
    Ok(subs.iter().map(|s| classify(s, &prolific)).collect())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

pub fn prolific(cmd: ProlificCmd) -> Result<ExitCode> {
    match cmd {
        ProlificCmd::Submissions(args) => submissions(args),
        ProlificCmd::Pay(args) => pay(args),
        ProlificCmd::CreateStudy(args) => crate::prolific_create::create_study(args),
    }
}

fn submissions(args: SubmissionsArgs) -> Result<ExitCode> {
    runtime()?.block_on(async move {
        let client = Prolific::from_env(&args.prolific_study)?;
        let subs: Vec<Submission> = client
            .list_submissions()
            .await?
            .into_iter()
            .map(Submission::from)
            .collect();
        let store = open_store(&args.data, Access::Snapshot).await?;
        let rows = payments::payments(store.as_ref(), None, &|_| None, true).await?;
        let checks = check_codes(store.as_ref(), &rows, &subs).await;
        store.close().await;
        let checks = checks?;
        println!(
            "{:<26} {:<26} {:<16} {:<14} check",
            "submission", "participant", "status", "code"
        );
        for (s, c) in subs.iter().zip(&checks) {
            println!(
                "{:<26} {:<26} {:<16} {:<14} {}",
                s.id,
                s.worker_id,
                s.status,
                s.completion_code.as_deref().unwrap_or("-"),
                c.word()
            );
        }
        let valid = checks
            .iter()
            .filter(|c| matches!(c, CodeCheck::Valid { .. }))
            .count();
        println!(
            "{} submission(s) of Prolific study {}, {valid} valid by wozkit's record",
            subs.len(),
            args.prolific_study
        );
        Ok(ExitCode::SUCCESS)
    })
}

/// A column of a payment row that may or may not exist (the review decisions are added by
/// the review part of the console): its text, when present and not empty.
fn column(row: &Value, key: &str) -> Option<String> {
    match row.get(key)? {
        Value::Null => None,
        Value::String(s) if s.trim().is_empty() => None,
        Value::String(s) => Some(s.trim().to_string()),
        other => Some(other.to_string()),
    }
}

/// The cents to pay as a bonus for one row: the review's `review_bonus` when the researcher
/// reviewed the participant (a decision, or a review bonus above 0), else the amount `from`
/// names.
/// Whether the review decided on a row (a decision or a review bonus): its bonus is the review
/// bonus, which the console pays too.
fn row_reviewed(row: &Value) -> Result<bool> {
    let participant = column(row, "participant").unwrap_or_default();
    let bonus: f64 = match column(row, "review_bonus") {
        None => 0.0,
        Some(text) => text.parse().with_context(|| {
            format!("participant {participant}: review_bonus `{text}` is not an amount")
        })?,
    };
    Ok(column(row, "decision").is_some() || bonus > 0.0)
}

fn row_bonus(row: &Value, from: BonusFrom) -> Result<u64> {
    let participant = column(row, "participant").unwrap_or_default();
    let amount = |key: &str| -> Result<f64> {
        match column(row, key) {
            None => Ok(0.0),
            Some(text) => text.parse().with_context(|| {
                format!("participant {participant}: {key} `{text}` is not an amount")
            }),
        }
    };
    let reviewed = column(row, "decision").is_some() || amount("review_bonus")? > 0.0;
    Ok(if reviewed {
        cents_of(amount("review_bonus")?)
    } else {
        match from {
            BonusFrom::Bonus => cents_of(amount("bonus")?),
            BonusFrom::Extra => {
                cents_of(amount("total")?).saturating_sub(cents_of(amount("base")?))
            }
        }
    })
}

fn approved_key(pstudy: &str, submission: &str) -> String {
    format!("prolific:{pstudy}:approved:{submission}")
}

/// The cents paid in bonuses to a worker by versions of `pay` before bonus runs were recorded.
fn bonus_key(pstudy: &str, worker: &str) -> String {
    format!("prolific:{pstudy}:bonus:{worker}")
}

/// The payment record of bonus run `n` (see [`wozkit_platforms::once`]).
fn run_key(pstudy: &str, n: u64) -> String {
    format!("prolific:{pstudy}:bonus-run:{n}")
}

fn pay(args: PayArgs) -> Result<ExitCode> {
    let study = Arc::new(
        load::resolve(&args.study)
            .map_err(|d| anyhow::anyhow!("{d}"))
            .with_context(|| format!("study `{}` does not load", args.study))?,
    );
    runtime()?.block_on(async move {
        let client = Prolific::from_env(&args.prolific_study)?;
        let access = if args.dry_run {
            Access::Snapshot
        } else {
            Access::Write
        };
        let store = open_store(&args.data, access).await?;
        let result = pay_with(&args, &study, &client, store.as_ref()).await;
        store.close().await;
        result
    })
}

/// The rows of each worker, with their columns as JSON (for the review decisions).
type ByWorker<'r> = BTreeMap<&'r str, Vec<(&'r PaymentRow, Value)>>;

/// A payment left unsettled (no certain answer from Prolific): the command stops there and
/// fails, paying nothing new.
struct Unsettled;

async fn pay_with(
    args: &PayArgs,
    study: &Arc<LoadedStudy>,
    client: &Prolific,
    store: &dyn Store,
) -> Result<ExitCode> {
    let pstudy = args.prolific_study.as_str();
    let id = study.study.id.clone();
    let study_of = |sid: &str| (sid == id).then(|| study.clone());
    let rows = payments::payments(store, Some(&id), &study_of, false).await?;
    let subs: Vec<Submission> = client
        .list_submissions()
        .await?
        .into_iter()
        .map(Submission::from)
        .collect();
    let checks = check_codes(store, &rows, &subs).await?;
    let prefix = if args.dry_run { "would " } else { "" };
    let by_worker = rows_by_worker(&rows);

    // 1. Approvals.
    let (to_approve, mut approved_workers) =
        approvals(args, store, &subs, &checks, &by_worker, prefix).await?;
    send_approvals(args, client, store, &to_approve).await?;

    // 2. Bonuses of the approved workers: the table's amount minus what was paid before, which
    // is the older per-worker record plus the bonuses of every recorded bonus run. A run left
    // unsettled (no certain answer, an interrupted command) is carried on first, by asking
    // Prolific what became of it; nothing new is paid while one is unsettled.
    let ledger = StoreLedger(store);
    let reviews = review::read(store, &id).await?;
    let runs_key = format!("prolific:{pstudy}:bonus-runs");
    let runs_text = store.meta(&runs_key).await?;
    let runs: u64 = runs_text
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let claimant = format!(
        "wozkit prolific pay (process {}, {})",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    );
    let bonuses = Bonuses {
        args,
        client,
        store,
        ledger: &ledger,
        pstudy,
        study: &id,
        reviews: &reviews,
        claimant: &claimant,
        prefix,
        submission_of: subs
            .iter()
            .map(|s| (s.worker_id.as_str(), s.id.as_str()))
            .collect(),
    };
    let Ok(in_runs) = bonuses.settle_runs(runs).await? else {
        return Ok(ExitCode::FAILURE);
    };
    approved_workers.sort_unstable();
    approved_workers.dedup();
    let Ok(lines) = bonuses
        .owed_lines(&approved_workers, &by_worker, &in_runs)
        .await?
    else {
        return Ok(ExitCode::FAILURE);
    };
    if !args.dry_run && !lines.is_empty() {
        let next = bonuses
            .pay_run(&runs_key, runs_text.as_deref(), runs + 1, &lines)
            .await?;
        if let Err(Unsettled) = next {
            return Ok(ExitCode::FAILURE);
        }
    }
    print_summary(prefix, &to_approve, &lines);
    Ok(ExitCode::SUCCESS)
}

/// Prints what the command approved and paid (or would have).
fn print_summary(prefix: &str, to_approve: &[String], lines: &[Bonus]) {
    let total: u64 = lines.iter().map(|b| b.cents).sum();
    println!(
        "{}{} submission(s) approved, {} bonus(es) of {} in all{}",
        prefix,
        to_approve.len(),
        lines.len(),
        prolific::amount(total),
        if to_approve.is_empty() && lines.is_empty() {
            " (nothing new)"
        } else {
            ""
        }
    );
}

/// The Prolific rows of the payment table by worker, each with its columns as JSON.
fn rows_by_worker(rows: &[PaymentRow]) -> ByWorker<'_> {
    let mut by_worker: ByWorker = BTreeMap::new();
    for r in rows.iter().filter(|r| r.platform == "prolific") {
        let json = serde_json::to_value(r).unwrap_or(Value::Null);
        by_worker.entry(&r.worker_id).or_default().push((r, json));
    }
    by_worker
}

/// Decides which submissions to approve (printing why the others are left for review), and
/// which workers count as approved: the submissions to approve and those workers (with
/// repeats).
async fn approvals<'s>(
    args: &PayArgs,
    store: &dyn Store,
    subs: &'s [Submission],
    checks: &[CodeCheck],
    by_worker: &ByWorker<'_>,
    prefix: &str,
) -> Result<(Vec<String>, Vec<&'s str>)> {
    let pstudy = args.prolific_study.as_str();
    let decision = |worker: &str| -> Option<String> {
        by_worker
            .get(worker)?
            .iter()
            .find_map(|(_, j)| column(j, "decision"))
            .map(|d| d.to_lowercase())
    };
    let mut to_approve = vec![];
    let mut approved_workers: Vec<&str> = vec![];
    for (s, c) in subs.iter().zip(checks) {
        let decided = decision(&s.worker_id);
        let rejected = decided
            .as_deref()
            .is_some_and(|d| d.starts_with("reject") || d == "block");
        if s.status == prolific::APPROVED {
            if !rejected {
                approved_workers.push(&s.worker_id);
            }
            continue;
        }
        if s.status != AWAITING_REVIEW {
            continue;
        }
        let by_review = decided.as_deref().is_some_and(|d| d.starts_with("approve"));
        if rejected {
            println!(
                "left for review: {} ({}): the review decision is `{}`",
                s.id,
                s.worker_id,
                decided.as_deref().unwrap_or_default()
            );
            continue;
        }
        if !(matches!(c, CodeCheck::Valid { .. }) || by_review) {
            println!(
                "left for review: {} ({}): code {}",
                s.id,
                s.worker_id,
                c.word()
            );
            continue;
        }
        if store.meta(&approved_key(pstudy, &s.id)).await?.is_some() {
            // Sent before and not yet shown as approved (Prolific approves in bulk later).
            approved_workers.push(&s.worker_id);
            continue;
        }
        to_approve.push(s.id.clone());
        approved_workers.push(&s.worker_id);
        println!("{prefix}approve {} ({})", s.id, s.worker_id);
    }
    Ok((to_approve, approved_workers))
}

/// Approves `to_approve` on Prolific in bulk and records each as sent (unless on a dry run).
async fn send_approvals(
    args: &PayArgs,
    client: &Prolific,
    store: &dyn Store,
    to_approve: &[String],
) -> Result<()> {
    if !args.dry_run && !to_approve.is_empty() {
        client.bulk_approve(to_approve).await?;
        for s in to_approve {
            store
                .set_meta(&approved_key(&args.prolific_study, s), "1")
                .await?;
        }
    }
    Ok(())
}

/// What paying the bonuses works with: the command's arguments, Prolific, the store and its
/// ledger of payment records, the study's reviews, and who is paying.
struct Bonuses<'a> {
    args: &'a PayArgs,
    client: &'a Prolific,
    store: &'a dyn Store,
    ledger: &'a StoreLedger<'a>,
    pstudy: &'a str,
    study: &'a str,
    reviews: &'a HashMap<String, review::Reviewed>,
    claimant: &'a str,
    /// `would ` on a dry run, else empty.
    prefix: &'a str,
    /// The submission of each worker.
    submission_of: HashMap<&'a str, &'a str>,
}

impl Bonuses<'_> {
    /// Pays once under `key` (see [`once::pay_once`]): carries on the payment recorded there,
    /// else starts `new`.
    async fn pay_once(&self, key: &str, new: Option<NewPayment<'_>>) -> Result<Outcome> {
        once::pay_once(
            self.client,
            self.ledger,
            key,
            new,
            self.claimant,
            Policy::default(),
        )
        .await
        .map_err(anyhow::Error::msg)
    }

    /// A bonus of `cents` to `worker`, on their submission.
    fn bonus_to(&self, worker: &str, cents: u64) -> Bonus {
        Bonus {
            worker_id: worker.to_string(),
            submission_id: self
                .submission_of
                .get(worker)
                .copied()
                .unwrap_or(worker)
                .to_string(),
            cents,
            reason: String::new(),
        }
    }

    /// Reads the recorded bonus runs `1..=runs`, settling any left unsettled (unless on a dry
    /// run): the cents each worker was paid in them.
    async fn settle_runs(&self, runs: u64) -> Result<Result<BTreeMap<String, u64>, Unsettled>> {
        let mut in_runs: BTreeMap<String, u64> = BTreeMap::new();
        for n in 1..=runs {
            let key = run_key(self.pstudy, n);
            let Some(mut rec) = once::read(self.ledger, &key)
                .await
                .map_err(anyhow::Error::msg)?
            else {
                continue;
            };
            if !rec.stage.settled() && !self.args.dry_run {
                match self.pay_once(&key, None).await? {
                    Outcome::Settled(r) => {
                        println!(
                            "bonus run {n} ({}) settled: {} paid",
                            r.prepared.as_deref().unwrap_or("-"),
                            prolific::amount(r.paid_cents())
                        );
                        rec = r;
                    }
                    Outcome::Pending { why, .. } => {
                        println!("bonus run {n} is not settled, nothing new is paid: {why}");
                        return Ok(Err(Unsettled));
                    }
                }
            }
            for b in &rec.bonuses {
                let counted = if rec.stage.settled() {
                    b.paid == Some(true)
                } else {
                    b.paid != Some(false)
                };
                if counted {
                    *in_runs.entry(b.worker_id.clone()).or_default() += b.cents;
                }
            }
        }
        Ok(Ok(in_runs))
    }

    /// Pays the review bonuses of the approved workers (sorted, once each), and returns the
    /// bonuses still owed to them for this command's run. `in_runs`: what the recorded runs
    /// paid each.
    async fn owed_lines(
        &self,
        approved_workers: &[&str],
        by_worker: &ByWorker<'_>,
        in_runs: &BTreeMap<String, u64>,
    ) -> Result<Result<Vec<Bonus>, Unsettled>> {
        let mut lines: Vec<Bonus> = vec![];
        for &worker in approved_workers {
            let Some(rs) = by_worker.get(worker) else {
                continue;
            };
            let paid_in_runs = in_runs.get(worker).copied().unwrap_or(0);
            match self.worker_bonus(worker, rs, paid_in_runs).await? {
                Ok(line) => lines.extend(line),
                Err(Unsettled) => return Ok(Err(Unsettled)),
            }
        }
        Ok(Ok(lines))
    }

    /// Pays an approved worker's review bonuses (each on the console's record of the
    /// participant), and returns the bonus still owed to them beyond those, if any, for this
    /// command's run. `paid_in_runs`: what the recorded runs paid them.
    async fn worker_bonus(
        &self,
        worker: &str,
        rs: &[(&PaymentRow, Value)],
        paid_in_runs: u64,
    ) -> Result<Result<Option<Bonus>, Unsettled>> {
        // Review bonuses are paid on the console's record of each participant (below), so that
        // the console's Send and `pay` meet on one record; the rest in this command's runs.
        let mut owed = 0;
        let mut review_owed: Vec<(&str, u64)> = vec![];
        for (r, j) in rs {
            if row_reviewed(j)? {
                review_owed.push((&r.participant, row_bonus(j, self.args.bonus_from)?));
            } else {
                owed += row_bonus(j, self.args.bonus_from)?;
            }
        }
        let legacy: u64 = self
            .store
            .meta(&bonus_key(self.pstudy, worker))
            .await?
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut paid = legacy + paid_in_runs;
        // What runs paid beyond the rest was review bonuses paid before the records.
        let mut runs_surplus = paid.saturating_sub(owed);
        paid = paid.min(owed);
        let currency = &rs[0].0.currency;
        for (participant, cents) in review_owed {
            let step = self
                .review_bonus(worker, currency, participant, cents, &mut runs_surplus)
                .await?;
            if let Err(Unsettled) = step {
                return Ok(Err(Unsettled));
            }
        }
        if owed > paid {
            println!(
                "{}pay a bonus of {} {} to {worker} (owed {}, paid before {})",
                self.prefix,
                prolific::amount(owed - paid),
                currency,
                prolific::amount(owed),
                prolific::amount(paid)
            );
            return Ok(Ok(Some(self.bonus_to(worker, owed - paid))));
        } else if owed < paid {
            println!(
                "note: {worker} was paid {} in bonuses, more than the {} owed now",
                prolific::amount(paid),
                prolific::amount(owed)
            );
        }
        Ok(Ok(None))
    }

    /// Pays what is still due of `participant`'s review bonus of `cents` to `worker`, on the
    /// console's record of the participant (settling it first if it is unsettled). What the
    /// runs paid beyond the rest (`runs_surplus`) counts as paid, and is used up.
    async fn review_bonus(
        &self,
        worker: &str,
        currency: &str,
        participant: &str,
        cents: u64,
        runs_surplus: &mut u64,
    ) -> Result<Result<(), Unsettled>> {
        let key = ledger::bonus_key(self.study, participant);
        let Ok(record) = self.settled_review_record(&key, participant).await? else {
            return Ok(Err(Unsettled));
        };
        let none = Default::default();
        let done = review_bonus_paid(
            self.reviews.get(participant).unwrap_or(&none),
            record.as_ref(),
        );
        let from_runs = (*runs_surplus).min(cents.saturating_sub(done));
        *runs_surplus -= from_runs;
        let due = cents.saturating_sub(done + from_runs);
        if due == 0 {
            return Ok(Ok(()));
        }
        println!(
            "{}pay the review bonus of {participant}, {} {} to {worker} (owed {}, paid before {})",
            self.prefix,
            prolific::amount(due),
            currency,
            prolific::amount(cents),
            prolific::amount(done + from_runs)
        );
        if self.args.dry_run {
            return Ok(Ok(()));
        }
        let one = [self.bonus_to(worker, due)];
        let tag = format!("wozkit prolific pay: review bonus of {participant}");
        let new = NewPayment {
            bonuses: &one,
            tag: &tag,
            replaces: record.as_ref().filter(|r| r.stage.settled()),
        };
        match self.pay_once(&key, Some(new)).await? {
            Outcome::Settled(r) if r.stage == Stage::Sent => {
                println!("review bonus of {participant} paid");
            }
            Outcome::Settled(r) => anyhow::bail!(
                "Prolific refused the review bonus of {participant}, nothing was paid: {}",
                r.note
            ),
            Outcome::Pending { why, .. } => {
                println!(
                    "the review bonus of {participant} is not settled: {why}; run `wozkit prolific pay` again to settle it (nothing is paid twice)"
                );
                return Ok(Err(Unsettled));
            }
        }
        Ok(Ok(()))
    }

    /// The payment record of `participant`'s review bonus under `key`, settled first if it is
    /// not (unless on a dry run).
    async fn settled_review_record(
        &self,
        key: &str,
        participant: &str,
    ) -> Result<Result<Option<once::PaymentRecord>, Unsettled>> {
        let record = once::read(self.ledger, key)
            .await
            .map_err(anyhow::Error::msg)?;
        if record.as_ref().is_some_and(|r| !r.stage.settled()) && !self.args.dry_run {
            match self.pay_once(key, None).await? {
                Outcome::Settled(r) => return Ok(Ok(Some(r))),
                Outcome::Pending { why, .. } => {
                    println!(
                        "the review bonus of {participant} is not settled, nothing new is paid: {why}"
                    );
                    return Ok(Err(Unsettled));
                }
            }
        }
        Ok(Ok(record))
    }

    /// Pays `lines` as bonus run `n`, after claiming its number atomically (the runs counter
    /// under `runs_key` moves from `runs_text`): of two commands at once, one pays.
    async fn pay_run(
        &self,
        runs_key: &str,
        runs_text: Option<&str>,
        n: u64,
        lines: &[Bonus],
    ) -> Result<Result<(), Unsettled>> {
        if !self
            .store
            .meta_swap(runs_key, runs_text, &n.to_string())
            .await?
        {
            anyhow::bail!(
                "another `wozkit prolific pay` started a bonus run meanwhile: nothing was paid; run again"
            );
        }
        let key = run_key(self.pstudy, n);
        let new = NewPayment {
            bonuses: lines,
            tag: "prolific pay",
            replaces: None,
        };
        match self.pay_once(&key, Some(new)).await? {
            Outcome::Settled(r) if r.stage == Stage::Sent => {
                println!(
                    "bulk bonus payment {} paid",
                    r.prepared.as_deref().unwrap_or("-")
                );
            }
            Outcome::Settled(r) => {
                anyhow::bail!("Prolific refused the bonuses, nothing was paid: {}", r.note)
            }
            Outcome::Pending { why, .. } => {
                println!(
                    "bonus run {n} is not settled: {why}; run `wozkit prolific pay` again to settle it (nothing is paid twice)"
                );
                return Ok(Err(Unsettled));
            }
        }
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(worker: &str, code: Option<&str>) -> Submission {
        Submission {
            id: format!("{worker}-s"),
            worker_id: worker.into(),
            status: AWAITING_REVIEW.into(),
            completion_code: code.map(str::to_string),
        }
    }

    fn row(participant: &str, worker: &str, session: &str, status: &str, code: &str) -> PaymentRow {
        let mut r = PaymentRow {
            participant: participant.into(),
            platform: "prolific".into(),
            crowd_ids: String::new(),
            worker_id: worker.into(),
            study: "s".into(),
            session: "x".into(),
            role: "user".into(),
            status: status.into(),
            completion_code: code.into(),
            judgments: None,
            surplus: None,
            surplus_paid: None,
            items_paid: None,
            gold_accuracy: None,
            currency: "GBP".into(),
            base: 1.0,
            minutes: 0.0,
            bonus: 0.0,
            total: 1.0,
            decision: String::new(),
            review_bonus: 0.0,
            total_with_bonus: 1.0,
        };
        r.crowd_ids = format!("PROLIFIC_PID={worker};SESSION_ID={session};STUDY_ID=ps");
        r
    }

    #[test]
    fn submissions_are_judged_by_wozkits_record_not_the_typed_code() {
        let done = row("p1", "w1", "w1-s", "completed", "ABCD1234");
        let waiting = row("p2", "w2", "w2-s", "incomplete", "");
        let elsewhere = row("p3", "w3", "other", "completed", "EFGH5678");
        let rows = [&done, &waiting, &elsewhere];
        // Any typed code, or none: the record decides.
        for typed in [Some("C1K8Q2ZD"), Some("WRONG"), None] {
            assert_eq!(
                classify(&sub("w1", typed), &rows),
                CodeCheck::Valid {
                    participant: "p1".into(),
                    ending: "completed".into()
                }
            );
        }
        assert_eq!(
            classify(&sub("w2", Some("C1K8Q2ZD")), &rows),
            CodeCheck::Missing {
                participant: "p2".into(),
                status: "incomplete".into()
            }
        );
        assert!(matches!(
            classify(&sub("w3", Some("C1K8Q2ZD")), &rows),
            CodeCheck::Wrong { detail } if detail.contains("SESSION_ID other, not w3-s")
        ));
        assert_eq!(
            classify(&sub("w9", Some("C1K8Q2ZD")), &rows),
            CodeCheck::UnknownWorker
        );
    }

    #[test]
    fn review_columns_are_read_when_present() {
        let row: Value =
            serde_json::json!({"decision": "approve", "review_bonus": 0.15, "bonus": 0});
        assert_eq!(column(&row, "decision").as_deref(), Some("approve"));
        assert_eq!(column(&row, "review_bonus").as_deref(), Some("0.15"));
        assert_eq!(column(&row, "missing"), None);
        assert_eq!(
            column(&serde_json::json!({"decision": ""}), "decision"),
            None
        );
    }

    #[test]
    fn the_bonus_is_the_reviews_else_the_tables() {
        use serde_json::json;
        let table = json!({"participant": "p", "base": 1.0, "bonus": 0.15, "total": 1.455});
        assert_eq!(row_bonus(&table, BonusFrom::Bonus).unwrap(), 15);
        // 1.455 is 146 cents in the table's rounding; 146 - 100.
        assert_eq!(row_bonus(&table, BonusFrom::Extra).unwrap(), 46);
        // Review columns without a review: the table's amounts still apply.
        let unreviewed = json!({"participant": "p", "base": 1.0, "bonus": 0.15, "total": 1.5,
            "decision": "", "review_bonus": 0.0});
        assert_eq!(row_bonus(&unreviewed, BonusFrom::Bonus).unwrap(), 15);
        // A review decision: its bonus (here none) replaces the table's.
        let approved = json!({"participant": "p", "bonus": 0.15, "decision": "approve",
            "review_bonus": 0.0});
        assert_eq!(row_bonus(&approved, BonusFrom::Bonus).unwrap(), 0);
        let given = json!({"participant": "p", "bonus": 0.15, "decision": "",
            "review_bonus": 1.005});
        assert_eq!(row_bonus(&given, BonusFrom::Extra).unwrap(), 101);
        let bad = json!({"participant": "p", "decision": "approve", "review_bonus": "lots"});
        let err = row_bonus(&bad, BonusFrom::Bonus).unwrap_err().to_string();
        assert!(err.contains("participant p: review_bonus `lots`"), "{err}");
    }
}
