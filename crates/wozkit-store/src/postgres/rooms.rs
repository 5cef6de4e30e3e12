//! Room leases on PostgreSQL (see [`RoomLeaseStore::acquire_room`](crate::RoomLeaseStore::acquire_room)), for
//! several instances sharing the database. Each change is one statement: a conditional upsert
//! (`INSERT ... ON CONFLICT DO UPDATE ... WHERE`) locks the row it updates and re-checks its
//! condition on the latest committed version, so two instances racing for a room cannot both
//! win, and a row inserted concurrently by another instance makes the loser's update re-check
//! (and fail) against it.

use sqlx::{PgPool, Row};

use crate::codec::to_i64;
use crate::error::{Result, StoreError};
use crate::store::RoomLease;

/// See [`RoomLeaseStore::acquire_room`](crate::RoomLeaseStore::acquire_room).
pub(super) async fn acquire(
    pool: &PgPool,
    session: &str,
    instance: &str,
    address: &str,
    now_ms: u64,
    expires_at_ms: u64,
) -> Result<bool> {
    let done = sqlx::query(
        "INSERT INTO room_leases (session_id, instance_id, address, expires_at_ms) \
         VALUES ($1, $2, $3, $5) ON CONFLICT (session_id) DO UPDATE SET \
         instance_id = excluded.instance_id, address = excluded.address, \
         expires_at_ms = excluded.expires_at_ms \
         WHERE room_leases.instance_id = excluded.instance_id \
            OR room_leases.expires_at_ms <= $4",
    )
    .bind(session)
    .bind(instance)
    .bind(address)
    .bind(to_i64("time", now_ms)?)
    .bind(to_i64("room lease expiry", expires_at_ms)?)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// See [`RoomLeaseStore::renew_rooms`](crate::RoomLeaseStore::renew_rooms). The rows of sessions that ended
/// are deleted in the same statement; the update leaves them to the delete (a statement must
/// not change a row twice).
pub(super) async fn renew(
    pool: &PgPool,
    instance: &str,
    expires_at_ms: u64,
) -> Result<Vec<String>> {
    let mut held: Vec<String> = sqlx::query_scalar(
        "WITH gone AS ( \
             DELETE FROM room_leases r USING sessions s \
             WHERE r.instance_id = $1 AND s.id = r.session_id AND s.ended_at_ms IS NOT NULL \
             RETURNING r.session_id) \
         UPDATE room_leases SET expires_at_ms = $2 \
         WHERE instance_id = $1 AND session_id NOT IN (SELECT session_id FROM gone) \
         RETURNING session_id",
    )
    .bind(instance)
    .bind(to_i64("room lease expiry", expires_at_ms)?)
    .fetch_all(pool)
    .await?;
    held.sort();
    Ok(held)
}

/// See [`RoomLeaseStore::release_room`](crate::RoomLeaseStore::release_room).
pub(super) async fn release(pool: &PgPool, session: &str, instance: &str) -> Result<bool> {
    let done = sqlx::query("DELETE FROM room_leases WHERE session_id = $1 AND instance_id = $2")
        .bind(session)
        .bind(instance)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// See [`RoomLeaseStore::room_owner`](crate::RoomLeaseStore::room_owner).
pub(super) async fn owner(pool: &PgPool, session: &str) -> Result<Option<RoomLease>> {
    let row = sqlx::query(
        "SELECT session_id, instance_id, address, expires_at_ms FROM room_leases \
         WHERE session_id = $1",
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

/// See [`RoomLeaseStore::claim_orphan_rooms`](crate::RoomLeaseStore::claim_orphan_rooms). Candidates are read
/// without locks; the upsert re-checks each one's expiry under its row lock, so a room another
/// instance claimed or renewed in between is skipped (not returned).
pub(super) async fn claim_orphans(
    pool: &PgPool,
    instance: &str,
    address: &str,
    now_ms: u64,
    unowned_before_ms: u64,
    expires_at_ms: u64,
    limit: u32,
) -> Result<Vec<String>> {
    let mut claimed: Vec<String> = sqlx::query_scalar(
        "INSERT INTO room_leases (session_id, instance_id, address, expires_at_ms) \
         SELECT s.id, $1, $2, $4 FROM sessions s LEFT JOIN room_leases r ON r.session_id = s.id \
         WHERE s.ended_at_ms IS NULL AND s.kind = 'dialogue' \
           AND ((r.session_id IS NULL AND s.created_at_ms <= $6) OR r.expires_at_ms <= $3) \
         ORDER BY s.id LIMIT $5 \
         ON CONFLICT (session_id) DO UPDATE SET instance_id = excluded.instance_id, \
             address = excluded.address, expires_at_ms = excluded.expires_at_ms \
         WHERE room_leases.expires_at_ms <= $3 \
         RETURNING session_id",
    )
    .bind(instance)
    .bind(address)
    .bind(to_i64("time", now_ms)?)
    .bind(to_i64("room lease expiry", expires_at_ms)?)
    .bind(i64::from(limit))
    .bind(to_i64("time", unowned_before_ms)?)
    .fetch_all(pool)
    .await?;
    claimed.sort();
    Ok(claimed)
}
