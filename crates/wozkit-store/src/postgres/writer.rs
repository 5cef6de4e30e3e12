//! The PostgreSQL append writer: one task per store that group-commits appends. It takes every
//! append already queued (up to `max_batch`) and writes them in ONE transaction:
//!
//! 1. `SELECT … FOR UPDATE` locks the batch's session rows in id order (a fixed order, so two
//!    instances locking overlapping sessions wait for each other instead of deadlocking) and
//!    reads their `last_seq` counters;
//! 2. numbers each request's events after its session's counter, in arrival order;
//! 3. writes the new counters and all events with two array statements;
//! 4. commits (one WAL flush for the batch) and answers each request.
//!
//! The counters live in the database under the row lock, so instances sharing the database
//! number a session's events without gaps or duplicates; one counter per session row is bumped
//! in the same transaction as the inserts, so a failure leaves both unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::{PgConnection, PgPool};
use tokio::sync::{mpsc, oneshot};
use wozkit_core::event::EVENT_SCHEMA_VERSION;

use crate::codec::EncodedEvent;
use crate::error::{Result, StoreError};

/// What the store handle sends to the writer.
pub(super) enum Msg {
    Append(AppendRequest),
    /// Commit everything sent before, then stop.
    Close(oneshot::Sender<()>),
}

/// Events for one session, answered with the first `seq` assigned, or `None` when `once` names
/// a key already used in the session (nothing is appended then).
pub(super) struct AppendRequest {
    pub append: Append,
    pub reply: oneshot::Sender<Result<Option<u64>>>,
}

/// Events for one session.
pub(super) struct Append {
    pub session: String,
    pub rows: Vec<EncodedEvent>,
    /// The request's key for `append_once`: inserted under the unique `(session_id, key)`
    /// constraint in the batch's transaction.
    pub once: Option<String>,
    /// Only if the log still ends at this `seq` (`EventStore::append_after`).
    pub after: Option<u64>,
}

/// Runs until every store handle is gone or a [`Msg::Close`] arrives.
pub(super) async fn run(pool: PgPool, mut inbox: mpsc::Receiver<Msg>, max_batch: usize) {
    let mut batch: Vec<AppendRequest> = Vec::with_capacity(max_batch);
    let mut close_reply = None;
    while close_reply.is_none() {
        let Some(first) = inbox.recv().await else {
            break;
        };
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Append(request) => batch.push(request),
                Msg::Close(reply) => {
                    close_reply = Some(reply);
                    break;
                }
            }
            if batch.len() < max_batch {
                next = inbox.try_recv().ok();
            }
        }
        if batch.is_empty() {
            continue;
        }
        match commit(&pool, &batch).await {
            Ok(outcomes) => {
                for (request, outcome) in batch.drain(..).zip(outcomes) {
                    // The caller may have given up waiting; the write stands regardless.
                    let _ = request.reply.send(outcome);
                }
            }
            Err(err) => {
                let err = Arc::new(err);
                for request in batch.drain(..) {
                    let _ = request
                        .reply
                        .send(Err(StoreError::Database(Arc::clone(&err))));
                }
            }
        }
    }
    inbox.close();
    if let Some(reply) = close_reply {
        let _ = reply.send(());
    }
}

/// Writes one batch; the outer error fails the whole batch, the inner results are per request.
async fn commit(
    pool: &PgPool,
    batch: &[AppendRequest],
) -> Result<Vec<Result<Option<u64>>>, sqlx::Error> {
    let appends: Vec<&Append> = batch.iter().map(|r| &r.append).collect();
    let mut tx = pool.begin().await?;
    let (outcomes, wrote) = write_appends(&mut tx, &appends).await?;
    if wrote {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok(outcomes)
}

/// Numbers and inserts `batch`'s events inside the caller's transaction (the writer's batch, or
/// a submit's): locks the sessions' rows, assigns `seq` after their counters and bumps them.
/// Returns the per-append outcomes and whether anything was written.
pub(super) async fn write_appends(
    tx: &mut PgConnection,
    batch: &[&Append],
) -> Result<(Vec<Result<Option<u64>>>, bool), sqlx::Error> {
    let mut ids: Vec<&str> = batch.iter().map(|r| r.session.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();

    let counters: Vec<(String, i64)> = sqlx::query_as(
        "SELECT id, last_seq FROM sessions WHERE id = ANY($1) ORDER BY id FOR UPDATE",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?;
    let mut last_seq: HashMap<String, i64> = counters.into_iter().collect();

    let total: usize = batch.iter().map(|r| r.rows.len()).sum();
    let mut columns = EventColumns::with_capacity(total);
    let mut outcomes = Vec::with_capacity(batch.len());
    for request in batch {
        let Some(last) = last_seq.get_mut(&request.session) else {
            outcomes.push(Err(StoreError::UnknownSession(request.session.clone())));
            continue;
        };
        if let Some(after) = request
            .after
            .filter(|a| i64::try_from(*a).ok() != Some(*last))
        {
            outcomes.push(Err(StoreError::LogMoved {
                session: request.session.clone(),
                after,
                last: u64::try_from(*last).unwrap_or(0),
            }));
            continue;
        }
        if let Some(key) = &request.once
            && !first_time(tx, &request.session, key).await?
        {
            outcomes.push(Ok(None));
            continue;
        }
        let first = *last + 1;
        columns.push(request, first);
        *last += request.rows.len() as i64;
        outcomes.push(
            u64::try_from(first)
                .map(Some)
                .map_err(|_| StoreError::Corrupt {
                    what: "session last seq",
                    detail: format!("{}: negative value {}", request.session, first - 1),
                }),
        );
    }
    if columns.seqs.is_empty() && batch.iter().all(|r| r.once.is_none()) {
        return Ok((outcomes, false));
    }
    write_columns(tx, &last_seq, &columns).await?;
    Ok((outcomes, true))
}

/// Records an append's `once` key for its session: false when it was recorded before (the
/// append is done already).
async fn first_time(tx: &mut PgConnection, session: &str, key: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO append_keys (session_id, key) VALUES ($1, $2) \
         ON CONFLICT (session_id, key) DO NOTHING",
    )
    .bind(session)
    .bind(key)
    .execute(&mut *tx)
    .await?;
    Ok(done.rows_affected() != 0)
}

/// A batch's events as the columns of one multi-row insert.
struct EventColumns<'a> {
    sessions: Vec<&'a str>,
    seqs: Vec<i64>,
    at_ms: Vec<i64>,
    actors: Vec<&'a str>,
    payloads: Vec<&'a str>,
}

impl<'a> EventColumns<'a> {
    /// Empty columns with room for `total` events.
    fn with_capacity(total: usize) -> Self {
        EventColumns {
            sessions: Vec::with_capacity(total),
            seqs: Vec::with_capacity(total),
            at_ms: Vec::with_capacity(total),
            actors: Vec::with_capacity(total),
            payloads: Vec::with_capacity(total),
        }
    }

    /// Adds `request`'s events, numbered from `first`.
    fn push(&mut self, request: &'a Append, first: i64) {
        for (seq, row) in (first..).zip(&request.rows) {
            self.sessions.push(&request.session);
            self.seqs.push(seq);
            self.at_ms.push(row.at_ms);
            self.actors.push(&row.actor);
            self.payloads.push(&row.payload);
        }
    }
}

/// Moves the sessions' counters to `last_seq` (those that changed) and inserts the events.
async fn write_columns(
    tx: &mut PgConnection,
    last_seq: &HashMap<String, i64>,
    columns: &EventColumns<'_>,
) -> Result<(), sqlx::Error> {
    let (counter_ids, counter_values): (Vec<&str>, Vec<i64>) = last_seq
        .iter()
        .map(|(id, last)| (id.as_str(), *last))
        .unzip();
    sqlx::query(
        "UPDATE sessions s SET last_seq = c.last_seq \
         FROM UNNEST($1::text[], $2::bigint[]) AS c(id, last_seq) \
         WHERE s.id = c.id AND s.last_seq <> c.last_seq",
    )
    .bind(&counter_ids)
    .bind(&counter_values)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO events (session_id, seq, v, at_ms, actor, payload) \
         SELECT t.session_id, t.seq, $2, t.at_ms, t.actor, t.payload \
         FROM UNNEST($1::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[]) \
              AS t(session_id, seq, at_ms, actor, payload)",
    )
    .bind(&columns.sessions)
    .bind(i64::from(EVENT_SCHEMA_VERSION))
    .bind(&columns.seqs)
    .bind(&columns.at_ms)
    .bind(&columns.actors)
    .bind(&columns.payloads)
    .execute(&mut *tx)
    .await?;
    Ok(())
}
