//! The lobby on SQLite: the `waiting` table (migration 0006). Every write goes through the
//! single writer, one request at a time inside its transaction, so "take a partner or queue
//! myself" is atomic without further locking. SQLite serves one process, so lobby notices stay
//! in that process ([`LobbyStore::notify_lobby`](crate::LobbyStore::notify_lobby) answers `false`).
//! A role switch reads the queue and the presence and changes them in one writer transaction,
//! so it is exact against concurrent joins in the same way.

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use wozkit_core::event::Role;

use super::ops::Apply;
use super::writer::BatchState;
use crate::codec::to_i64;
use crate::error::{Result, StoreError};
use crate::store::{Joined, JoinedLobby, NewWaiter, RoleCounts, RoleSwitch, Waiter, switch_is_due};

/// The columns of a [`Waiter`], in the order [`waiter_from_row`] reads them.
pub(super) const COLUMNS: &str = "participant, study_id, pair_key, role, worker, instance, conn, \
     front, ord, since_ms, heard_at_ms";

fn corrupt(what: &'static str, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        what,
        detail: detail.into(),
    }
}

fn unsigned(what: &'static str, value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| corrupt(what, format!("negative value {value}")))
}

/// A `waiting` row selected with [`COLUMNS`].
pub(super) fn waiter_from_row(row: &SqliteRow) -> Result<Waiter> {
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
        front: row.try_get::<i64, _>("front")? != 0,
        order: unsigned("waiting order", row.try_get("ord")?)?,
        since_ms: unsigned("waiting since", row.try_get("since_ms")?)?,
        heard_at_ms: unsigned("waiting heard", row.try_get("heard_at_ms")?)?,
    })
}

/// Takes a partner for `entry` or queues it.
pub(super) struct Join {
    pub entry: NewWaiter,
    pub live_since_ms: u64,
}

#[async_trait]
impl Apply for Join {
    type Output = JoinedLobby;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<JoinedLobby>, sqlx::Error> {
        let e = &self.entry;
        let (conn_id, since, heard, live) = match self.numbers() {
            Ok(numbers) => numbers,
            Err(err) => return Ok(Err(err)),
        };
        let pair = e.pair_key.as_deref().unwrap_or("");
        // Another tab of the same participant gives up its place to this one.
        let sql = format!("DELETE FROM waiting WHERE participant = ?1 RETURNING {COLUMNS}");
        let replaced = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(e.participant.as_str())
            .fetch_optional(&mut *conn)
            .await?;
        let replaced = match replaced.as_ref().map(waiter_from_row).transpose() {
            Ok(w) => w,
            Err(err) => return Ok(Err(err)),
        };
        // The wait counts from the participant's first tab.
        let since = match &replaced {
            Some(r) => since.min(to_i64("waiting since", r.since_ms).unwrap_or(since)),
            None => since,
        };
        match take_partner(conn, e, pair, live).await? {
            Ok(Some(partner)) => {
                return Ok(Ok(JoinedLobby {
                    joined: Joined::Taken(partner),
                    replaced,
                }));
            }
            Ok(None) => {}
            Err(err) => return Ok(Err(err)),
        }
        let ord = queue(conn, e, pair, conn_id, since, heard).await?;
        let queued = Waiter {
            participant: e.participant.clone(),
            study_id: e.study_id.clone(),
            pair_key: e.pair_key.clone(),
            role: e.role,
            worker: e.worker.clone(),
            instance: e.instance.clone(),
            conn: e.conn,
            front: e.front,
            order: ord as u64,
            since_ms: since as u64,
            heard_at_ms: e.heard_at_ms,
        };
        Ok(Ok(JoinedLobby {
            joined: Joined::Queued(queued),
            replaced,
        }))
    }
}

impl Join {
    /// The entry's connection, start and last-heard times, and the lobby's live cut-off as
    /// SQLite integers; the first out of range is the error.
    fn numbers(&self) -> Result<(i64, i64, i64, i64)> {
        let e = &self.entry;
        let numbers = (
            to_i64("waiting conn", e.conn),
            to_i64("waiting since", e.since_ms),
            to_i64("waiting heard", e.heard_at_ms),
            to_i64("lobby live cut-off", self.live_since_ms),
        );
        match numbers {
            (Ok(a), Ok(b), Ok(c), Ok(d)) => Ok((a, b, c, d)),
            (a, b, c, d) => {
                let err = [a.err(), b.err(), c.err(), d.err()]
                    .into_iter()
                    .flatten()
                    .next();
                Err(err.expect("one number is out of range"))
            }
        }
    }
}

/// Takes the partner `e` pairs with out of the queue, if one waits (heard from since `live`):
/// the one in front, else the longest waiting.
async fn take_partner(
    conn: &mut SqliteConnection,
    e: &NewWaiter,
    pair: &str,
    live: i64,
) -> Result<Result<Option<Waiter>>, sqlx::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM waiting \
         WHERE study_id = ?1 AND pair_key = ?2 AND role = ?3 AND participant <> ?4 \
           AND (worker IS NULL OR ?5 IS NULL OR worker <> ?5) AND heard_at_ms >= ?6 \
         ORDER BY front DESC, since_ms, ord LIMIT 1"
    );
    let partner = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(e.study_id.as_str())
        .bind(pair)
        .bind(e.role.other().as_str())
        .bind(e.participant.as_str())
        .bind(e.worker.as_deref())
        .bind(live)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = partner else {
        return Ok(Ok(None));
    };
    let partner = match waiter_from_row(&row) {
        Ok(w) => w,
        Err(err) => return Ok(Err(err)),
    };
    sqlx::query("DELETE FROM waiting WHERE participant = ?1")
        .bind(partner.participant.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(Ok(Some(partner)))
}

/// Queues `e` behind everyone waiting: its place's order.
async fn queue(
    conn: &mut SqliteConnection,
    e: &NewWaiter,
    pair: &str,
    conn_id: i64,
    since: i64,
    heard: i64,
) -> Result<i64, sqlx::Error> {
    let ord: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(ord), 0) + 1 FROM waiting")
        .fetch_one(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO waiting (participant, study_id, pair_key, role, worker, instance, conn, \
         front, ord, since_ms, heard_at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )
    .bind(e.participant.as_str())
    .bind(e.study_id.as_str())
    .bind(pair)
    .bind(e.role.as_str())
    .bind(e.worker.as_deref())
    .bind(e.instance.as_str())
    .bind(conn_id)
    .bind(i64::from(e.front))
    .bind(ord)
    .bind(since)
    .bind(heard)
    .execute(&mut *conn)
    .await?;
    Ok(ord)
}

/// Refreshes (`heard_at_ms: Some`) or removes (`None`) the place of one connection.
pub(super) struct Touch {
    pub participant: String,
    pub instance: String,
    pub conn: u64,
    pub heard_at_ms: Option<u64>,
}

#[async_trait]
impl Apply for Touch {
    type Output = bool;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<bool>, sqlx::Error> {
        let conn_id = match to_i64("waiting conn", self.conn) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        let query = match self.heard_at_ms {
            Some(at) => {
                let at = match to_i64("waiting heard", at) {
                    Ok(t) => t,
                    Err(e) => return Ok(Err(e)),
                };
                sqlx::query(
                    "UPDATE waiting SET heard_at_ms = MAX(heard_at_ms, ?4) \
                     WHERE participant = ?1 AND instance = ?2 AND conn = ?3",
                )
                .bind(self.participant.as_str())
                .bind(self.instance.as_str())
                .bind(conn_id)
                .bind(at)
            }
            None => sqlx::query(
                "DELETE FROM waiting WHERE participant = ?1 AND instance = ?2 AND conn = ?3",
            )
            .bind(self.participant.as_str())
            .bind(self.instance.as_str())
            .bind(conn_id),
        };
        Ok(Ok(query.execute(&mut *conn).await?.rows_affected() > 0))
    }
}

/// Participants present per role (see [`LobbyStore::lobby_presence`](crate::LobbyStore::lobby_presence)):
/// those who entered or changed role recently, and those holding a live place, each once.
const PRESENCE: &str = "SELECT role, COUNT(*) AS n FROM ( \
       SELECT id, role FROM participants WHERE study_id = ?1 AND created_at_ms >= ?2 \
         AND role IS NOT NULL AND session_id IS NULL AND completion_code IS NULL \
       UNION \
       SELECT id, role FROM participants WHERE study_id = ?1 AND role_at_ms >= ?2 \
         AND role IS NOT NULL AND session_id IS NULL AND completion_code IS NULL \
       UNION \
       SELECT p.id, p.role FROM waiting w JOIN participants p ON p.id = w.participant \
       WHERE w.study_id = ?1 AND w.heard_at_ms >= ?3 \
         AND p.role IS NOT NULL AND p.session_id IS NULL AND p.completion_code IS NULL \
     ) AS present GROUP BY role";

/// See [`LobbyStore::lobby_presence`](crate::LobbyStore::lobby_presence); on any connection (the
/// reader pool, or the writer inside a switch). A database error is the outer error (it fails
/// a writer's batch); a bad value is the inner one.
pub(super) async fn presence(
    conn: &mut SqliteConnection,
    study_id: &str,
    arrived_since_ms: u64,
    live_since_ms: u64,
) -> Result<Result<RoleCounts>, sqlx::Error> {
    let (arrived, live) = match (
        to_i64("lobby arrival cut-off", arrived_since_ms),
        to_i64("lobby live cut-off", live_since_ms),
    ) {
        (Ok(a), Ok(l)) => (a, l),
        (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
    };
    let rows: Vec<(String, i64)> = sqlx::query_as(PRESENCE)
        .bind(study_id)
        .bind(arrived)
        .bind(live)
        .fetch_all(&mut *conn)
        .await?;
    let mut counts = RoleCounts::default();
    for (role, n) in rows {
        let Some(role) = Role::parse(&role) else {
            return Ok(Err(corrupt("participant role", role)));
        };
        match unsigned("presence count", n) {
            Ok(n) => counts.add(role, n),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(counts))
}

/// Moves a waiter in surplus to the other role (see
/// [`LobbyStore::switch_lobby_role`](crate::LobbyStore::switch_lobby_role)).
pub(super) struct Switch {
    pub req: RoleSwitch,
}

#[async_trait]
impl Apply for Switch {
    type Output = bool;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<bool>, sqlx::Error> {
        let r = &self.req;
        let numbers = (
            to_i64("waiting conn", r.conn),
            to_i64("lobby live cut-off", r.live_since_ms),
            to_i64("role change time", r.at_ms),
        );
        let (conn_id, live, at) = match numbers {
            (Ok(a), Ok(b), Ok(c)) => (a, b, c),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Ok(Err(e)),
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM waiting \
             WHERE study_id = ?1 AND pair_key = '' AND role = ?2 AND heard_at_ms >= ?3 \
             ORDER BY front DESC, since_ms, ord"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(r.study_id.as_str())
            .bind(r.from.as_str())
            .bind(live)
            .fetch_all(&mut *conn)
            .await?;
        let places = match rows.iter().map(waiter_from_row).collect::<Result<Vec<_>>>() {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let last = places.last().is_some_and(|w| {
            w.participant == r.participant && w.instance == r.instance && w.conn == r.conn
        });
        if !last {
            return Ok(Ok(false));
        }
        let present = match presence(conn, &r.study_id, r.arrived_since_ms, r.live_since_ms).await?
        {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        if !switch_is_due(places.len() as u64, present.of(r.from.other())) {
            return Ok(Ok(false));
        }
        sqlx::query("DELETE FROM waiting WHERE participant = ?1 AND instance = ?2 AND conn = ?3")
            .bind(r.participant.as_str())
            .bind(r.instance.as_str())
            .bind(conn_id)
            .execute(&mut *conn)
            .await?;
        let changed = sqlx::query(
            "UPDATE participants SET role = ?2, flow_step = ?3, role_at_ms = ?4 WHERE id = ?1",
        )
        .bind(r.participant.as_str())
        .bind(r.from.other().as_str())
        .bind(r.flow_step.as_str())
        .bind(at)
        .execute(&mut *conn)
        .await?;
        Ok(Ok(changed.rows_affected() > 0))
    }
}
