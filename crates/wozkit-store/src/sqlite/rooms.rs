//! Room leases on SQLite (see [`RoomLeaseStore::acquire_room`](crate::RoomLeaseStore::acquire_room)). Every
//! change is a write request applied by the single writer inside its batch transaction, so
//! each conditional upsert sees every lease written before it; reads go to the read pool. One
//! process holds a data directory, so on SQLite the leases only ever name this instance (or
//! a previous run of it), but the same server code runs on both backends.

use async_trait::async_trait;
use sqlx::{Row, SqliteConnection};

use super::ops::Apply;
use super::writer::BatchState;
use crate::codec::to_i64;
use crate::error::{Result, StoreError};
use crate::store::RoomLease;

/// Takes or renews one room's lease if it is free, expired, or already the instance's.
pub(super) struct Acquire {
    pub session: String,
    pub instance: String,
    pub address: String,
    pub now_ms: u64,
    pub expires_at_ms: u64,
}

#[async_trait]
impl Apply for Acquire {
    type Output = bool;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<bool>, sqlx::Error> {
        let (now, until) = match times(self.now_ms, self.expires_at_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let done = sqlx::query(
            "INSERT INTO room_leases (session_id, instance_id, address, expires_at_ms) \
             VALUES (?1, ?2, ?3, ?5) ON CONFLICT (session_id) DO UPDATE SET \
             instance_id = excluded.instance_id, address = excluded.address, \
             expires_at_ms = excluded.expires_at_ms \
             WHERE room_leases.instance_id = excluded.instance_id \
                OR room_leases.expires_at_ms <= ?4",
        )
        .bind(self.session.as_str())
        .bind(self.instance.as_str())
        .bind(self.address.as_str())
        .bind(now)
        .bind(until)
        .execute(&mut *conn)
        .await?;
        Ok(Ok(done.rows_affected() > 0))
    }
}

/// Moves every lease of an instance to a new expiry, dropping those of ended sessions; the
/// output is the sessions it holds.
pub(super) struct Renew {
    pub instance: String,
    pub expires_at_ms: u64,
}

#[async_trait]
impl Apply for Renew {
    type Output = Vec<String>;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<Vec<String>>, sqlx::Error> {
        let until = match to_i64("room lease expiry", self.expires_at_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        // Rows of sessions that ended without their room giving the lease back (sessions not
        // run by a room) are dropped on the way.
        sqlx::query(
            "DELETE FROM room_leases WHERE instance_id = ?1 AND session_id IN \
             (SELECT id FROM sessions WHERE ended_at_ms IS NOT NULL)",
        )
        .bind(self.instance.as_str())
        .execute(&mut *conn)
        .await?;
        let mut held: Vec<String> = sqlx::query_scalar(
            "UPDATE room_leases SET expires_at_ms = ?2 WHERE instance_id = ?1 \
             RETURNING session_id",
        )
        .bind(self.instance.as_str())
        .bind(until)
        .fetch_all(&mut *conn)
        .await?;
        held.sort();
        Ok(Ok(held))
    }
}

/// Deletes an instance's lease of one room.
pub(super) struct Release {
    pub session: String,
    pub instance: String,
}

#[async_trait]
impl Apply for Release {
    type Output = bool;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<bool>, sqlx::Error> {
        let done =
            sqlx::query("DELETE FROM room_leases WHERE session_id = ?1 AND instance_id = ?2")
                .bind(self.session.as_str())
                .bind(self.instance.as_str())
                .execute(&mut *conn)
                .await?;
        Ok(Ok(done.rows_affected() > 0))
    }
}

/// Takes over live dialogue sessions whose room is unowned or whose lease expired.
pub(super) struct ClaimOrphans {
    pub instance: String,
    pub address: String,
    pub now_ms: u64,
    pub unowned_before_ms: u64,
    pub expires_at_ms: u64,
    pub limit: u32,
}

#[async_trait]
impl Apply for ClaimOrphans {
    type Output = Vec<String>;
    async fn apply(
        &mut self,
        conn: &mut SqliteConnection,
        _: &mut BatchState,
    ) -> Result<Result<Vec<String>>, sqlx::Error> {
        let (now, until) = match times(self.now_ms, self.expires_at_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let fresh = match to_i64("time", self.unowned_before_ms) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        // `WHERE true` keeps SQLite from reading `ON CONFLICT` as part of the SELECT's join.
        let mut claimed: Vec<String> = sqlx::query_scalar(
            "INSERT INTO room_leases (session_id, instance_id, address, expires_at_ms) \
             SELECT id, ?1, ?2, ?4 FROM ( \
                 SELECT s.id FROM sessions s LEFT JOIN room_leases r ON r.session_id = s.id \
                 WHERE s.ended_at_ms IS NULL AND s.kind = 'dialogue' \
                   AND ((r.session_id IS NULL AND s.created_at_ms <= ?6) \
                        OR r.expires_at_ms <= ?3) \
                 ORDER BY s.id LIMIT ?5) WHERE true \
             ON CONFLICT (session_id) DO UPDATE SET instance_id = excluded.instance_id, \
                 address = excluded.address, expires_at_ms = excluded.expires_at_ms \
             WHERE room_leases.expires_at_ms <= ?3 \
             RETURNING session_id",
        )
        .bind(self.instance.as_str())
        .bind(self.address.as_str())
        .bind(now)
        .bind(until)
        .bind(i64::from(self.limit))
        .bind(fresh)
        .fetch_all(&mut *conn)
        .await?;
        claimed.sort();
        Ok(Ok(claimed))
    }
}

/// The lease row of a session, read from `pool`.
pub(super) async fn owner(pool: &sqlx::SqlitePool, session: &str) -> Result<Option<RoomLease>> {
    let row = sqlx::query(
        "SELECT session_id, instance_id, address, expires_at_ms FROM room_leases \
         WHERE session_id = ?1",
    )
    .bind(session)
    .fetch_optional(pool)
    .await?;
    row.map(|r| {
        let expires: i64 = r.try_get("expires_at_ms")?;
        Ok(RoomLease {
            session_id: r.try_get("session_id")?,
            instance_id: r.try_get("instance_id")?,
            address: r.try_get("address")?,
            expires_at_ms: u64::try_from(expires).map_err(|_| StoreError::Corrupt {
                what: "room lease",
                detail: format!("negative expiry {expires} for session {session:?}"),
            })?,
        })
    })
    .transpose()
}

fn times(now_ms: u64, expires_at_ms: u64) -> Result<(i64, i64)> {
    Ok((
        to_i64("time", now_ms)?,
        to_i64("room lease expiry", expires_at_ms)?,
    ))
}
