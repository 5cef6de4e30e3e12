//! Evaluation items and their leases on PostgreSQL, exact with several instances sharing the
//! database under READ COMMITTED. Two kinds of lock keep the counts right:
//!
//! - the item row (`eval_items`, `SELECT … FOR UPDATE`): every operation that changes an item's
//!   leases (claim, submit, return) takes it first, so a count made after taking it sees every
//!   committed change to that item and none can commit until this transaction ends;
//! - a transaction-scoped advisory lock per (study, worker), taken by `claim` before anything
//!   else, so one worker's concurrent claims run one after the other and the worker rules
//!   (never the same item or dialogue twice, `max_per_worker`) are checked against all of the
//!   worker's committed leases.
//!
//! A claim is one call of the database function `wozkit_claim` (migration 0008), which does
//! what follows inside the database, so no lock is held across a round trip to this process.
//! It picks its candidate with `FOR UPDATE OF i SKIP LOCKED LIMIT 1` (claims for different
//! items do not queue behind each other), then recounts the item's leases in a new statement,
//! whose snapshot includes every commit made before the lock was granted. An item found full is
//! released (its block's subtransaction rolled back) and the next one tried. Only when every eligible item is
//! locked by someone else does a claim wait, on the best of them, so a busy item is not mistaken
//! for a full one. A claim holds at most one item lock at a time and takes the worker lock
//! first; submit and return take one item lock and then (submit) the session row: locks are
//! always taken in the order worker, item, session, so these operations cannot deadlock.

use sqlx::{AssertSqlSafe, PgConnection, PgPool};
use wozkit_core::event::{Event, ItemPool};

use super::writer::{Append, write_appends};
use crate::codec::{self, to_i64};
use crate::error::{Result, StoreError};
use crate::model::{ClaimRequest, EvalItem, ItemCount, Lease, LeaseState, NewEvent, SubmitOutcome};

/// The `leases` columns, in the order `codec::lease_from_row` reads them by name.
const LEASE_COLUMNS: &str = "id, study_id, item_id, worker, pool, dialogues, claimed_at_ms, \
     expires_at_ms, state";

pub(super) async fn register_items(
    pool: &PgPool,
    study_id: &str,
    items: &[EvalItem],
) -> Result<()> {
    // A fixed order, so two registrations of overlapping items wait instead of deadlocking.
    let mut items: Vec<&EvalItem> = items.iter().collect();
    items.sort_by(|a, b| a.id.cmp(&b.id));
    let mut tx = pool.begin().await?;
    for item in items {
        sqlx::query(
            "INSERT INTO eval_items (study_id, item_id, pool, needed, dialogues) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (study_id, item_id) DO UPDATE SET \
             pool = excluded.pool, needed = excluded.needed, dialogues = excluded.dialogues",
        )
        .bind(study_id)
        .bind(item.id.as_str())
        .bind(item.pool.as_str())
        .bind(i64::from(item.needed))
        .bind(codec::dialogues_json(&item.dialogues)?)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM eval_item_dialogues WHERE study_id = $1 AND item_id = $2")
            .bind(study_id)
            .bind(item.id.as_str())
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO eval_item_dialogues (study_id, item_id, dialogue_id) \
             SELECT DISTINCT $1, $2, d FROM UNNEST($3::text[]) AS d",
        )
        .bind(study_id)
        .bind(item.id.as_str())
        .bind(&item.dialogues)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// One statement: the claim runs inside the database (`wozkit_claim`, migration 0008), so its
/// locks are held only while it computes, never across a round trip to this process.
pub(super) async fn claim(pool: &PgPool, req: &ClaimRequest) -> Result<Option<Lease>> {
    let now = to_i64("claim time", req.now_ms)?;
    let expires = to_i64("lease expiry time", req.now_ms.saturating_add(req.lease_ms))?;
    let (status, item_id, dialogues): (String, Option<String>, Option<String>) = sqlx::query_as(
        "SELECT o_status, o_item, o_dialogues FROM wozkit_claim($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(req.study_id.as_str())
    .bind(req.worker.as_str())
    .bind(req.pool.as_str())
    .bind(now)
    .bind(expires)
    .bind(req.lease_id.as_str())
    .bind(req.max_per_worker.map(i64::from))
    .bind(&req.prefer)
    .fetch_one(pool)
    .await?;
    let (item_id, dialogues) = match (status.as_str(), item_id, dialogues) {
        ("leased", Some(item_id), Some(dialogues)) => (item_id, dialogues),
        ("none", _, _) => return Ok(None),
        ("conflict", _, _) => {
            return Err(StoreError::Conflict {
                what: "lease",
                key: req.lease_id.clone(),
            });
        }
        (other, _, _) => {
            return Err(StoreError::Corrupt {
                what: "claim outcome",
                detail: format!("wozkit_claim answered {other:?}"),
            });
        }
    };
    codec::granted_lease(req, item_id, &dialogues, expires).map(Some)
}

/// Locks the lease's item row and returns the lease as it stands under that lock, or `None`
/// for an unknown lease.
async fn lock_lease(tx: &mut PgConnection, lease_id: &str) -> Result<Option<Lease>> {
    let key: Option<(String, String)> =
        sqlx::query_as("SELECT study_id, item_id FROM leases WHERE id = $1")
            .bind(lease_id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some((study_id, item_id)) = key else {
        return Ok(None);
    };
    sqlx::query("SELECT 1 FROM eval_items WHERE study_id = $1 AND item_id = $2 FOR UPDATE")
        .bind(study_id.as_str())
        .bind(item_id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
    let sql = format!("SELECT {LEASE_COLUMNS} FROM leases WHERE id = $1");
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(lease_id)
        .fetch_one(&mut *tx)
        .await?;
    codec::lease_from_row(&row).map(Some)
}

/// The outcome of a judgment submitted after its lease expired: counted while the item still
/// needs judgments beyond those done or leased by others, else surplus.
async fn late_outcome(
    tx: &mut PgConnection,
    lease: &Lease,
    lease_id: &str,
    now: i64,
) -> Result<SubmitOutcome> {
    let (taken, needed): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM leases WHERE study_id = $1 AND item_id = $2 \
                   AND id <> $4 \
                   AND (state = 'done' OR (state = 'leased' AND expires_at_ms > $3))), \
                (SELECT needed FROM eval_items WHERE study_id = $1 AND item_id = $2)",
    )
    .bind(lease.study_id.as_str())
    .bind(lease.item_id.as_str())
    .bind(now)
    .bind(lease_id)
    .fetch_one(&mut *tx)
    .await?;
    Ok(if taken < needed {
        SubmitOutcome::Counted
    } else {
        SubmitOutcome::Surplus
    })
}

pub(super) async fn submit(
    pool: &PgPool,
    lease_id: &str,
    now_ms: u64,
    session: &str,
    events: Box<dyn FnOnce(SubmitOutcome) -> Vec<NewEvent> + Send>,
) -> Result<(SubmitOutcome, Vec<Event>)> {
    let now = to_i64("submit time", now_ms)?;
    let mut tx = pool.begin().await?;
    let Some(lease) = lock_lease(&mut tx, lease_id).await? else {
        tx.rollback().await?;
        return Err(StoreError::NotFound {
            what: "lease",
            id: lease_id.to_owned(),
        });
    };
    if lease.state != LeaseState::Leased {
        tx.rollback().await?;
        return Ok((SubmitOutcome::AlreadyClosed(lease.state), Vec::new()));
    }
    let outcome = if lease.pool == ItemPool::Gold || lease.expires_at_ms > now_ms {
        SubmitOutcome::Counted
    } else {
        late_outcome(&mut tx, &lease, lease_id, now).await?
    };
    let events = events(outcome);
    let append = Append {
        session: session.to_owned(),
        rows: codec::encode_events(&events)?,
        once: None,
        after: None,
    };
    let first = if append.rows.is_empty() {
        let known: Option<i32> = sqlx::query_scalar("SELECT 1 FROM sessions WHERE id = $1")
            .bind(session)
            .fetch_optional(&mut *tx)
            .await?;
        known.map(|_| 0)
    } else {
        let (mut outcomes, _) = write_appends(&mut tx, &[&append]).await?;
        match outcomes.pop() {
            Some(Ok(first)) => first,
            Some(Err(e)) => {
                tx.rollback().await?;
                return Err(e);
            }
            None => None,
        }
    };
    let Some(first) = first else {
        tx.rollback().await?;
        return Err(StoreError::UnknownSession(session.to_owned()));
    };
    let closed = match outcome {
        SubmitOutcome::Surplus => LeaseState::Surplus,
        _ => LeaseState::Done,
    };
    sqlx::query("UPDATE leases SET state = $2, closed_at_ms = $3 WHERE id = $1")
        .bind(lease_id)
        .bind(closed.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await?;
    if closed == LeaseState::Surplus {
        // An open lease closed without counting: the item's share is given back.
        add_taken(&mut tx, &lease.study_id, &lease.item_id, -1).await?;
    }
    tx.commit().await?;
    Ok((outcome, codec::stored_events(session, first, events)))
}

pub(super) async fn return_lease(pool: &PgPool, lease_id: &str, now_ms: u64) -> Result<bool> {
    let now = to_i64("return time", now_ms)?;
    let mut tx = pool.begin().await?;
    match lock_lease(&mut tx, lease_id).await? {
        Some(lease) if lease.state == LeaseState::Leased => {
            sqlx::query("UPDATE leases SET state = 'returned', closed_at_ms = $2 WHERE id = $1")
                .bind(lease_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            add_taken(&mut tx, &lease.study_id, &lease.item_id, -1).await?;
            tx.commit().await?;
            Ok(true)
        }
        _ => {
            tx.rollback().await?;
            Ok(false)
        }
    }
}

/// Moves an item's `taken` (done plus open leases) by `delta`; the caller holds the item row.
async fn add_taken(tx: &mut PgConnection, study_id: &str, item_id: &str, delta: i64) -> Result<()> {
    sqlx::query("UPDATE eval_items SET taken = taken + $3 WHERE study_id = $1 AND item_id = $2")
        .bind(study_id)
        .bind(item_id)
        .bind(delta)
        .execute(tx)
        .await?;
    Ok(())
}

pub(super) async fn lease(pool: &PgPool, lease_id: &str) -> Result<Option<Lease>> {
    let sql = format!("SELECT {LEASE_COLUMNS} FROM leases WHERE id = $1");
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(lease_id)
        .fetch_optional(pool)
        .await?;
    row.map(|r| codec::lease_from_row(&r)).transpose()
}

pub(super) async fn open_lease(
    pool: &PgPool,
    study_id: &str,
    worker: &str,
) -> Result<Option<Lease>> {
    let sql = format!(
        "SELECT {LEASE_COLUMNS} FROM leases WHERE study_id = $1 AND worker = $2 \
         AND state = 'leased' ORDER BY claimed_at_ms DESC, id DESC LIMIT 1"
    );
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(study_id)
        .bind(worker)
        .fetch_optional(pool)
        .await?;
    row.map(|r| codec::lease_from_row(&r)).transpose()
}

pub(super) async fn leases(pool: &PgPool, study_id: &str) -> Result<Vec<Lease>> {
    let sql = format!(
        "SELECT {LEASE_COLUMNS} FROM leases WHERE study_id = $1 ORDER BY claimed_at_ms, id"
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(study_id)
        .fetch_all(pool)
        .await?;
    rows.iter().map(codec::lease_from_row).collect()
}

pub(super) async fn item_counts(
    pool: &PgPool,
    study_id: &str,
    now_ms: u64,
) -> Result<Vec<ItemCount>> {
    let rows = sqlx::query(AssertSqlSafe(codec::item_counts_sql("$1", "$2")))
        .bind(study_id)
        .bind(to_i64("time", now_ms)?)
        .fetch_all(pool)
        .await?;
    rows.iter().map(codec::item_count_from_row).collect()
}
