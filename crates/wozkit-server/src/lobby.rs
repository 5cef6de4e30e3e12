//! The waiting room's queues: per study (and optional private pair key), participants waiting
//! for the complementary role, first come first served.
//!
//! Only participants with a live waiting-room connection are queued, so nobody is paired with a
//! partner who already closed the tab. A participant is never paired with itself: a second tab
//! replaces the first tab's place, and two entries of the same crowd worker never match.
//!
//! Pure bookkeeping behind a std mutex (held for a few map operations, never across an await);
//! creating the session of a pair is `pairing`'s job.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;
use wozkit_core::event::Role;

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

#[derive(Default)]
struct Inner {
    queues: HashMap<QueueKey, Vec<Waiter>>,
    /// When each participant started waiting, kept across reconnects so the wait limit counts
    /// the whole wait.
    since: HashMap<String, u64>,
    /// Per study, how many roles were handed out: ties alternate.
    handed: HashMap<String, u64>,
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

    /// Queues `ticket`, or takes the longest-waiting partner of the other role.
    pub fn enqueue(&self, key: QueueKey, ticket: Ticket, now_ms: u64) -> Enqueued {
        self.with(|inner| {
            let queue = inner.queues.entry(key).or_default();
            // Another tab of the same participant gives up its place to this one.
            queue.retain(|w| w.ticket.participant != ticket.participant);
            let fits = |w: &Waiter| {
                w.ticket.role == ticket.role.other()
                    && w.ticket.participant != ticket.participant
                    && (w.ticket.worker.is_none() || w.ticket.worker != ticket.worker)
            };
            if let Some(i) = queue.iter().position(fits) {
                let w = queue.remove(i);
                inner.since.remove(&w.ticket.participant);
                inner.since.remove(&ticket.participant);
                return Enqueued::Matched {
                    partner: w.ticket,
                    notify: w.notify,
                };
            }
            let (notify, rx) = oneshot::channel();
            queue.push(Waiter {
                ticket: ticket.clone(),
                notify,
            });
            let since_ms = *inner.since.entry(ticket.participant).or_insert(now_ms);
            Enqueued::Queued { since_ms, rx }
        })
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

    /// Forgets when a participant started waiting (after pairing or giving up).
    pub fn forget(&self, participant: &str) {
        self.with(|inner| inner.since.remove(participant));
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
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn complementary_roles_pair_first_come_first_served() {
        let lobby = Lobby::default();
        assert!(matches!(
            lobby.enqueue(key(), ticket("u1", None, Role::User, 1), 0),
            Enqueued::Queued { .. }
        ));
        assert!(matches!(
            lobby.enqueue(key(), ticket("u2", None, Role::User, 2), 1),
            Enqueued::Queued { .. }
        ));
        assert_eq!(lobby.position(&key(), "u2"), Some(2));
        match lobby.enqueue(key(), ticket("w1", None, Role::Wizard, 3), 2) {
            Enqueued::Matched { partner, .. } => assert_eq!(partner.participant, "u1"),
            Enqueued::Queued { .. } => panic!("expected a match"),
        }
        assert_eq!(lobby.position(&key(), "u2"), Some(1));
    }

    #[test]
    fn never_pairs_a_worker_with_itself() {
        let lobby = Lobby::default();
        let _ = lobby.enqueue(key(), ticket("a", Some("prolific:X"), Role::User, 1), 0);
        assert!(matches!(
            lobby.enqueue(key(), ticket("b", Some("prolific:X"), Role::Wizard, 2), 0),
            Enqueued::Queued { .. }
        ));
        // A second tab of the same participant replaces the first.
        let _ = lobby.enqueue(key(), ticket("a", Some("prolific:X"), Role::User, 3), 0);
        assert!(!lobby.leave(&key(), "a", 1));
        assert!(lobby.leave(&key(), "a", 3));
    }

    #[test]
    fn waiting_time_survives_reconnects() {
        let lobby = Lobby::default();
        let _ = lobby.enqueue(key(), ticket("a", None, Role::User, 1), 100);
        assert!(lobby.leave(&key(), "a", 1));
        match lobby.enqueue(key(), ticket("a", None, Role::User, 2), 900) {
            Enqueued::Queued { since_ms, .. } => assert_eq!(since_ms, 100),
            Enqueued::Matched { .. } => panic!("nobody to match"),
        }
    }

    #[test]
    fn roles_fill_what_the_queue_lacks() {
        let lobby = Lobby::default();
        assert_eq!(lobby.assign_role("s"), Role::Wizard);
        assert_eq!(lobby.assign_role("s"), Role::User);
        let _ = lobby.enqueue(key(), ticket("u", None, Role::User, 1), 0);
        assert_eq!(lobby.assign_role("s"), Role::Wizard);
        assert_eq!(lobby.assign_role("s"), Role::Wizard);
    }
}
