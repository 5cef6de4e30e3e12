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
//! A claim picks its candidate with `FOR UPDATE OF i SKIP LOCKED LIMIT 1` (claims for different
//! items do not queue behind each other), then recounts the item's leases in a new statement,
//! whose snapshot includes every commit made before the lock was granted. An item found full is
//! released (rolled back to a savepoint) and the next one tried. Only when every eligible item is
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

/// Eligible items of a study's pool for a worker, best first: `$1` study, `$2` worker, `$3`
/// pool, `$4` now, `$5` items already found full by this claim. `{from}` and `{order}` are
/// [`USUAL`] or [`PREFERRED`], `{lock}` the locking clause.
const CANDIDATES: &str = "SELECT i.item_id FROM {from} \
     WHERE i.study_id = $1 AND i.pool = $3 AND NOT (i.item_id = ANY($5)) \
       AND (i.pool = 'gold' OR (SELECT COUNT(*) FROM leases l \
             WHERE l.study_id = $1 AND l.item_id = i.item_id \
               AND (l.state = 'done' OR (l.state = 'leased' AND l.expires_at_ms > $4))) \
           < i.needed) \
       AND NOT EXISTS (SELECT 1 FROM leases w \
                       WHERE w.study_id = $1 AND w.worker = $2 AND w.item_id = i.item_id) \
       AND NOT EXISTS (SELECT 1 FROM eval_item_dialogues d \
                       WHERE d.study_id = $1 AND d.item_id = i.item_id \
                         AND d.dialogue_id IN ( \
                             SELECT jsonb_array_elements_text(w.dialogues::jsonb) FROM leases w \
                             WHERE w.study_id = $1 AND w.worker = $2)) \
     ORDER BY {order} \
     FOR UPDATE OF i {lock} LIMIT 1";

/// `{from}` and `{order}` of [`CANDIDATES`] for every item of the pool, fewest done plus open
/// leases first, then by id: a walk of `eval_items_by_taken`.
const USUAL: (&str, &str) = ("eval_items i", "i.taken, i.item_id");

/// `{from}` and `{order}` of [`CANDIDATES`] for the items listed in `$6` (a text array), each
/// looked up by its key, in the list's order.
const PREFERRED: (&str, &str) = (
    "UNNEST($6::text[]) WITH ORDINALITY AS p (item_id, rank) \
     JOIN eval_items i ON i.study_id = $1 AND i.item_id = p.item_id",
    "p.rank",
);

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

pub(super) async fn claim(pool: &PgPool, req: &ClaimRequest) -> Result<Option<Lease>> {
    let now = to_i64("claim time", req.now_ms)?;
    let expires = to_i64("lease expiry time", req.now_ms.saturating_add(req.lease_ms))?;
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(10) || $2, 0))")
        .bind(req.study_id.as_str())
        .bind(req.worker.as_str())
        .execute(&mut *tx)
        .await?;
    if let Some(max) = req.max_per_worker {
        let held: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM leases WHERE study_id = $1 AND worker = $2 AND pool = 'item'",
        )
        .bind(req.study_id.as_str())
        .bind(req.worker.as_str())
        .fetch_one(&mut *tx)
        .await?;
        if held >= i64::from(max) {
            tx.rollback().await?;
            return Ok(None);
        }
    }
    let mut full: Vec<String> = Vec::new();
    loop {
        sqlx::query("SAVEPOINT candidate").execute(&mut *tx).await?;
        let Some(item_id) = next_candidate(&mut tx, req, now, &full).await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        // A new statement: its snapshot holds every commit made before the lock was granted.
        let (pool_name, needed, taken, dialogues): (String, i64, i64, String) = sqlx::query_as(
            "SELECT i.pool, i.needed, \
                    (SELECT COUNT(*) FROM leases l WHERE l.study_id = $1 AND l.item_id = $2 \
                       AND (l.state = 'done' OR (l.state = 'leased' AND l.expires_at_ms > $3))), \
                    i.dialogues \
             FROM eval_items i WHERE i.study_id = $1 AND i.item_id = $2",
        )
        .bind(req.study_id.as_str())
        .bind(item_id.as_str())
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        if pool_name != ItemPool::Gold.as_str() && taken >= needed {
            // Full after all: let the item go and try the next one.
            sqlx::query("ROLLBACK TO SAVEPOINT candidate")
                .execute(&mut *tx)
                .await?;
            full.push(item_id);
            continue;
        }
        let done = sqlx::query(
            "INSERT INTO leases (id, study_id, item_id, worker, pool, dialogues, claimed_at_ms, \
             expires_at_ms, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'leased') \
             ON CONFLICT DO NOTHING",
        )
        .bind(req.lease_id.as_str())
        .bind(req.study_id.as_str())
        .bind(item_id.as_str())
        .bind(req.worker.as_str())
        .bind(req.pool.as_str())
        .bind(dialogues.as_str())
        .bind(now)
        .bind(expires)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            tx.rollback().await?;
            return Err(StoreError::Conflict {
                what: "lease",
                key: req.lease_id.clone(),
            });
        }
        add_taken(&mut tx, &req.study_id, &item_id, 1).await?;
        tx.commit().await?;
        let dialogues = serde_json::from_str(&dialogues).map_err(|e| StoreError::Corrupt {
            what: "item dialogues",
            detail: format!("{}/{item_id}: {e}", req.study_id),
        })?;
        return Ok(Some(Lease {
            id: req.lease_id.clone(),
            study_id: req.study_id.clone(),
            item_id,
            worker: req.worker.clone(),
            pool: req.pool,
            dialogues,
            claimed_at_ms: req.now_ms,
            expires_at_ms: u64::try_from(expires).unwrap_or(u64::MAX),
            state: LeaseState::Leased,
        }));
    }
}

/// The best eligible item not in `full`, locked: one nobody else holds if there is one,
/// otherwise the best held one, waiting for its lock. With a preference, each pass tries the
/// listed items first, then (none of them eligible, or all held) the usual order.
async fn next_candidate(
    tx: &mut PgConnection,
    req: &ClaimRequest,
    now: i64,
    full: &[String],
) -> Result<Option<String>> {
    let orders: &[(&str, &str)] = if req.prefer.is_empty() {
        &[USUAL]
    } else {
        &[PREFERRED, USUAL]
    };
    for lock in ["SKIP LOCKED", ""] {
        for &(from, order) in orders {
            let sql = CANDIDATES
                .replace("{from}", from)
                .replace("{order}", order)
                .replace("{lock}", lock);
            let query = sqlx::query_scalar(AssertSqlSafe(sql))
                .bind(req.study_id.as_str())
                .bind(req.worker.as_str())
                .bind(req.pool.as_str())
                .bind(now)
                .bind(full);
            let query = if (from, order) == PREFERRED {
                query.bind(&req.prefer)
            } else {
                query
            };
            let item: Option<String> = query.fetch_optional(&mut *tx).await?;
            if item.is_some() {
                return Ok(item);
            }
        }
    }
    Ok(None)
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
        if taken < needed {
            SubmitOutcome::Counted
        } else {
            SubmitOutcome::Surplus
        }
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
