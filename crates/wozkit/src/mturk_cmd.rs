//! `wozkit mturk …`: Mechanical Turk for a wozkit study through the AWS SDK (credentials in
//! `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`; `--sandbox` or `WOZKIT_MTURK_SANDBOX=1` for
//! the requester sandbox; `WOZKIT_MTURK_ENDPOINT` for another endpoint, e.g. a mock).
//!
//! The HITs created for a study are recorded in the store's meta table under
//! `mturk_hits:<study>` (a JSON list of [`RecordedHit`]); `assignments`, `pay` and the console's
//! [`payer_for_study`] work over them. Each bonus is a payment record of
//! [`wozkit_platforms::once`] in the meta table: the payment table's part beyond the reward under
//! `pay:mturk:<study>:bonus:<assignment>`, the review bonus under the console's own record of
//! the participant ([`wozkit_data::records::ledger::bonus_key`]), so that the console and `pay`
//! never both pay it. A SendBonus without a certain answer is looked up with ListBonusPayments
//! before anything is sent again, also after MTurk's 24 hours of keeping UniqueRequestTokens.
//! What versions before the records paid (`mturk:<study>:<bonus|review>:<assignment>`, cents)
//! counts as paid.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use serde_json::Value;
use wozkit_core::load::{self, LoadedStudy};
use wozkit_data::records::ledger::{StoreLedger, bonus_key, review_bonus_paid};
use wozkit_data::records::payments::{self, PaymentRow};
use wozkit_data::records::review_log as review;
use wozkit_platforms::mturk::{
    self, Assignment, Endpoint, HitSpec, MTurk, RecordedHit, Requirement, SUBMITTED,
};
use wozkit_platforms::once::{self, NewPayment, Outcome, Policy, Stage};
use wozkit_platforms::{Bonus, Payer};
use wozkit_store::Store;

use crate::data_cmds::{Access, open_store};

#[derive(Subcommand)]
pub enum MturkCmd {
    /// Create a HIT whose question is the study's entry link (ExternalQuestion).
    CreateHit(Box<CreateHitArgs>),
    /// List the assignments of the study's HITs.
    Assignments(StudyArgs),
    /// Approve submitted assignments of workers who completed with a valid code, and pay the
    /// payment table's amounts above the HIT reward (and review bonuses) as bonuses.
    Pay(PayArgs),
    /// Block a worker from all of this requester's HITs.
    Block(BlockArgs),
    /// Create a custom qualification type, or grant one to workers.
    Qualify {
        #[command(subcommand)]
        action: QualifyCmd,
    },
}

#[derive(Args)]
pub struct Common {
    /// Data directory (SQLite), sqlite:FILE, or postgres://….
    #[arg(long, env = "WOZKIT_DATA", default_value = "wozkit-data")]
    data: String,
    /// Use the requester sandbox (mturk-requester-sandbox.us-east-1.amazonaws.com).
    #[arg(long)]
    sandbox: bool,
}

#[derive(Args)]
pub struct CreateHitArgs {
    /// The study (file, folder or built-in name).
    #[arg(long)]
    study: String,
    /// The server's public https address (the HIT opens BASE/join?study=ID).
    #[arg(long, value_name = "BASE")]
    url: String,
    #[command(flatten)]
    common: Common,
    /// The reward of each approved assignment, in dollars [default: the study's no_partner
    /// rate, else its base]; the payment table's rest is paid by `pay` as a bonus.
    #[arg(long)]
    reward: Option<String>,
    /// How many workers may take the HIT.
    #[arg(long, default_value_t = 10)]
    assignments: i32,
    /// How long the HIT is listed, in hours.
    #[arg(long, default_value_t = 72)]
    lifetime_hours: i64,
    /// How long a worker has once they accepted, in minutes.
    #[arg(long, default_value_t = 60)]
    duration_minutes: i64,
    /// After how many days a submitted assignment is approved if nobody decides.
    #[arg(long, default_value_t = 3)]
    auto_approve_days: i64,
    /// The title workers see [default: the study's title].
    #[arg(long)]
    title: Option<String>,
    /// The description workers see [default: the study's `preview`, the participants' words;
    /// never its `description`, which is the researcher's].
    #[arg(long)]
    description: Option<String>,
    #[arg(long, default_value = "chat, dialogue, research study")]
    keywords: String,
    /// Only workers in these countries (comma-separated ISO codes, e.g. US,GB).
    #[arg(long, value_delimiter = ',')]
    locale: Vec<String>,
    /// Only workers with at least this percentage of approved assignments.
    #[arg(long, value_name = "PERCENT")]
    approval_rate: Option<i32>,
    /// Only workers with at least this many approved HITs.
    #[arg(long, value_name = "N")]
    hits_approved: Option<i32>,
    /// Only workers holding this custom qualification type.
    #[arg(long, value_name = "TYPE_ID")]
    qualification: Vec<String>,
    /// Only workers NOT holding this qualification type (e.g. who took part before).
    #[arg(long, value_name = "TYPE_ID")]
    exclude_qualification: Vec<String>,
}

#[derive(Args)]
pub struct StudyArgs {
    /// The study's id (as entry links name it).
    #[arg(long)]
    study: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct PayArgs {
    /// The study (file, folder or built-in name) whose payment table is paid.
    #[arg(long)]
    study: String,
    #[command(flatten)]
    common: Common,
    /// Print what would be done; send nothing and record nothing.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Args)]
pub struct BlockArgs {
    /// The MTurk worker id.
    worker: String,
    /// The reason MTurk keeps with the block.
    #[arg(long)]
    reason: String,
    /// Use the requester sandbox.
    #[arg(long)]
    sandbox: bool,
}

#[derive(Subcommand)]
pub enum QualifyCmd {
    /// Create a custom qualification type (granted by you); prints its id.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        description: String,
        #[arg(long)]
        sandbox: bool,
    },
    /// Grant a qualification type to workers.
    Grant {
        /// The qualification type id.
        #[arg(long, value_name = "TYPE_ID")]
        qualification: String,
        /// The value granted.
        #[arg(long, default_value_t = 1)]
        value: i32,
        /// Let MTurk email the workers.
        #[arg(long)]
        notify: bool,
        #[arg(long)]
        sandbox: bool,
        /// MTurk worker ids.
        #[arg(required = true)]
        workers: Vec<String>,
    },
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

pub fn mturk(cmd: MturkCmd) -> Result<ExitCode> {
    runtime()?.block_on(async move {
        match cmd {
            MturkCmd::CreateHit(args) => create_hit(*args).await,
            MturkCmd::Assignments(args) => assignments(args).await,
            MturkCmd::Pay(args) => pay(args).await,
            MturkCmd::Block(args) => {
                MTurk::from_env(args.sandbox)?
                    .block(&args.worker, &args.reason)
                    .await?;
                println!("blocked {}", args.worker);
                Ok(ExitCode::SUCCESS)
            }
            MturkCmd::Qualify { action } => qualify(action).await,
        }
    })
}

fn load_study(arg: &str) -> Result<LoadedStudy> {
    load::resolve(arg)
        .map_err(|d| anyhow!("{d}"))
        .with_context(|| format!("study `{arg}` does not load"))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The HITs recorded for `study`.
pub async fn recorded_hits(store: &dyn Store, study: &str) -> Result<Vec<RecordedHit>> {
    let key = mturk::hits_meta_key(study);
    match store.meta(&key).await? {
        None => Ok(vec![]),
        Some(text) => serde_json::from_str(&text)
            .with_context(|| format!("the meta entry {key} is not a list of HITs")),
    }
}

/// The [`Payer`] of a study's HITs (as recorded in the meta table), from the environment's
/// credentials: for the researcher console. HITs created in the sandbox are worked on in the
/// sandbox.
pub async fn payer_for_study(store: &dyn Store, study: &str) -> Result<Arc<dyn Payer>> {
    let hits = recorded_hits(store, study).await?;
    if hits.is_empty() {
        bail!(
            "no MTurk HITs are recorded for study {study} (create one with `wozkit mturk create-hit`)"
        );
    }
    let sandbox = hits.iter().all(|h| h.sandbox);
    Ok(mturk::payer_from_env(
        hits.into_iter().map(|h| h.hit_id).collect(),
        sandbox,
    )?)
}

/// The reward per assignment in cents: `--reward`, else the study's payment for an ending
/// without a partner, else its base.
fn reward_cents(args: &CreateHitArgs, st: &wozkit_core::model::Study) -> Result<u64> {
    Ok(match &args.reward {
        Some(r) => mturk::cents_of(r)
            .ok_or_else(|| anyhow!("--reward {r}: give dollars with at most two decimals"))?,
        None => {
            let pay = st
                .payment
                .as_ref()
                .ok_or_else(|| anyhow!("study {} has no payment: give --reward", st.id))?;
            let amount = if pay.no_partner > 0.0 {
                pay.no_partner
            } else {
                pay.base
            };
            (amount * 100.0).round() as u64
        }
    })
}

/// The workers' requirements the options ask for.
fn requirements(args: &CreateHitArgs) -> Vec<Requirement> {
    let mut requirements = vec![];
    if !args.locale.is_empty() {
        requirements.push(Requirement::Locale(args.locale.clone()));
    }
    if let Some(p) = args.approval_rate {
        requirements.push(Requirement::ApprovalRate(p));
    }
    if let Some(n) = args.hits_approved {
        requirements.push(Requirement::HitsApproved(n));
    }
    for q in &args.qualification {
        requirements.push(Requirement::Has {
            type_id: q.clone(),
            min: None,
        });
    }
    for q in &args.exclude_qualification {
        requirements.push(Requirement::Lacks { type_id: q.clone() });
    }
    requirements
}

async fn create_hit(args: CreateHitArgs) -> Result<ExitCode> {
    let study = load_study(&args.study)?;
    let st = &study.study;
    let reward_cents = reward_cents(&args, st)?;
    let requirements = requirements(&args);
    let client = MTurk::from_env(args.common.sandbox)?;
    // The store first: a HIT that cannot be recorded would be one `pay` never sees.
    let store = open_store(&args.common.data, Access::Write).await?;
    let created_at_ms = now_ms();
    let spec = HitSpec {
        entry_link: HitSpec::entry_link(&args.url, &st.id),
        title: args.title.clone().unwrap_or_else(|| st.title.clone()),
        description: args.description.clone().unwrap_or_else(|| {
            let d = st.preview.as_deref().unwrap_or("").trim();
            if d.is_empty() {
                st.title.clone()
            } else {
                d.chars().take(1900).collect()
            }
        }),
        keywords: args.keywords.clone(),
        reward_cents,
        assignments: args.assignments,
        lifetime_s: args.lifetime_hours * 3600,
        duration_s: args.duration_minutes * 60,
        auto_approval_s: args.auto_approve_days * 86_400,
        frame_height: 0,
        requirements,
        annotation: Some(format!("wozkit:{}", st.id)),
        unique_request_token: Some(format!(
            "wozkit-{}-{created_at_ms}",
            st.id.chars().take(40).collect::<String>()
        )),
    };
    let result = async {
        let hit = client.create_hit(&spec).await?;
        let mut hits = recorded_hits(store.as_ref(), &st.id).await?;
        hits.push(RecordedHit {
            hit_id: hit.hit_id.clone(),
            reward_cents,
            sandbox: *client.endpoint() == Endpoint::Sandbox,
            created_at_ms,
        });
        store
            .set_meta(
                &mturk::hits_meta_key(&st.id),
                &serde_json::to_string(&hits)?,
            )
            .await
            .with_context(|| format!("HIT {} was created but cannot be recorded", hit.hit_id))?;
        println!(
            "created HIT {} (reward {} per assignment, {} assignment(s))",
            hit.hit_id,
            mturk::amount(reward_cents),
            args.assignments
        );
        println!("  question: {}", spec.entry_link);
        println!("  workers find it at {}", hit.preview_url);
        anyhow::Ok(())
    }
    .await;
    store.close().await;
    result?;
    Ok(ExitCode::SUCCESS)
}

async fn assignments(args: StudyArgs) -> Result<ExitCode> {
    let store = open_store(&args.common.data, Access::Snapshot).await?;
    let hits = recorded_hits(store.as_ref(), &args.study).await;
    store.close().await;
    let hits = hits?;
    let sandbox = args.common.sandbox || (!hits.is_empty() && hits.iter().all(|h| h.sandbox));
    let client = MTurk::from_env(sandbox)?;
    println!(
        "{:<32} {:<20} {:<32} {:<10} code",
        "assignment", "worker", "hit", "status"
    );
    let mut n = 0;
    for h in &hits {
        for a in client.list_assignments(&h.hit_id).await? {
            n += 1;
            println!(
                "{:<32} {:<20} {:<32} {:<10} {}",
                a.id,
                a.worker_id,
                a.hit_id,
                a.status,
                a.completion_code.as_deref().unwrap_or("-")
            );
        }
    }
    println!(
        "{n} assignment(s) of {} HIT(s) of study {}",
        hits.len(),
        args.study
    );
    Ok(ExitCode::SUCCESS)
}

/// A column of a payment row that may not exist (the review's `decision`, `review_bonus`).
fn column(row: &Value, key: &str) -> Option<String> {
    match row.get(key)? {
        Value::Null => None,
        Value::String(s) if s.trim().is_empty() => None,
        Value::String(s) => Some(s.trim().to_string()),
        other => Some(other.to_string()),
    }
}

/// Cents of an amount of the payment table.
fn cents(amount: f64) -> u64 {
    if amount <= 0.0 {
        0
    } else {
        (amount * 100.0).round() as u64
    }
}

fn crowd_id<'a>(row: &'a PaymentRow, key: &str) -> Option<&'a str> {
    row.crowd_ids
        .split(';')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

fn same_code(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// What versions before payment records paid (cents).
fn legacy_key(study: &str, assignment: &str, kind: &str) -> String {
    format!("mturk:{study}:{kind}:{assignment}")
}

/// The payment record of the payment table's bonus beyond the reward.
fn record_key(study: &str, assignment: &str) -> String {
    format!("pay:mturk:{study}:bonus:{assignment}")
}

/// The client's time for one request (`WOZKIT_MTURK_TIMEOUT_MS`, a minute by default): a
/// request that changes something and gets no answer in time is looked up before any retry.
fn request_timeout() -> std::time::Duration {
    let ms = std::env::var("WOZKIT_MTURK_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(60_000);
    std::time::Duration::from_millis(ms)
}

async fn pay(args: PayArgs) -> Result<ExitCode> {
    let study = Arc::new(load_study(&args.study)?);
    let access = if args.dry_run {
        Access::Snapshot
    } else {
        Access::Write
    };
    let store = open_store(&args.common.data, access).await?;
    let result = pay_with(&args, &study, store.as_ref()).await;
    store.close().await;
    result
}

async fn pay_with(args: &PayArgs, study: &Arc<LoadedStudy>, store: &dyn Store) -> Result<ExitCode> {
    let id = study.study.id.clone();
    let hits = recorded_hits(store, &id).await?;
    if hits.is_empty() {
        bail!(
            "no MTurk HITs are recorded for study {id} in {}",
            args.common.data
        );
    }
    let sandbox = args.common.sandbox || hits.iter().all(|h| h.sandbox);
    let client = MTurk::from_env(sandbox)?.with_timeout(request_timeout());
    let ledger = StoreLedger(store);
    let reviews = review::read(store, &id).await?;
    let claimant = format!(
        "wozkit mturk pay (process {}, {})",
        std::process::id(),
        now_ms()
    );
    let study_of = |sid: &str| (sid == id).then(|| study.clone());
    let rows: Vec<PaymentRow> = payments::payments(store, Some(&id), &study_of, false)
        .await?
        .into_iter()
        .filter(|r| r.platform == "mturk")
        .collect();
    let reward: BTreeMap<&str, u64> = hits
        .iter()
        .map(|h| (h.hit_id.as_str(), h.reward_cents))
        .collect();
    let prefix = if args.dry_run { "would " } else { "" };
    let pay = MturkPay {
        args,
        client,
        store,
        ledger,
        id: &id,
        title: study.study.title.clone(),
        reviews,
        claimant,
        prefix,
        rows,
        reward,
    };
    let mut tally = Tally::default();
    for h in &hits {
        let list: Vec<Assignment> = pay.client.list_assignments(&h.hit_id).await?;
        for a in list {
            pay.assignment(&a, &mut tally).await?;
        }
    }
    let Tally {
        approved,
        bonuses,
        left,
        unsettled,
    } = tally;
    println!(
        "{prefix}approve {approved} assignment(s) and pay {} in bonuses; {left} left for review",
        mturk::amount(bonuses)
    );
    if unsettled > 0 {
        println!(
            "{unsettled} bonus(es) not settled: run `wozkit mturk pay` again later to settle them (nothing is paid twice)"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// What `wozkit mturk pay` counts as it goes, for its summary.
#[derive(Default)]
struct Tally {
    /// Assignments approved (or that would be, on a dry run).
    approved: u64,
    /// Cents paid in bonuses (or that would be).
    bonuses: u64,
    /// Assignments left for review.
    left: u64,
    /// Bonuses left unsettled.
    unsettled: u64,
}

/// What `wozkit mturk pay` works with: its arguments, MTurk, the store and its ledger of
/// payment records, the study's payment rows and reviews, and who is paying.
struct MturkPay<'a> {
    args: &'a PayArgs,
    client: MTurk,
    store: &'a dyn Store,
    ledger: StoreLedger<'a>,
    /// The study's id.
    id: &'a str,
    /// The study's title (in the bonuses' reasons).
    title: String,
    reviews: HashMap<String, review::Reviewed>,
    claimant: String,
    /// `would ` on a dry run, else empty.
    prefix: &'static str,
    /// The MTurk rows of the payment table.
    rows: Vec<PaymentRow>,
    /// The reward of each HIT, in cents.
    reward: BTreeMap<&'a str, u64>,
}

impl MturkPay<'_> {
    /// Approves one assignment if it is due, then pays what it is owed beyond the reward.
    async fn assignment(&self, a: &Assignment, tally: &mut Tally) -> Result<()> {
        // The worker's row: the one whose entry link carried this assignment, else theirs.
        let row = self
            .rows
            .iter()
            .find(|r| crowd_id(r, "assignmentId") == Some(a.id.as_str()))
            .or_else(|| {
                let mine: Vec<_> = self
                    .rows
                    .iter()
                    .filter(|r| r.worker_id == a.worker_id)
                    .collect();
                (mine.len() == 1).then(|| mine[0])
            });
        let Some(row) = row else {
            println!(
                "left for review: {} ({}): worker unknown to wozkit",
                a.id, a.worker_id
            );
            tally.left += 1;
            return Ok(());
        };
        let json = serde_json::to_value(row).unwrap_or(Value::Null);
        if self.approve(a, row, &json, tally).await? {
            self.pay_bonuses(a, row, &json, tally).await?;
        }
        Ok(())
    }

    /// Approves a submitted assignment whose code is its worker's (or that the review
    /// approves), printing why when it is left for review: whether the assignment is approved
    /// now (or was before).
    async fn approve(
        &self,
        a: &Assignment,
        row: &PaymentRow,
        json: &Value,
        tally: &mut Tally,
    ) -> Result<bool> {
        let decision = column(json, "decision").map(|d| d.to_lowercase());
        if decision
            .as_deref()
            .is_some_and(|d| d.starts_with("reject") || d == "block")
        {
            println!(
                "left for review: {} ({}): the review decision is `{}`",
                a.id,
                a.worker_id,
                decision.as_deref().unwrap_or_default()
            );
            tally.left += 1;
            return Ok(false);
        }
        if a.status != SUBMITTED {
            return Ok(a.status == "Approved");
        }
        let code_ok = !row.completion_code.is_empty()
            && a.completion_code
                .as_deref()
                .is_none_or(|c| same_code(c, &row.completion_code));
        let by_review = decision
            .as_deref()
            .is_some_and(|d| d.starts_with("approve"));
        if !(code_ok || by_review) {
            println!(
                "left for review: {} ({}): {}",
                a.id,
                a.worker_id,
                if row.completion_code.is_empty() {
                    "no completion code in wozkit".to_string()
                } else {
                    format!(
                        "submitted code {} is not theirs",
                        a.completion_code.as_deref().unwrap_or("-")
                    )
                }
            );
            tally.left += 1;
            return Ok(false);
        }
        println!("{}approve {} ({})", self.prefix, a.id, a.worker_id);
        if !self.args.dry_run {
            self.client
                .approve(&a.id, Some("Thank you for taking part."))
                .await?;
        }
        tally.approved += 1;
        Ok(true)
    }

    /// Pays an approved assignment what the table gives above the HIT's reward, and the
    /// review's bonus, each as far as it was not paid before.
    async fn pay_bonuses(
        &self,
        a: &Assignment,
        row: &PaymentRow,
        json: &Value,
        tally: &mut Tally,
    ) -> Result<()> {
        let hit_reward = self.reward.get(a.hit_id.as_str()).copied().unwrap_or(0);
        let total = cents(row.total);
        if total < hit_reward {
            println!(
                "note: {} ({}) got the reward {}, more than the table's {}",
                a.id,
                a.worker_id,
                mturk::amount(hit_reward),
                mturk::amount(total)
            );
        }
        let review = column(json, "review_bonus")
            .map(|t| {
                t.parse::<f64>().map(cents).with_context(|| {
                    format!(
                        "participant {}: review_bonus `{t}` is not an amount",
                        row.participant
                    )
                })
            })
            .transpose()?
            .unwrap_or(0);
        let title = &self.title;
        for (kind, owed, reason) in [
            (
                "bonus",
                total.saturating_sub(hit_reward),
                format!("{title}: your pay beyond the HIT reward, as the study's terms say"),
            ),
            (
                "review",
                review,
                format!("{title}: a bonus from the research team"),
            ),
        ] {
            self.pay_owed(a, row, kind, owed, reason, tally).await?;
        }
        Ok(())
    }

    /// Pays the `kind` (`bonus` or `review`) of `owed` cents to an assignment's worker, less
    /// what was paid before: on its payment record, settled first if it is not.
    async fn pay_owed(
        &self,
        a: &Assignment,
        row: &PaymentRow,
        kind: &str,
        owed: u64,
        reason: String,
        tally: &mut Tally,
    ) -> Result<()> {
        let legacy: u64 = self
            .store
            .meta(&legacy_key(self.id, &a.id, kind))
            .await?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if owed <= legacy {
            return Ok(());
        }
        let key = if kind == "review" {
            bonus_key(self.id, &row.participant)
        } else {
            record_key(self.id, &a.id)
        };
        let Some(record) = self.settled_record(a, kind, &key, tally).await? else {
            return Ok(());
        };
        let paid = legacy + self.paid_on_record(kind, row, record.as_ref());
        if owed <= paid {
            return Ok(());
        }
        println!(
            "{}pay a {kind} of {} to {} for {} (owed {}, paid before {})",
            self.prefix,
            mturk::amount(owed - paid),
            a.worker_id,
            a.id,
            mturk::amount(owed),
            mturk::amount(paid)
        );
        if self.args.dry_run {
            tally.bonuses += owed - paid;
            return Ok(());
        }
        let lines = [Bonus {
            worker_id: a.worker_id.clone(),
            submission_id: a.id.clone(),
            cents: owed - paid,
            reason,
        }];
        let tag = format!("wozkit mturk pay: {kind} of {}", row.participant);
        let new = NewPayment {
            bonuses: &lines,
            tag: &tag,
            replaces: record.as_ref().filter(|r| r.stage.settled()),
        };
        match self.pay_once(&key, Some(new)).await? {
            Outcome::Settled(r) if r.stage == Stage::Sent => tally.bonuses += r.paid_cents(),
            Outcome::Settled(r) => bail!(
                "MTurk refused the {kind} of {} for {}, nothing was paid: {}",
                mturk::amount(owed - paid),
                a.id,
                r.note
            ),
            Outcome::Pending { why, .. } => {
                println!("the {kind} of {} is not settled: {why}", a.id);
                tally.unsettled += 1;
            }
        }
        Ok(())
    }

    /// What the `kind`'s payment record says was paid (for a review bonus, with what the
    /// review paid before the records).
    fn paid_on_record(
        &self,
        kind: &str,
        row: &PaymentRow,
        record: Option<&once::PaymentRecord>,
    ) -> u64 {
        match (kind, record) {
            ("review", r) => review_bonus_paid(
                self.reviews
                    .get(&row.participant)
                    .unwrap_or(&Default::default()),
                r,
            ),
            (_, Some(r)) if r.stage.settled() => r.total_paid_cents(),
            (_, Some(r)) => r.total_maybe_paid_cents(),
            (_, None) => 0,
        }
    }

    /// The payment record under `key` (`None` inside when there is none), settled first if it
    /// is not (unless on a dry run); `None` when it stays unsettled (counted in the tally).
    async fn settled_record(
        &self,
        a: &Assignment,
        kind: &str,
        key: &str,
        tally: &mut Tally,
    ) -> Result<Option<Option<once::PaymentRecord>>> {
        let record = once::read(&self.ledger, key)
            .await
            .map_err(anyhow::Error::msg)?;
        // A payment left unsettled is settled first, by asking MTurk.
        if record.as_ref().is_some_and(|r| !r.stage.settled()) && !self.args.dry_run {
            match self.pay_once(key, None).await? {
                Outcome::Settled(r) => return Ok(Some(Some(r))),
                Outcome::Pending { why, .. } => {
                    println!(
                        "the {kind} of {} is not settled, nothing new is paid: {why}",
                        a.id
                    );
                    tally.unsettled += 1;
                    return Ok(None);
                }
            }
        }
        Ok(Some(record))
    }

    /// Pays once under `key` (see [`once::pay_once`]): carries on the payment recorded there,
    /// else starts `new`.
    async fn pay_once(&self, key: &str, new: Option<NewPayment<'_>>) -> Result<Outcome> {
        once::pay_once(
            &self.client,
            &self.ledger,
            key,
            new,
            &self.claimant,
            Policy::default(),
        )
        .await
        .map_err(anyhow::Error::msg)
    }
}

async fn qualify(cmd: QualifyCmd) -> Result<ExitCode> {
    match cmd {
        QualifyCmd::Create {
            name,
            description,
            sandbox,
        } => {
            let id = MTurk::from_env(sandbox)?
                .create_qualification_type(&name, &description, None)
                .await?;
            println!("{id}");
        }
        QualifyCmd::Grant {
            qualification,
            value,
            notify,
            sandbox,
            workers,
        } => {
            let client = MTurk::from_env(sandbox)?;
            for w in &workers {
                client
                    .grant_qualification(&qualification, w, value, notify)
                    .await?;
                println!("granted {qualification} = {value} to {w}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
