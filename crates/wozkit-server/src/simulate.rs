//! Dry runs of a WoZ study with nobody (`wozkit simulate-users`): each dialogue is an ordinary
//! session of the store, played in an ordinary room by a simulated user in the user's seat and
//! the built-in wizard bot, or a system under test, in the wizard's, so it goes through the
//! engine, the log and the room's timers as a session of people does. It serves no HTTP: nobody
//! joins these rooms.
//!
//! The sessions are marked simulated by their user's seat (`simulated:NAME` in the log), which
//! the payment table and the human-only reports leave out.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};
use wozkit_core::event::EndReason;
use wozkit_store::Store;

use crate::app::{AppState, Config};
use crate::error::StartError;
use crate::room::{ModelUser, SystemWizard};

/// What to run.
pub struct Request {
    /// The served study whose dialogues are played (its id).
    pub study: String,
    pub user: Arc<ModelUser>,
    /// A system under test in the wizard's seat; the built-in wizard bot when `None`.
    pub wizard: Option<Arc<SystemWizard>>,
    pub dialogues: u32,
    /// Dialogues played at the same time (at least 1).
    pub concurrency: u32,
    /// Dialogue `i` is seeded with `seed + i`, so a run is repeated exactly with the same
    /// endpoint answers.
    pub seed: u64,
    /// A dialogue not ended by then is left as it is (still live in the store) and reported.
    pub timeout: Duration,
}

/// One dialogue played.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Played {
    pub session: String,
    /// How it ended; `None` when it had not ended at the timeout, or could not be started.
    pub end: Option<EndReason>,
    /// Why it could not be started or followed, if so.
    pub error: Option<String>,
}

/// Plays the dialogues of `req` on `store` with the studies of `config`, then closes the store.
pub async fn run(
    config: Config,
    store: Arc<dyn Store>,
    req: Request,
) -> Result<Vec<Played>, StartError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    let app = AppState::new(config, store.clone(), stop_rx, alive_tx).await?;
    let Some(study) = app.study(Some(&req.study)) else {
        return Err(StartError::NoStudy);
    };
    let slots = Arc::new(Semaphore::new(req.concurrency.max(1) as usize));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..req.dialogues {
        let permit = slots.clone().acquire_owned().await;
        let (app, study, user) = (app.clone(), study.clone(), req.user.clone());
        let wizard = req.wizard.clone();
        let seed = req.seed.wrapping_add(u64::from(i));
        let timeout = req.timeout;
        tasks.spawn(async move {
            let played = play(&app, &study, seed, (user, wizard), timeout).await;
            drop(permit);
            (i, played)
        });
    }
    let mut out: Vec<(u32, Played)> = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(p) => out.push(p),
            Err(e) => out.push((
                u32::MAX,
                Played {
                    session: String::new(),
                    end: None,
                    error: Some(format!("a dialogue's task failed: {e}")),
                },
            )),
        }
    }
    out.sort_by_key(|(i, _)| *i);
    let _ = stop_tx.send(true);
    drop(app);
    let _ = tokio::time::timeout(Duration::from_secs(5), alive_rx.recv()).await;
    store.close().await;
    Ok(out.into_iter().map(|(_, p)| p).collect())
}

/// Plays one dialogue and waits for its end.
async fn play(
    app: &AppState,
    study: &Arc<wozkit_core::load::LoadedStudy>,
    seed: u64,
    (user, wizard): (Arc<ModelUser>, Option<Arc<SystemWizard>>),
    timeout: Duration,
) -> Played {
    let session = match crate::pairing::simulated_pair(app, study, seed, user, wizard).await {
        Ok(id) => id,
        Err(e) => {
            return Played {
                session: String::new(),
                end: None,
                error: Some(format!("cannot start a dialogue: {e}")),
            };
        }
    };
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match app.store.session(&session).await {
            Ok(Some(record)) if record.ended.is_some() => {
                return Played {
                    session,
                    end: record.ended.map(|e| e.reason),
                    error: None,
                };
            }
            Ok(_) => {}
            Err(e) => {
                return Played {
                    session,
                    end: None,
                    error: Some(format!("cannot read the session: {e}")),
                };
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Played {
                session,
                end: None,
                error: Some(format!("not ended after {} s", timeout.as_secs())),
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
