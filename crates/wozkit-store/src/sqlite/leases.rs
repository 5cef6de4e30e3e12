//! Evaluation items and their leases on SQLite. Every change (registering items, claiming,
//! submitting, returning) is a write request applied by the single writer inside its batch
//! transaction, so each one is serialised with every other write: a claim's eligibility query
//! and its insert see every lease written before it, in earlier batches and earlier in its own
//! batch, and nothing is acknowledged before the batch commits. Reads go to the read pool.

use async_trait::async_trait;
use sqlx::SqliteConnection;
use wozkit_core::event::ItemPool;

use super::ops::{AppendEvents, Apply};
use super::writer::BatchState;
use crate::codec::{self, EncodedEvent, to_i64};
use crate::error::{Result, StoreError};
use crate::model::{ClaimRequest, EvalItem, Lease, LeaseState, NewEvent, SubmitOutcome};

/// The `leases` columns, in the order `codec::lease_from_row` reads them by name.
pub(super) const LEASE_COLUMNS: &str = "id, study_id, item_id, worker, pool, dialogues, \
     claimed_at_ms, expires_at_ms, state";

/// The `WHERE` clause of a claim's candidate query over `eval_items i`: items of the pool (`?3`)
/// in the study (`?1`) with room at time `?4` (gold items always have room) that the worker
/// (`?2`) may see — never leased to them, no dialogue shared with any of their leases.
macro_rules! eligible_items {
    () => {
        "WHERE i.study_id = ?1 AND i.pool = ?3 \
           AND (i.pool = 'gold' OR (SELECT COUNT(*) FROM leases l \
                 WHERE l.study_id = ?1 AND l.item_id = i.item_id AND (l.state = 'done' \
                   OR (l.state = 'leased' AND l.expires_at_ms > ?4))) < i.needed) \
           AND NOT EXISTS (SELECT 1 FROM leases w \
                           WHERE w.study_id = ?1 AND w.worker = ?2 AND w.item_id = i.item_id) \
           AND NOT EXISTS (SELECT 1 FROM eval_item_dialogues d \
                           WHERE d.study_id = ?1 AND d.item_id = i.item_id \
                             AND d.dialogue_id IN ( \
                                 SELECT j.value FROM leases w, json_each(w.dialogues) j \
                                 WHERE w.study_id = ?1 AND w.worker = ?2))"
    };
}

/// Insert or update a study's items and their dialogue rows.
pub(super) struct RegisterItems {
    pub study_id: String,
    /// `(item, dialogues as JSON)`.
    pub items: Vec<(EvalItem, String)>,
}

#[async_trait]
impl Apply for RegisterItems {
    type Output = ();
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<()>, sqlx::Error> {
        for (item, dialogues) in &self.items {
            sqlx::query(
                "INSERT INTO eval_items (study_id, item_id, pool, needed, dialogues) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (study_id, item_id) DO UPDATE SET \
                 pool = excluded.pool, needed = excluded.needed, dialogues = excluded.dialogues",
            )
            .bind(self.study_id.as_str())
            .bind(item.id.as_str())
            .bind(item.pool.as_str())
            .bind(i64::from(item.needed))
            .bind(dialogues.as_str())
            .execute(&mut *conn)
            .await?;
            sqlx::query("DELETE FROM eval_item_dialogues WHERE study_id = ?1 AND item_id = ?2")
                .bind(self.study_id.as_str())
                .bind(item.id.as_str())
                .execute(&mut *conn)
                .await?;
            for dialogue in &item.dialogues {
                sqlx::query(
                    "INSERT INTO eval_item_dialogues (study_id, item_id, dialogue_id) \
                     VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                )
                .bind(self.study_id.as_str())
                .bind(item.id.as_str())
                .bind(dialogue.as_str())
                .execute(&mut *conn)
                .await?;
            }
        }
        Ok(Ok(()))
    }
}

/// Give a worker the next eligible item under a new lease (see [`ClaimStore::claim`]).
///
/// [`ClaimStore::claim`]: crate::ClaimStore::claim
pub(super) struct Claim(pub ClaimRequest);

#[async_trait]
impl Apply for Claim {
    type Output = Option<Lease>;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<Option<Lease>>, sqlx::Error> {
        let req = &self.0;
        let times = to_i64("claim time", req.now_ms).and_then(|now| {
            let expires = req.now_ms.saturating_add(req.lease_ms);
            Ok((now, to_i64("lease expiry time", expires)?))
        });
        let (now, expires) = match times {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        if let Some(max) = req.max_per_worker {
            let held: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM leases WHERE study_id = ?1 AND worker = ?2 AND pool = 'item'",
            )
            .bind(req.study_id.as_str())
            .bind(req.worker.as_str())
            .fetch_one(&mut *conn)
            .await?;
            if held >= i64::from(max) {
                return Ok(Ok(None));
            }
        }
        let candidate = candidate(conn, req, now).await?;
        let Some((item_id, dialogues)) = candidate else {
            return Ok(Ok(None));
        };
        let done = sqlx::query(
            "INSERT INTO leases (id, study_id, item_id, worker, pool, dialogues, claimed_at_ms, \
             expires_at_ms, state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'leased') \
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
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(Err(StoreError::Conflict {
                what: "lease",
                key: req.lease_id.clone(),
            }));
        }
        add_taken(conn, &req.study_id, &item_id, 1).await?;
        Ok(codec::granted_lease(req, item_id, &dialogues, expires).map(Some))
    }
}

/// The item a claim leases, with its dialogues: the first eligible one of the worker's
/// preference, else the pool's eligible item with the fewest judgments done or leased.
async fn candidate(
    conn: &mut SqliteConnection,
    req: &ClaimRequest,
    now: i64,
) -> Result<Option<(String, String)>, sqlx::Error> {
    // With a preference, the listed items first: each looked up by its key, in the list's
    // order (`?5`, a JSON array of item ids; a repeated id is simply tried again).
    let mut candidate: Option<(String, String)> = None;
    if !req.prefer.is_empty() {
        let prefer = serde_json::Value::from(req.prefer.clone()).to_string();
        candidate = sqlx::query_as(concat!(
            "SELECT i.item_id, i.dialogues FROM json_each(?5) p \
             JOIN eval_items i ON i.study_id = ?1 AND i.item_id = p.value ",
            eligible_items!(),
            " ORDER BY p.key LIMIT 1"
        ))
        .bind(req.study_id.as_str())
        .bind(req.worker.as_str())
        .bind(req.pool.as_str())
        .bind(now)
        .bind(prefer)
        .fetch_optional(&mut *conn)
        .await?;
    }
    // Eligible items of the pool, fewest done plus open leases first, then by id: a walk of
    // `eval_items_by_taken` that stops at the first item with room (done plus live leases
    // under `needed`, a range of `leases_by_item`) the worker may see. After a preference
    // that found nothing, no listed item is eligible, so this gives an unlisted one.
    if candidate.is_none() {
        candidate = sqlx::query_as(concat!(
            "SELECT i.item_id, i.dialogues FROM eval_items i ",
            eligible_items!(),
            " ORDER BY i.taken, i.item_id LIMIT 1"
        ))
        .bind(req.study_id.as_str())
        .bind(req.worker.as_str())
        .bind(req.pool.as_str())
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
    }
    Ok(candidate)
}

/// The callback that turns a submit's outcome into the events to append.
pub(super) type EventsFor = Box<dyn FnOnce(SubmitOutcome) -> Vec<NewEvent> + Send>;

/// Close a lease with a judgment and append the caller's events (see [`ClaimStore::submit`]). The
/// output is the outcome, and for a stored judgment the first `seq` and the events appended.
///
/// [`ClaimStore::submit`]: crate::ClaimStore::submit
pub(super) struct Submit {
    pub lease_id: String,
    pub now_ms: u64,
    pub session: String,
    pub events: Option<EventsFor>,
}

/// What a submit stored: the outcome, then the first `seq` and the events (none if closed).
pub(super) type Submitted = (SubmitOutcome, u64, Vec<NewEvent>);

#[async_trait]
impl Apply for Submit {
    type Output = Submitted;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        state: &mut BatchState,
    ) -> Result<Result<Submitted>, sqlx::Error> {
        let now = match to_i64("submit time", self.now_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let lease: Option<(String, String, String, i64, String)> = sqlx::query_as(
            "SELECT study_id, item_id, pool, expires_at_ms, state FROM leases WHERE id = ?1",
        )
        .bind(self.lease_id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
        let Some((study_id, item_id, pool, expires_at, lease_state)) = lease else {
            return Ok(Err(StoreError::NotFound {
                what: "lease",
                id: self.lease_id.clone(),
            }));
        };
        let lease_state = match codec::parse_lease_state(&lease_state) {
            Ok(LeaseState::Leased) => LeaseState::Leased,
            Ok(closed) => return Ok(Ok((SubmitOutcome::AlreadyClosed(closed), 0, Vec::new()))),
            Err(e) => return Ok(Err(e)),
        };
        let outcome = if pool == ItemPool::Gold.as_str() || expires_at > now {
            SubmitOutcome::Counted
        } else {
            late_outcome(conn, &study_id, &item_id, &self.lease_id, now).await?
        };
        let events = self.events.take().map_or_else(Vec::new, |f| f(outcome));
        let rows: Vec<EncodedEvent> = match codec::encode_events(&events) {
            Ok(rows) => rows,
            Err(e) => return Ok(Err(e)),
        };
        // The log must exist before anything is written, so a refusal stores nothing.
        if state.last_seq(conn, &self.session).await?.is_none() {
            return Ok(Err(StoreError::UnknownSession(self.session.clone())));
        }
        let first = if rows.is_empty() {
            0
        } else {
            let mut append = AppendEvents {
                session: self.session.clone(),
                rows,
                after: None,
            };
            match append.apply(conn, state).await? {
                Ok(first) => first,
                Err(e) => return Ok(Err(e)),
            }
        };
        let closed = match outcome {
            SubmitOutcome::Surplus => LeaseState::Surplus,
            _ => LeaseState::Done,
        };
        sqlx::query("UPDATE leases SET state = ?2, closed_at_ms = ?3 WHERE id = ?1 AND state = ?4")
            .bind(self.lease_id.as_str())
            .bind(closed.as_str())
            .bind(now)
            .bind(lease_state.as_str())
            .execute(&mut *conn)
            .await?;
        if closed == LeaseState::Surplus {
            // An open lease closed without counting: the item's share is given back.
            add_taken(conn, &study_id, &item_id, -1).await?;
        }
        Ok(Ok((outcome, first, events)))
    }
}

/// The outcome of a judgment submitted after its lease `lease_id` expired: counted while the
/// item still needs judgments beyond those done or leased by others, else surplus.
async fn late_outcome(
    conn: &mut SqliteConnection,
    study_id: &str,
    item_id: &str,
    lease_id: &str,
    now: i64,
) -> Result<SubmitOutcome, sqlx::Error> {
    let (taken, needed): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM leases WHERE study_id = ?1 AND item_id = ?2 \
                   AND id <> ?4 \
                   AND (state = 'done' OR (state = 'leased' AND expires_at_ms > ?3))), \
                (SELECT needed FROM eval_items WHERE study_id = ?1 AND item_id = ?2)",
    )
    .bind(study_id)
    .bind(item_id)
    .bind(now)
    .bind(lease_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(if taken < needed {
        SubmitOutcome::Counted
    } else {
        SubmitOutcome::Surplus
    })
}

/// Give an open lease back; the output says whether it was open.
pub(super) struct ReturnLease {
    pub lease_id: String,
    pub now_ms: u64,
}

#[async_trait]
impl Apply for ReturnLease {
    type Output = bool;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<bool>, sqlx::Error> {
        let now = match to_i64("return time", self.now_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let returned: Option<(String, String)> = sqlx::query_as(
            "UPDATE leases SET state = 'returned', closed_at_ms = ?2 \
             WHERE id = ?1 AND state = 'leased' RETURNING study_id, item_id",
        )
        .bind(self.lease_id.as_str())
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some((study_id, item_id)) = &returned {
            add_taken(conn, study_id, item_id, -1).await?;
        }
        Ok(Ok(returned.is_some()))
    }
}

/// Moves an item's `taken` (done plus open leases) by `delta`.
async fn add_taken(
    conn: &mut SqliteConnection,
    study_id: &str,
    item_id: &str,
    delta: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE eval_items SET taken = taken + ?3 WHERE study_id = ?1 AND item_id = ?2")
        .bind(study_id)
        .bind(item_id)
        .bind(delta)
        .execute(conn)
        .await?;
    Ok(())
}
