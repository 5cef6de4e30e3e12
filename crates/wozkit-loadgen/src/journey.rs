//! The life of one simulated participant: enter through the entry link, wait to be paired, play
//! in the room; when the session ends, come back as a new participant (a fresh entry link), so
//! the load stays steady however short the dialogues are. Failures are counted and retried a
//! few times after a pause; a participant that keeps failing gives up.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

use crate::Ctx;
use crate::error::Failure;
use crate::frames::{EndedFrame, ErrorFrame, SessionFrame, frame_type};
use crate::pages::{self, Arrived, Ws};
use crate::policy::{Dice, Role};
use crate::room::{self, Outcome};
use crate::stats::Recorder;
use crate::target::Target;

/// Consecutive failures after which a participant gives up.
const MAX_FAILURES: u32 = 3;
/// Pause before trying again after a failure.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Longest wait for a partner (the server's own waiting limit normally ends it first).
const PAIRING_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs participant `index` until the run stops or it gives up.
pub async fn participant(ctx: &Ctx, index: usize) {
    // Even participants play the user, odd ones the wizard: N/2 of each, so all can be paired.
    let role = if index.is_multiple_of(2) {
        Role::User
    } else {
        Role::Wizard
    };
    let mut dice = Dice::new(ctx.seed ^ (index as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
    // Pairs go round-robin over the URLs: a user and the wizard after it share one, so two
    // independent servers each get whole pairs.
    let url = &ctx.targets[crate::url_of(index, ctx.targets.len())];
    let stats = Recorder {
        all: &ctx.stats,
        url: &url.stats,
    };
    let mut stop = ctx.stop.clone();
    let mut first_visit = true;
    let mut failures = 0;
    for generation in 0u64.. {
        if *stop.borrow() {
            return;
        }
        let name = match generation {
            0 => format!("bench-{}-{index}", ctx.run_id),
            g => format!("bench-{}-{index}-{g}", ctx.run_id),
        };
        let visit = visit(
            ctx,
            &url.target,
            stats,
            &name,
            role,
            &mut dice,
            &mut stop,
            &mut first_visit,
        );
        match visit.await {
            Ok(Outcome::Stopped) => return,
            Ok(Outcome::Ended) => failures = 0,
            Err(f) => {
                if *stop.borrow() {
                    return;
                }
                stats.error(&f.code);
                ctx.log_failure(&name, &f);
                failures += 1;
                if failures >= MAX_FAILURES {
                    if first_visit {
                        stats.gave_up();
                    }
                    return;
                }
                tokio::select! {
                    () = tokio::time::sleep(RETRY_AFTER) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
}

/// One participation: entry link to the end of the session.
#[allow(clippy::too_many_arguments)]
async fn visit(
    ctx: &Ctx,
    target: &Target,
    stats: Recorder<'_>,
    name: &str,
    role: Role,
    dice: &mut Dice,
    stop: &mut watch::Receiver<bool>,
    first_visit: &mut bool,
) -> Result<Outcome, Failure> {
    // The gate bounds how many participants walk the HTTP pages at once, as a crowd arriving
    // over a few seconds would, rather than thousands of simultaneous handshakes.
    let Ok(permit) = ctx.gate.acquire().await else {
        return Ok(Outcome::Stopped);
    };
    let (conn, cookie, arrived) = pages::enter(target, name, role).await?;
    if arrived == Arrived::Waiting {
        let ws = pages::upgrade(target, conn.into_stream()?, &cookie).await?;
        drop(permit);
        if wait_for_partner(ws, stop).await?.is_none() {
            return Ok(Outcome::Stopped);
        }
    } else {
        drop(conn);
        drop(permit);
    }
    let Ok(permit) = ctx.gate.acquire().await else {
        return Ok(Outcome::Stopped);
    };
    let ws = pages::open_room(target, &cookie).await?;
    drop(permit);
    room::play(ctx, stats, ws, role, dice, stop, first_visit).await
}

/// The waiting room: `Some(session)` once paired, `None` if the run stopped first.
async fn wait_for_partner(
    mut ws: Ws,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<String>, Failure> {
    let deadline = tokio::time::sleep(PAIRING_TIMEOUT);
    tokio::pin!(deadline);
    loop {
        if *stop.borrow() {
            let _ = ws.close(None).await;
            return Ok(None);
        }
        let text = tokio::select! {
            msg = ws.next() => match msg {
                Some(Ok(Message::Text(t))) => t,
                Some(Ok(Message::Close(_))) | None => {
                    return Err(Failure::new("ws_closed", "the waiting room closed"));
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(Failure::new("ws_closed", e.to_string())),
            },
            () = &mut deadline => return Err(Failure::new("timeout", "no partner in time")),
            _ = stop.changed() => continue,
        };
        match frame_type(text.as_str()).as_deref() {
            Some("paired") => {
                let paired = serde_json::from_str::<SessionFrame>(text.as_str())
                    .map_err(|e| Failure::new("bad_frame", e.to_string()))?;
                return Ok(Some(paired.session));
            }
            Some("ended") => {
                let reason = serde_json::from_str::<EndedFrame>(text.as_str())
                    .map_or_else(|_| "unknown".to_string(), |e| e.reason);
                return Err(Failure::new(
                    reason,
                    "left the waiting room without a partner",
                ));
            }
            Some("error") => {
                let e = serde_json::from_str::<ErrorFrame>(text.as_str())
                    .map_err(|e| Failure::new("bad_frame", e.to_string()))?;
                return Err(Failure::new(e.code, e.message));
            }
            _ => {}
        }
    }
}
