//! One client per system: concurrency limit with a bounded queue, timeout per attempt, retries with
//! jittered exponential backoff, and a circuit breaker.
//!
//! A call goes: breaker (refuse at once while open) → queue for a slot (refuse at once when the queue
//! is full) → attempts, each under the timeout, retried while the error is retryable → the outcome
//! is reported to the breaker.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, mpsc};

use crate::spec::{Limits, SystemSpec};
use crate::{
    BuiltinSystem, OpenAiSystem, Reply, System, SystemError, Turn, Unprompted, WebhookSystem,
    WebsocketSystem,
};

/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// A system behind its limits. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct Client {
    name: String,
    limits: Limits,
    system: Arc<dyn System>,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    breaker: Breaker,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.name)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Client {
    /// Builds the client for the system `name` declared by `spec`. Reads the API key from the
    /// environment variable the spec names, if any.
    pub fn new(name: &str, spec: &SystemSpec) -> Result<Client, SystemError> {
        let config = |detail: String| SystemError::Config {
            system: name.to_string(),
            detail,
        };
        spec.validate().map_err(config)?;
        let system: Arc<dyn System> = match spec {
            SystemSpec::Openai(s) => Arc::new(OpenAiSystem::new(name, s)?),
            SystemSpec::Http(s) => Arc::new(WebhookSystem::new(name, s)?),
            SystemSpec::Builtin(s) => {
                let timeout_ms = s.limits.timeout_s * 1000.0;
                if s.delay_ms as f64 >= timeout_ms {
                    return Err(config(format!(
                        "`delay_ms` ({}) is not shorter than `limits.timeout_s` ({}s): every \
                         reply would time out",
                        s.delay_ms, s.limits.timeout_s
                    )));
                }
                Arc::new(BuiltinSystem::new(s))
            }
            SystemSpec::Websocket(s) => Arc::new(WebsocketSystem::new(name, s)?),
            // Answered by people at the server's desk: the server puts its own system behind
            // `Client::with_system`.
            SystemSpec::Human(_) => {
                return Err(config(
                    "a `human` system is answered at the server's desk, not by a client".into(),
                ));
            }
        };
        Ok(Client::with_system(name, spec.limits().clone(), system))
    }

    /// Puts any [`System`] behind `limits` (assumed valid, see [`Limits::validate`]).
    pub fn with_system(name: &str, limits: Limits, system: Arc<dyn System>) -> Client {
        Client {
            name: name.to_string(),
            permits: Arc::new(Semaphore::new(limits.concurrency)),
            waiting: AtomicUsize::new(0),
            breaker: Breaker::new(limits.breaker.failures, secs(limits.breaker.cooldown_s)),
            limits,
            system,
        }
    }

    /// The system's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A receiver of what the system says without being asked (see
    /// [`WebsocketSystem::subscribe_unprompted`]); `None` when the system cannot.
    pub fn subscribe_unprompted(&self) -> Option<broadcast::Receiver<Unprompted>> {
        self.system.subscribe_unprompted()
    }

    /// Opens the system's long-lived connection now, within the timeout of one attempt, so that
    /// it can speak before it is first asked. Does nothing for request/response systems.
    pub async fn connect(&self) -> Result<(), SystemError> {
        tokio::time::timeout(secs(self.limits.timeout_s), self.system.connect())
            .await
            .unwrap_or_else(|_| {
                Err(SystemError::Timeout {
                    system: self.name.clone(),
                    seconds: self.limits.timeout_s,
                })
            })
    }

    /// Asks the system for its reply to `history`, within the limits.
    pub async fn reply(&self, dialogue_id: &str, history: &[Turn]) -> Result<Reply, SystemError> {
        let never_shown = AtomicBool::new(false);
        self.call(&never_shown, || self.system.reply(dialogue_id, history))
            .await
    }

    /// Like [`Client::reply`], forwarding text deltas to `deltas` as they arrive. An attempt that
    /// failed after it had shown some text is not retried (the viewer would see the text twice).
    pub async fn reply_stream(
        &self,
        dialogue_id: &str,
        history: &[Turn],
        deltas: mpsc::Sender<String>,
    ) -> Result<Reply, SystemError> {
        let shown = AtomicBool::new(false);
        self.call(&shown, || async {
            let (tx, mut rx) = mpsc::channel::<String>(64);
            let attempt = self.system.reply_stream(dialogue_id, history, tx);
            let forward = async {
                while let Some(delta) = rx.recv().await {
                    shown.store(true, Ordering::SeqCst);
                    let _ = deltas.send(delta).await;
                }
            };
            tokio::join!(attempt, forward).0
        })
        .await
    }

    /// Runs one call through breaker, queue and retries. `shown` turns true once part of the reply
    /// was shown; no retry after that.
    async fn call<F, Fut>(&self, shown: &AtomicBool, attempt: F) -> Result<Reply, SystemError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Reply, SystemError>>,
    {
        let ticket = self
            .breaker
            .admit()
            .map_err(|retry_in| SystemError::CircuitOpen {
                system: self.name.clone(),
                retry_in_s: retry_in.as_secs_f64(),
            })?;
        let _permit = match self.acquire().await {
            Ok(p) => p,
            Err(e) => {
                self.breaker.abandon(ticket);
                return Err(e);
            }
        };
        let outcome = self.attempts(shown, attempt).await;
        let failed = outcome.as_ref().is_err_and(SystemError::counts_as_failure);
        self.breaker.record(ticket, !failed);
        outcome
    }

    async fn attempts<F, Fut>(&self, shown: &AtomicBool, attempt: F) -> Result<Reply, SystemError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Reply, SystemError>>,
    {
        let timeout = secs(self.limits.timeout_s);
        let mut tries = 0;
        loop {
            let outcome = tokio::time::timeout(timeout, attempt())
                .await
                .unwrap_or_else(|_| {
                    Err(SystemError::Timeout {
                        system: self.name.clone(),
                        seconds: self.limits.timeout_s,
                    })
                });
            match outcome {
                Err(e)
                    if e.is_retryable()
                        && !shown.load(Ordering::SeqCst)
                        && tries < self.limits.retries =>
                {
                    tokio::time::sleep(backoff(self.limits.backoff_ms, tries)).await;
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// Waits for a free slot, or refuses when `queue` calls are already waiting.
    async fn acquire(&self) -> Result<OwnedSemaphorePermit, SystemError> {
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            return Ok(permit);
        }
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.limits.queue {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(SystemError::QueueFull {
                system: self.name.clone(),
                queue: self.limits.queue,
            });
        }
        // Leaves the queue even when the caller gives up while waiting.
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let _waiting = Waiting(&self.waiting);
        Ok(self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed"))
    }
}

/// The wait before retry number `tries + 1`: `base · 2^tries`, capped, then "equal jitter" (a random
/// point in the upper half) so clients that failed together do not retry together.
fn backoff(base_ms: u64, tries: u32) -> Duration {
    let full = Duration::from_millis(base_ms.saturating_mul(1 << tries.min(20))).min(MAX_BACKOFF);
    let half = full / 2;
    half + half.mul_f64(rand::random_range(0.0..=1.0))
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Whether a call was let through as the half-open trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ticket {
    Normal,
    Trial,
}

#[derive(Debug)]
enum BreakerState {
    /// In rotation; counts consecutive failed calls.
    Closed { failures: u32 },
    /// Out of rotation until the instant.
    Open { until: Instant },
    /// The cool-down is over; one trial call at a time decides.
    HalfOpen { trial_running: bool },
}

/// Closed → open after `threshold` consecutive failed calls → half-open after `cooldown` → closed
/// when the trial succeeds, open again when it fails.
#[derive(Debug)]
struct Breaker {
    threshold: u32,
    cooldown: Duration,
    state: Mutex<BreakerState>,
}

impl Breaker {
    fn new(threshold: u32, cooldown: Duration) -> Self {
        Breaker {
            threshold,
            cooldown,
            state: Mutex::new(BreakerState::Closed { failures: 0 }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BreakerState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Lets a call through, or says how long until the next trial.
    fn admit(&self) -> Result<Ticket, Duration> {
        let mut state = self.lock();
        match *state {
            BreakerState::Closed { .. } => Ok(Ticket::Normal),
            BreakerState::Open { until } => {
                let now = Instant::now();
                if now < until {
                    Err(until - now)
                } else {
                    *state = BreakerState::HalfOpen {
                        trial_running: true,
                    };
                    Ok(Ticket::Trial)
                }
            }
            BreakerState::HalfOpen {
                trial_running: true,
            } => Err(Duration::ZERO),
            BreakerState::HalfOpen {
                trial_running: false,
            } => {
                *state = BreakerState::HalfOpen {
                    trial_running: true,
                };
                Ok(Ticket::Trial)
            }
        }
    }

    /// Reports the outcome of an admitted call.
    fn record(&self, ticket: Ticket, success: bool) {
        let mut state = self.lock();
        let open = BreakerState::Open {
            until: Instant::now() + self.cooldown,
        };
        *state = match (&*state, success) {
            (_, true) => BreakerState::Closed { failures: 0 },
            (BreakerState::Closed { failures }, false) => {
                let failures = failures + 1;
                if failures >= self.threshold {
                    open
                } else {
                    BreakerState::Closed { failures }
                }
            }
            // A trial failed, or a call admitted before the circuit opened failed late.
            (BreakerState::HalfOpen { .. }, false) if ticket == Ticket::Trial => open,
            (BreakerState::HalfOpen { trial_running }, false) => BreakerState::HalfOpen {
                trial_running: *trial_running,
            },
            (BreakerState::Open { until }, false) => BreakerState::Open { until: *until },
        };
    }

    /// An admitted call never reached the system (queue full): give back the trial, if it was one.
    fn abandon(&self, ticket: Ticket) {
        if ticket == Ticket::Trial {
            *self.lock() = BreakerState::HalfOpen {
                trial_running: false,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_opens_after_threshold_and_one_trial_decides() {
        let b = Breaker::new(2, Duration::from_millis(30));
        let t = b.admit().unwrap();
        b.record(t, false);
        let t = b.admit().unwrap();
        b.record(t, false);
        assert!(b.admit().is_err(), "open after two failures");
        std::thread::sleep(Duration::from_millis(40));
        let trial = b.admit().unwrap();
        assert_eq!(trial, Ticket::Trial);
        assert!(b.admit().is_err(), "only one trial at a time");
        b.record(trial, false);
        assert!(b.admit().is_err(), "a failed trial reopens");
        std::thread::sleep(Duration::from_millis(40));
        let trial = b.admit().unwrap();
        b.record(trial, true);
        assert_eq!(b.admit().unwrap(), Ticket::Normal, "a good trial closes");
    }

    #[test]
    fn success_resets_the_failure_count() {
        let b = Breaker::new(2, Duration::from_secs(60));
        b.record(b.admit().unwrap(), false);
        b.record(b.admit().unwrap(), true);
        b.record(b.admit().unwrap(), false);
        assert!(b.admit().is_ok(), "failures were not consecutive");
    }

    #[test]
    fn backoff_doubles_within_jitter_and_is_capped() {
        for tries in 0..4 {
            let full = Duration::from_millis(100 << tries);
            let d = backoff(100, tries);
            assert!(
                d >= full / 2 && d <= full,
                "try {tries}: {d:?} outside [{:?}, {full:?}]",
                full / 2
            );
        }
        assert!(backoff(100, 30) <= MAX_BACKOFF);
    }
}
