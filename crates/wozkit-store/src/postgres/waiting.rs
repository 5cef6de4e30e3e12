//! The lobby on PostgreSQL: the `waiting` table (migration 0006), shared by every instance.
//!
//! [`join`] runs in one transaction that first takes a transaction-scoped advisory lock on the
//! queue (study and pair key): joins of one queue run one after the other, so two complementary
//! participants arriving at the same moment on two instances are paired rather than both queued
//! (each would otherwise miss the other's uncommitted row). The partner is picked with
//! `FOR UPDATE SKIP LOCKED` and deleted in the same statement, so a waiter is taken at most once
//! even by a statement that does not hold the queue lock (a participant's own other tab, which
//! deletes by participant id). A role switch ([`switch`]) takes the same lock, so it reads the
//! queue and the presence and changes them as one step against every join.
//!
//! Notices: [`notify`] is `pg_notify` on the channel [`CHANNEL`]; [`listen`] holds a
//! `PgListener` (its own connection, reconnecting after a loss) and forwards every payload.

use sqlx::postgres::{PgConnection, PgListener, PgPool, PgRow};
use sqlx::{AssertSqlSafe, Row};
use tokio::sync::mpsc;
use wozkit_core::event::Role;

use crate::codec::to_i64;
use crate::error::{Result, StoreError};
use crate::store::{
    Joined, JoinedLobby, LOBBY_NOTICE_MAX, NewWaiter, RoleCounts, RoleSwitch, Waiter, switch_is_due,
};

/// The `LISTEN/NOTIFY` channel of lobby notices.
pub const CHANNEL: &str = "wozkit_lobby";

/// Notices received but not yet taken by the server before the listener waits.
const NOTICE_QUEUE: usize = 1024;

/// The columns of a [`Waiter`], read by name in [`waiter_from_row`].
const COLUMNS: &str = "participant, study_id, pair_key, role, worker, instance, conn, front, ord, \
     since_ms, heard_at_ms";

fn corrupt(what: &'static str, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        what,
        detail: detail.into(),
    }
}

fn unsigned(what: &'static str, value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| corrupt(what, format!("negative value {value}")))
}

fn waiter_from_row(row: &PgRow) -> Result<Waiter> {
    let role: String = row.try_get("role")?;
    let pair: String = row.try_get("pair_key")?;
    Ok(Waiter {
        participant: row.try_get("participant")?,
        study_id: row.try_get("study_id")?,
        pair_key: (!pair.is_empty()).then_some(pair),
        role: Role::parse(&role).ok_or_else(|| corrupt("waiting role", role))?,
        worker: row.try_get("worker")?,
        instance: row.try_get("instance")?,
        conn: unsigned("waiting conn", row.try_get("conn")?)?,
        front: row.try_get("front")?,
        order: unsigned("waiting order", row.try_get("ord")?)?,
        since_ms: unsigned("waiting since", row.try_get("since_ms")?)?,
        heard_at_ms: unsigned("waiting heard", row.try_get("heard_at_ms")?)?,
    })
}

/// Takes the transaction-scoped advisory lock of one queue (study and pair key).
async fn lock_queue(tx: &mut PgConnection, study_id: &str, pair: &str) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('lobby:' || $1 || ':' || $2, 0))")
        .bind(study_id)
        .bind(pair)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// See [`LobbyStore::join_lobby`](crate::LobbyStore::join_lobby).
pub(super) async fn join(pool: &PgPool, e: &NewWaiter, live_since_ms: u64) -> Result<JoinedLobby> {
    let conn_id = to_i64("waiting conn", e.conn)?;
    let since = to_i64("waiting since", e.since_ms)?;
    let heard = to_i64("waiting heard", e.heard_at_ms)?;
    let live = to_i64("lobby live cut-off", live_since_ms)?;
    let pair = e.pair_key.as_deref().unwrap_or("");
    let mut tx = pool.begin().await?;
    lock_queue(&mut tx, &e.study_id, pair).await?;
    // Another tab of the same participant gives up its place to this one.
    let sql = format!("DELETE FROM waiting WHERE participant = $1 RETURNING {COLUMNS}");
    let replaced = sqlx::query(AssertSqlSafe(sql))
        .bind(e.participant.as_str())
        .fetch_optional(&mut *tx)
        .await?
        .as_ref()
        .map(waiter_from_row)
        .transpose()?;
    // The wait counts from the participant's first tab.
    let since = match &replaced {
        Some(r) => since.min(to_i64("waiting since", r.since_ms)?),
        None => since,
    };
    let sql = format!(
        "DELETE FROM waiting WHERE participant = ( \
           SELECT participant FROM waiting \
           WHERE study_id = $1 AND pair_key = $2 AND role = $3 AND participant <> $4 \
             AND (worker IS NULL OR $5::text IS NULL OR worker <> $5) AND heard_at_ms >= $6 \
           ORDER BY front DESC, since_ms, ord LIMIT 1 FOR UPDATE SKIP LOCKED) \
         RETURNING {COLUMNS}"
    );
    let taken = sqlx::query(AssertSqlSafe(sql))
        .bind(e.study_id.as_str())
        .bind(pair)
        .bind(e.role.other().as_str())
        .bind(e.participant.as_str())
        .bind(e.worker.as_deref())
        .bind(live)
        .fetch_optional(&mut *tx)
        .await?;
    if let Some(row) = taken {
        let partner = waiter_from_row(&row)?;
        tx.commit().await?;
        return Ok(JoinedLobby {
            joined: Joined::Taken(partner),
            replaced,
        });
    }
    let sql = format!(
        "INSERT INTO waiting (participant, study_id, pair_key, role, worker, instance, conn, \
         front, ord, since_ms, heard_at_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nextval('waiting_ord'), $9, $10) \
         RETURNING {COLUMNS}"
    );
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(e.participant.as_str())
        .bind(e.study_id.as_str())
        .bind(pair)
        .bind(e.role.as_str())
        .bind(e.worker.as_deref())
        .bind(e.instance.as_str())
        .bind(conn_id)
        .bind(e.front)
        .bind(since)
        .bind(heard)
        .fetch_one(&mut *tx)
        .await?;
    let queued = waiter_from_row(&row)?;
    tx.commit().await?;
    Ok(JoinedLobby {
        joined: Joined::Queued(queued),
        replaced,
    })
}

/// Refreshes (`heard_at_ms: Some`) or removes (`None`) the place of one connection.
pub(super) async fn touch(
    pool: &PgPool,
    participant: &str,
    instance: &str,
    conn: u64,
    heard_at_ms: Option<u64>,
) -> Result<bool> {
    let conn = to_i64("waiting conn", conn)?;
    let done = match heard_at_ms {
        Some(at) => {
            sqlx::query(
                "UPDATE waiting SET heard_at_ms = GREATEST(heard_at_ms, $4) \
                 WHERE participant = $1 AND instance = $2 AND conn = $3",
            )
            .bind(participant)
            .bind(instance)
            .bind(conn)
            .bind(to_i64("waiting heard", at)?)
            .execute(pool)
            .await?
        }
        None => {
            sqlx::query(
                "DELETE FROM waiting WHERE participant = $1 AND instance = $2 AND conn = $3",
            )
            .bind(participant)
            .bind(instance)
            .bind(conn)
            .execute(pool)
            .await?
        }
    };
    Ok(done.rows_affected() > 0)
}

/// See [`LobbyStore::waiters`](crate::LobbyStore::waiters).
pub(super) async fn waiters(pool: &PgPool, study_id: Option<&str>) -> Result<Vec<Waiter>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM waiting WHERE ($1::text IS NULL OR study_id = $1) \
         ORDER BY study_id, pair_key, front DESC, since_ms, ord"
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(study_id)
        .fetch_all(pool)
        .await?;
    rows.iter().map(waiter_from_row).collect()
}

/// Participants present per role (see [`LobbyStore::lobby_presence`](crate::LobbyStore::lobby_presence)):
/// those who entered or changed role recently, and those holding a live place, each once.
const PRESENCE: &str = "SELECT role, COUNT(*) AS n FROM ( \
       SELECT id, role FROM participants WHERE study_id = $1 AND created_at_ms >= $2 \
         AND role IS NOT NULL AND session_id IS NULL AND completion_code IS NULL \
       UNION \
       SELECT id, role FROM participants WHERE study_id = $1 AND role_at_ms >= $2 \
         AND role IS NOT NULL AND session_id IS NULL AND completion_code IS NULL \
       UNION \
       SELECT p.id, p.role FROM waiting w JOIN participants p ON p.id = w.participant \
       WHERE w.study_id = $1 AND w.heard_at_ms >= $3 \
         AND p.role IS NOT NULL AND p.session_id IS NULL AND p.completion_code IS NULL \
     ) AS present GROUP BY role";

/// See [`LobbyStore::lobby_presence`](crate::LobbyStore::lobby_presence).
pub(super) async fn presence(
    conn: &mut PgConnection,
    study_id: &str,
    arrived_since_ms: u64,
    live_since_ms: u64,
) -> Result<RoleCounts> {
    let rows: Vec<(String, i64)> = sqlx::query_as(PRESENCE)
        .bind(study_id)
        .bind(to_i64("lobby arrival cut-off", arrived_since_ms)?)
        .bind(to_i64("lobby live cut-off", live_since_ms)?)
        .fetch_all(&mut *conn)
        .await?;
    let mut counts = RoleCounts::default();
    for (role, n) in rows {
        let role = Role::parse(&role).ok_or_else(|| corrupt("participant role", role))?;
        counts.add(role, unsigned("presence count", n)?);
    }
    Ok(counts)
}

/// See [`LobbyStore::switch_lobby_role`](crate::LobbyStore::switch_lobby_role): under the public queue's
/// lock, so no join of that queue runs between the reads and the change.
pub(super) async fn switch(pool: &PgPool, r: &RoleSwitch) -> Result<bool> {
    let conn_id = to_i64("waiting conn", r.conn)?;
    let live = to_i64("lobby live cut-off", r.live_since_ms)?;
    let at = to_i64("role change time", r.at_ms)?;
    let mut tx = pool.begin().await?;
    lock_queue(&mut tx, &r.study_id, "").await?;
    let sql = format!(
        "SELECT {COLUMNS} FROM waiting \
         WHERE study_id = $1 AND pair_key = '' AND role = $2 AND heard_at_ms >= $3 \
         ORDER BY front DESC, since_ms, ord"
    );
    let places = sqlx::query(AssertSqlSafe(sql))
        .bind(r.study_id.as_str())
        .bind(r.from.as_str())
        .bind(live)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(waiter_from_row)
        .collect::<Result<Vec<_>>>()?;
    let last = places.last().is_some_and(|w| {
        w.participant == r.participant && w.instance == r.instance && w.conn == r.conn
    });
    if !last {
        return Ok(false);
    }
    let present = presence(&mut tx, &r.study_id, r.arrived_since_ms, r.live_since_ms).await?;
    if !switch_is_due(places.len() as u64, present.of(r.from.other())) {
        return Ok(false);
    }
    let removed =
        sqlx::query("DELETE FROM waiting WHERE participant = $1 AND instance = $2 AND conn = $3")
            .bind(r.participant.as_str())
            .bind(r.instance.as_str())
            .bind(conn_id)
            .execute(&mut *tx)
            .await?;
    if removed.rows_affected() == 0 {
        // Taken by a statement without the queue lock (the participant's other tab).
        return Ok(false);
    }
    let changed = sqlx::query(
        "UPDATE participants SET role = $2, flow_step = $3, role_at_ms = $4 WHERE id = $1",
    )
    .bind(r.participant.as_str())
    .bind(r.from.other().as_str())
    .bind(r.flow_step.as_str())
    .bind(at)
    .execute(&mut *tx)
    .await?;
    if changed.rows_affected() == 0 {
        return Ok(false);
    }
    tx.commit().await?;
    Ok(true)
}

/// See [`LobbyStore::notify_lobby`](crate::LobbyStore::notify_lobby).
pub(super) async fn notify(pool: &PgPool, notice: &str) -> Result<bool> {
    if notice.len() > LOBBY_NOTICE_MAX {
        return Err(StoreError::OutOfRange {
            what: "lobby notice length",
            value: notice.len() as u64,
        });
    }
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(notice)
        .execute(pool)
        .await?;
    Ok(true)
}

/// See [`LobbyStore::listen_lobby`](crate::LobbyStore::listen_lobby). The listener stops when the
/// receiver is dropped; the receiver sees the end when the listener fails for good.
pub(super) async fn listen(pool: &PgPool) -> Result<mpsc::Receiver<String>> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    let (tx, rx) = mpsc::channel(NOTICE_QUEUE);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tx.closed() => return,
                got = listener.recv() => match got {
                    Ok(n) => {
                        if tx.send(n.payload().to_owned()).await.is_err() {
                            return;
                        }
                    }
                    // `recv` reconnects by itself after a lost connection; another error (the
                    // pool closed) ends the listener, and the receiver then sees the end.
                    Err(_) => return,
                },
            }
        }
    });
    Ok(rx)
}
