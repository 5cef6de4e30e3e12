//! The waiting room's queues: per study (and optional private pair key), participants waiting
//! for the complementary role, first come first served.
//!
//! Only participants with a live waiting-room connection are queued, so nobody is paired with a
//! partner who already closed the tab; and a connection that stopped answering its heartbeat
//! (a socket that died without closing) is skipped, so nobody is paired with a partner who will
//! never arrive. A participant whose partner never arrived anyway goes back to the front of the
//! queue. A participant is never paired with itself: a second tab replaces the first tab's
//! place, and two entries of the same crowd worker never match.
//!
//! Everything the lobby remembers about a participant is dropped once they leave for good
//! (gone longer than their grace period), so its size follows the people actually waiting.
//!
//! Pure bookkeeping behind a std mutex (held for a few map operations, never across an await);
//! creating the session of a pair is `pairing`'s job. Times are passed in (`tokio::time`
//! instants), so tests pause the clock.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use wozkit_core::event::Role;

/// Expired entries are looked for at most this often (a sweep walks every entry).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Which queue: the study, and a private pair key (lab links and `/try` pair only with the same
/// key; crowd links have none).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueueKey {
    pub study: String,
    pub pair: Option<String>,
}

/// Someone asking to be paired.
#[derive(Clone, Debug)]
pub struct Ticket {
    pub participant: String,
    /// `platform:worker id`, when the platform gave one.
    pub worker: Option<String>,
    pub role: Role,
    /// The waiting-room connection holding the place.
    pub conn: u64,
}

/// What a waiting participant is told when a partner takes them.
#[derive(Clone, Debug)]
pub struct Paired {
    pub session: String,
}

/// A queued participant.
struct Waiter {
    ticket: Ticket,
    notify: oneshot::Sender<Paired>,
    /// When its connection last said anything (a frame or a pong): a waiter silent for longer
    /// than the stale cut-off is not paired.
    heard_at: Instant,
    /// Queued ahead of the others: its partner never arrived.
    first: bool,
}

/// The result of asking to be paired.
pub enum Enqueued {
    /// A partner was waiting: it is removed from the queue; tell it the session through `notify`.
    Matched {
        partner: Ticket,
        notify: oneshot::Sender<Paired>,
    },
    /// Nobody fits yet; `rx` fires when somebody takes this participant.
    Queued {
        since_ms: u64,
        rx: oneshot::Receiver<Paired>,
    },
}

/// How many wait in one queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueCount {
    pub key: QueueKey,
    pub users: usize,
    pub wizards: usize,
}

/// When a participant started waiting.
struct Since {
    ms: u64,
    /// Set when their connection closed: forgotten at this time unless they come back.
    forget_at: Option<Instant>,
}

#[derive(Default)]
struct Inner {
    queues: HashMap<QueueKey, Vec<Waiter>>,
    /// When each participant started waiting, kept across reconnects so the wait limit counts
    /// the whole wait.
    since: HashMap<String, Since>,
    /// Participants whose partner never arrived: queued first when they come back, if they
    /// come back before the given time.
    first: HashMap<String, Instant>,
    /// Per study, how many roles were handed out: ties alternate.
    handed: HashMap<String, u64>,
    /// When expired entries were last looked for.
    swept_at: Option<Instant>,
}

impl Inner {
    /// Drops what was kept for participants who left for good (at most once per
    /// [`SWEEP_EVERY`], unless `force`).
    fn sweep(&mut self, now: Instant, force: bool) {
        if !force && self.swept_at.is_some_and(|t| now < t + SWEEP_EVERY) {
            return;
        }
        self.swept_at = Some(now);
        self.since
            .retain(|_, s| s.forget_at.is_none_or(|t| now < t));
        self.first.retain(|_, t| now < *t);
    }
}

/// The waiting queues.
#[derive(Default)]
pub struct Lobby {
    inner: Mutex<Inner>,
}

impl Lobby {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        // A poisoned lock only means a panic elsewhere; the maps are still consistent.
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// Queues `ticket`, or takes the longest-waiting live partner of the other role (one heard
    /// from within `stale_after`).
    pub fn enqueue(
        &self,
        key: QueueKey,
        ticket: Ticket,
        now_ms: u64,
        now: Instant,
        stale_after: Duration,
    ) -> Enqueued {
        self.with(|inner| {
            inner.sweep(now, false);
            let queue = inner.queues.entry(key.clone()).or_default();
            // Another tab of the same participant gives up its place to this one.
            queue.retain(|w| w.ticket.participant != ticket.participant);
            let fits = |w: &Waiter| {
                w.ticket.role == ticket.role.other()
                    && w.ticket.participant != ticket.participant
                    && (w.ticket.worker.is_none() || w.ticket.worker != ticket.worker)
                    && now.saturating_duration_since(w.heard_at) <= stale_after
            };
            if let Some(i) = queue.iter().position(fits) {
                let w = queue.remove(i);
                if queue.is_empty() {
                    inner.queues.remove(&key);
                }
                for p in [&w.ticket.participant, &ticket.participant] {
                    inner.since.remove(p);
                    inner.first.remove(p);
                }
                return Enqueued::Matched {
                    partner: w.ticket,
                    notify: w.notify,
                };
            }
            let (notify, rx) = oneshot::channel();
            let first = inner.first.remove(&ticket.participant).is_some();
            let waiter = Waiter {
                ticket: ticket.clone(),
                notify,
                heard_at: now,
                first,
            };
            if first {
                // Behind those put first before it, ahead of everyone else.
                let at = queue.iter().position(|w| !w.first).unwrap_or(queue.len());
                queue.insert(at, waiter);
            } else {
                queue.push(waiter);
            }
            let since = inner.since.entry(ticket.participant).or_insert(Since {
                ms: now_ms,
                forget_at: None,
            });
            since.forget_at = None;
            Enqueued::Queued {
                since_ms: since.ms,
                rx,
            }
        })
    }

    /// Connection `conn` of `participant` said something: it is alive.
    pub fn heard(&self, key: &QueueKey, participant: &str, conn: u64, now: Instant) {
        self.with(|inner| {
            let waiter = inner.queues.get_mut(key).and_then(|q| {
                q.iter_mut()
                    .find(|w| w.ticket.participant == participant && w.ticket.conn == conn)
            });
            if let Some(w) = waiter {
                w.heard_at = now;
            }
        });
    }

    /// Removes the place held by connection `conn`; false if it is gone (taken by a partner,
    /// or replaced by another tab).
    pub fn leave(&self, key: &QueueKey, participant: &str, conn: u64) -> bool {
        self.with(|inner| {
            let Some(queue) = inner.queues.get_mut(key) else {
                return false;
            };
            let before = queue.len();
            queue.retain(|w| !(w.ticket.participant == participant && w.ticket.conn == conn));
            let removed = queue.len() < before;
            if queue.is_empty() {
                inner.queues.remove(key);
            }
            removed
        })
    }

    /// A participant's waiting connection is gone: their waiting time is kept until `forget_at`
    /// for a reconnect (a reload, a network blip), then dropped.
    pub fn gone(&self, participant: &str, forget_at: Instant) {
        self.with(|inner| {
            if let Some(s) = inner.since.get_mut(participant) {
                s.forget_at = Some(forget_at);
            }
        });
    }

    /// Forgets when a participant started waiting (after pairing or giving up).
    pub fn forget(&self, participant: &str) {
        self.with(|inner| {
            inner.since.remove(participant);
            inner.first.remove(participant);
        });
    }

    /// The partner of `participant` never arrived in the room: the next time they queue
    /// (before `until`), they are queued ahead of everyone else.
    pub fn put_first(&self, participant: &str, until: Instant) {
        self.with(|inner| {
            inner.first.insert(participant.to_string(), until);
        });
    }

    /// 1-based place among those waiting for the same role.
    pub fn position(&self, key: &QueueKey, participant: &str) -> Option<usize> {
        self.with(|inner| {
            let queue = inner.queues.get(key)?;
            let me = queue.iter().find(|w| w.ticket.participant == participant)?;
            let role = me.ticket.role;
            queue
                .iter()
                .filter(|w| w.ticket.role == role)
                .position(|w| w.ticket.participant == participant)
                .map(|p| p + 1)
        })
    }

    /// The role for a newcomer to `study`: the one the public queue lacks, else alternating
    /// (the first is the wizard, whose instructions take longer to read).
    pub fn assign_role(&self, study: &str) -> Role {
        self.with(|inner| {
            let key = QueueKey {
                study: study.to_string(),
                pair: None,
            };
            let (users, wizards) = inner.queues.get(&key).map_or((0, 0), |q| {
                let users = q.iter().filter(|w| w.ticket.role == Role::User).count();
                (users, q.len() - users)
            });
            let n = inner.handed.entry(study.to_string()).or_default();
            *n += 1;
            match users.cmp(&wizards) {
                std::cmp::Ordering::Greater => Role::Wizard,
                std::cmp::Ordering::Less => Role::User,
                std::cmp::Ordering::Equal if *n % 2 == 1 => Role::Wizard,
                std::cmp::Ordering::Equal => Role::User,
            }
        })
    }

    /// Everyone waiting, per queue (for the researcher page).
    pub fn counts(&self) -> Vec<QueueCount> {
        self.with(|inner| {
            let mut out: Vec<QueueCount> = inner
                .queues
                .iter()
                .map(|(key, q)| {
                    let users = q.iter().filter(|w| w.ticket.role == Role::User).count();
                    QueueCount {
                        key: key.clone(),
                        users,
                        wizards: q.len() - users,
                    }
                })
                .collect();
            out.sort_by(|a, b| (&a.key.study, &a.key.pair).cmp(&(&b.key.study, &b.key.pair)));
            out
        })
    }

    /// How many entries the lobby holds about participants (queue places, waiting times, places
    /// kept at the front), after dropping those of participants who left for good: 0 when
    /// nobody waits or is expected back.
    pub fn size(&self, now: Instant) -> usize {
        self.with(|inner| {
            inner.sweep(now, true);
            let queued: usize = inner.queues.values().map(Vec::len).sum();
            queued + inner.since.len() + inner.first.len()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALE: Duration = Duration::from_secs(15);

    fn key() -> QueueKey {
        QueueKey {
            study: "s".into(),
            pair: None,
        }
    }

    fn ticket(p: &str, worker: Option<&str>, role: Role, conn: u64) -> Ticket {
        Ticket {
            participant: p.into(),
            worker: worker.map(str::to_string),
            role,
            conn,
        }
    }

    fn enqueue(lobby: &Lobby, t: Ticket, now_ms: u64) -> Enqueued {
        lobby.enqueue(key(), t, now_ms, Instant::now(), STALE)
    }

    fn partner(e: Enqueued) -> Option<String> {
        match e {
            Enqueued::Matched { partner, .. } => Some(partner.participant),
            Enqueued::Queued { .. } => None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn complementary_roles_pair_first_come_first_served() {
        let lobby = Lobby::default();
        assert_eq!(
            partner(enqueue(&lobby, ticket("u1", None, Role::User, 1), 0)),
            None
        );
        assert_eq!(
            partner(enqueue(&lobby, ticket("u2", None, Role::User, 2), 1)),
            None
        );
        assert_eq!(lobby.position(&key(), "u2"), Some(2));
        let got = enqueue(&lobby, ticket("w1", None, Role::Wizard, 3), 2);
        assert_eq!(partner(got).as_deref(), Some("u1"));
        assert_eq!(lobby.position(&key(), "u2"), Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn never_pairs_a_worker_with_itself() {
        let lobby = Lobby::default();
        let _ = enqueue(&lobby, ticket("a", Some("prolific:X"), Role::User, 1), 0);
        let b = enqueue(&lobby, ticket("b", Some("prolific:X"), Role::Wizard, 2), 0);
        assert_eq!(partner(b), None);
        // A second tab of the same participant replaces the first.
        let _ = enqueue(&lobby, ticket("a", Some("prolific:X"), Role::User, 3), 0);
        assert!(!lobby.leave(&key(), "a", 1));
        assert!(lobby.leave(&key(), "a", 3));
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_time_survives_reconnects() {
        let lobby = Lobby::default();
        let _ = enqueue(&lobby, ticket("a", None, Role::User, 1), 100);
        assert!(lobby.leave(&key(), "a", 1));
        lobby.gone("a", Instant::now() + Duration::from_secs(30));
        match enqueue(&lobby, ticket("a", None, Role::User, 2), 900) {
            Enqueued::Queued { since_ms, .. } => assert_eq!(since_ms, 100),
            Enqueued::Matched { .. } => panic!("nobody to match"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn roles_fill_what_the_queue_lacks() {
        let lobby = Lobby::default();
        assert_eq!(lobby.assign_role("s"), Role::Wizard);
        assert_eq!(lobby.assign_role("s"), Role::User);
        let _ = enqueue(&lobby, ticket("u", None, Role::User, 1), 0);
        assert_eq!(lobby.assign_role("s"), Role::Wizard);
        assert_eq!(lobby.assign_role("s"), Role::Wizard);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_waiter_is_not_paired_until_heard_again() {
        let lobby = Lobby::default();
        let _ = enqueue(&lobby, ticket("u", None, Role::User, 1), 0);
        tokio::time::advance(STALE + Duration::from_secs(1)).await;
        assert_eq!(
            partner(enqueue(&lobby, ticket("w", None, Role::Wizard, 2), 0)),
            None
        );
        // Still queued (its own connection gives the place up), but passed over.
        assert_eq!(lobby.position(&key(), "u"), Some(1));
        lobby.heard(&key(), "u", 1, Instant::now());
        let got = enqueue(&lobby, ticket("w2", None, Role::Wizard, 3), 0);
        assert_eq!(partner(got).as_deref(), Some("u"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_participant_whose_partner_never_came_is_queued_first() {
        let lobby = Lobby::default();
        let _ = enqueue(&lobby, ticket("early", None, Role::User, 1), 0);
        let _ = enqueue(&lobby, ticket("early2", None, Role::User, 2), 0);
        lobby.put_first("stranded", Instant::now() + Duration::from_secs(30));
        let _ = enqueue(&lobby, ticket("stranded", None, Role::User, 3), 5);
        assert_eq!(lobby.position(&key(), "stranded"), Some(1));
        let got = enqueue(&lobby, ticket("w", None, Role::Wizard, 4), 6);
        assert_eq!(partner(got).as_deref(), Some("stranded"));
        let got = enqueue(&lobby, ticket("w2", None, Role::Wizard, 5), 7);
        assert_eq!(partner(got).as_deref(), Some("early"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_lobby_forgets_waiters_who_left_for_good() {
        let lobby = Lobby::default();
        let grace = Duration::from_secs(30);
        for (i, p) in ["a", "b", "c"].into_iter().enumerate() {
            let _ = lobby.enqueue(
                QueueKey {
                    study: "s".into(),
                    pair: Some(p.into()),
                },
                ticket(p, None, Role::User, i as u64),
                0,
                Instant::now(),
                STALE,
            );
        }
        lobby.put_first("never-back", Instant::now() + grace);
        assert_eq!(lobby.size(Instant::now()), 7);
        for (i, p) in ["a", "b", "c"].into_iter().enumerate() {
            let key = QueueKey {
                study: "s".into(),
                pair: Some(p.into()),
            };
            assert!(lobby.leave(&key, p, i as u64));
            lobby.gone(p, Instant::now() + grace);
        }
        // Kept for a reconnect within the grace period...
        assert_eq!(lobby.size(Instant::now()), 4);
        tokio::time::advance(grace).await;
        // ...and nothing is left after it.
        assert_eq!(lobby.size(Instant::now()), 0);
        // A pair leaves no empty queue behind either.
        let _ = enqueue(&lobby, ticket("u", None, Role::User, 9), 0);
        let _ = enqueue(&lobby, ticket("w", None, Role::Wizard, 10), 0);
        assert_eq!(lobby.size(Instant::now()), 0);
        assert!(lobby.counts().is_empty());
    }
}
