//! Room ownership among instances sharing one store (`docs/scale-out.md`, "Room leases").
//!
//! A live session's room runs on exactly one instance: the one holding its row in the store's
//! room leases. This instance leases a room before it runs it (a new room when it is paired, a
//! logged one before it is rebuilt), renews all its leases together every third of the lease
//! length, and takes over rooms whose owner stopped renewing once their lease has run out. A
//! room whose lease another instance took (this one stalled past its lease) stops at once
//! without storing anything; a room that ends gives its lease back.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::FutureExt;
use wozkit_store::StoreError;
use wozkit_store::store::RoomLease;

use crate::app::{AppState, now_ms};

/// Most rooms taken over in one store call.
const CLAIM_BATCH: u32 = 1000;

/// Who runs `session`'s room and where to reach it: the lease holder's instance id and
/// advertised URL, and until when the lease holds (a lease in the past means its owner stopped
/// renewing and the next heartbeat of any instance takes the room over). `None` when no
/// instance holds it (the session ended, or its room has not been started or taken over yet).
pub async fn owner_of(app: &AppState, session: &str) -> Result<Option<RoomLease>, StoreError> {
    app.store.room_owner(session).await
}

/// Whether `lease` names this instance.
pub fn is_mine(app: &AppState, lease: &RoomLease) -> bool {
    lease.instance_id == app.tunables.instance_id
}

/// Takes (or renews) this instance's lease of `session`'s room; `false` when another live
/// instance holds it. The only instance on its store takes every lease (any other holder is an
/// earlier run of it), so a participant coming back before the rooms are resumed at start is
/// not refused.
pub(crate) async fn acquire(app: &AppState, session: &str) -> Result<bool, StoreError> {
    let now = now_ms();
    let expired_by = if app.tunables.sole_instance {
        i64::MAX as u64
    } else {
        now
    };
    app.store
        .acquire_room(
            session,
            &app.tunables.instance_id,
            &app.tunables.advertise_url,
            expired_by,
            now + app.tunables.room_lease_ms,
        )
        .await
}

/// Gives back this instance's lease of a room whose session has ended.
pub(crate) async fn release_if_ended(app: &AppState, session: &str) {
    match app.store.session(session).await {
        Ok(Some(record)) if !record.is_live() => {
            if let Err(e) = app
                .store
                .release_room(session, &app.tunables.instance_id)
                .await
            {
                tracing::warn!(session, "cannot release the room's lease: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(session, "cannot read the session to release its lease: {e}"),
    }
}

/// Takes over the rooms nobody runs and rebuilds them. At start (`start = true`) this also
/// resumes the rooms this instance id still holds from an earlier run, and, for the only
/// instance on its store, every room whatever lease it has.
async fn take_over(app: &AppState, start: bool) -> Result<(), StoreError> {
    let t = &app.tunables;
    let now = now_ms();
    let until = now + t.room_lease_ms;
    let mut rooms = Vec::new();
    if start {
        rooms.extend(app.store.renew_rooms(&t.instance_id, until).await?);
    }
    // The only instance on the store: every lease is stale, every session old enough.
    let (expired_by, created_by) = if start && t.sole_instance {
        (i64::MAX as u64, i64::MAX as u64)
    } else {
        (now, now.saturating_sub(t.room_lease_ms))
    };
    loop {
        let claimed = app
            .store
            .claim_orphan_rooms(
                &t.instance_id,
                &t.advertise_url,
                expired_by,
                created_by,
                until,
                CLAIM_BATCH,
            )
            .await?;
        let full = claimed.len() == CLAIM_BATCH as usize;
        if !claimed.is_empty() {
            tracing::info!(
                rooms = claimed.len(),
                "taking over rooms whose lease ran out"
            );
        }
        rooms.extend(claimed);
        if !full {
            break;
        }
    }
    for id in rooms {
        if *app.shutdown.borrow() {
            break;
        }
        // One session that cannot be rebuilt (a panic included) does not keep the sweep from
        // the others.
        let opened = std::panic::AssertUnwindSafe(super::open(app, &id))
            .catch_unwind()
            .await;
        match opened {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!(session = id, "cannot resume session: {e}"),
            Err(panic) => {
                app.metrics.panicked("lease_sweep");
                tracing::error!(
                    session = id,
                    "rebuilding the session panicked: {}",
                    super::panic_message(&panic)
                );
            }
        }
    }
    Ok(())
}

/// Renews this instance's leases; stops the rooms in memory whose lease another instance
/// holds now. Only the renewal itself can fail this: a room whose owner cannot be read now (a
/// read pool starved under overload, say) is checked again at the next renewal, since one such
/// read failing must not count as leases lost and stop every room.
async fn renew(app: &AppState) -> Result<(), StoreError> {
    let t = &app.tunables;
    let held: HashSet<String> = app
        .store
        .renew_rooms(&t.instance_id, now_ms() + t.room_lease_ms)
        .await?
        .into_iter()
        .collect();
    for id in app.rooms.ids() {
        if held.contains(&id) {
            continue;
        }
        // Not renewed: lost to another instance, or a new room whose lease is being taken.
        match app.store.room_owner(&id).await {
            Ok(Some(lease)) if !is_mine(app, &lease) => {
                tracing::warn!(
                    session = id,
                    owner = lease.instance_id,
                    "another instance took this room over after its lease ran out; stopping it here"
                );
                app.rooms.stop(&id);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(
                session = id,
                "cannot read who holds this room's lease ({e}); checked again at the next renewal"
            ),
        }
    }
    Ok(())
}

/// Resumes the rooms this instance may run, then keeps its leases alive and takes over rooms
/// of instances that stopped, every third of the lease length, until the server stops.
pub(crate) fn start(app: AppState) {
    tokio::spawn(async move {
        if let Err(e) = take_over(&app, true).await {
            tracing::error!("cannot resume live sessions: {e}");
        }
        let every = Duration::from_millis((app.tunables.room_lease_ms / 3).max(1));
        let mut renewed_at = now_ms();
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = app.stopping() => return,
            }
            match renew(&app).await {
                Ok(()) => renewed_at = now_ms(),
                Err(e) => {
                    tracing::error!("cannot renew room leases: {e}");
                    // Past the lease, other instances may be running these rooms already.
                    if now_ms() >= renewed_at + app.tunables.room_lease_ms {
                        tracing::error!("room leases not renewed in time; stopping every room");
                        for id in app.rooms.ids() {
                            app.rooms.stop(&id);
                        }
                    }
                    continue;
                }
            }
            if let Err(e) = take_over(&app, false).await {
                tracing::error!("cannot take over rooms: {e}");
            }
        }
    });
}
