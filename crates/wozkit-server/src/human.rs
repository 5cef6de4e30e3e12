//! `human` systems: a wizard at the desk answers each turn by hand, so an arena can compare
//! people with models.
//!
//! The [`HumanDesk`] knows which wizards are at the desk (by participant id, per study) and the
//! turns waiting for them. A wizard is present while their desk page polls: one not seen for
//! [`GONE_AFTER`] is gone, and so is one who pressed Leave; the turns they held fail. A
//! [`HumanSystem`] is a [`System`] like any other: its `reply` hands the turn to a wizard — the
//! same wizard for every turn of one conversation, a new conversation to the wizard with the
//! fewest conversations (one with no turn waiting first) — and waits for what they type. With
//! no wizard at the desk it fails at once, and the usual failed-turn path applies (the
//! participant may send the turn again; a battle with a failed turn is void).
//!
//! Nothing here touches the store: the desk page records who answered, and `chat::ask` stores
//! the reply as the system's message, as for any system.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::oneshot;
use wozkit_systems::{Reply, System, SystemError, Turn};

/// A wizard whose desk page has not polled for this long has left.
pub const GONE_AFTER: Duration = Duration::from_secs(15);
/// How often a waiting turn checks that its wizard is still there.
const CHECK_EVERY: Duration = Duration::from_secs(2);

/// A turn waiting for a wizard.
struct Waiting {
    system: String,
    /// The reply's index among the conversation's messages (the history's length).
    turn: usize,
    history: Vec<Turn>,
    reply: oneshot::Sender<String>,
}

/// One wizard at the desk.
struct Wizard {
    study: String,
    seen: Instant,
    /// Conversations handed to this wizard, in order, with the last history seen.
    conversations: BTreeMap<String, Vec<Turn>>,
    /// Turns waiting for this wizard's reply, by conversation.
    waiting: BTreeMap<String, Waiting>,
}

#[derive(Default)]
struct DeskState {
    wizards: HashMap<String, Wizard>,
    /// Which wizard holds each conversation.
    holder: HashMap<String, String>,
}

impl DeskState {
    fn prune(&mut self, now: Instant) {
        let gone: Vec<String> = self
            .wizards
            .iter()
            .filter(|(_, w)| now.saturating_duration_since(w.seen) > GONE_AFTER)
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            self.remove(&id);
        }
    }

    fn remove(&mut self, participant: &str) -> bool {
        // Dropping the waiting turns' senders fails them.
        let Some(w) = self.wizards.remove(participant) else {
            return false;
        };
        for dialogue in w.conversations.keys() {
            self.holder.remove(dialogue);
        }
        true
    }
}

/// One conversation as the desk page shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeskConversation {
    /// The conversation's session id.
    pub dialogue_id: String,
    /// The history as last handed to the wizard (the participant's turns and the replies).
    pub history: Vec<Turn>,
    /// A turn waiting for a reply: the system it is for and the reply's message index.
    pub waiting: Option<(String, usize)>,
}

/// Who is at the desk, and the turns waiting for them.
#[derive(Default)]
pub struct HumanDesk {
    state: Mutex<DeskState>,
}

impl HumanDesk {
    fn lock(&self) -> MutexGuard<'_, DeskState> {
        // The state stays consistent between statements: a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the wizard present at the desk of `study` now (their page polled).
    pub fn touch(&self, study: &str, participant: &str) {
        self.touch_at(study, participant, Instant::now());
    }

    /// [`HumanDesk::touch`] at a given instant.
    pub fn touch_at(&self, study: &str, participant: &str, now: Instant) {
        let mut s = self.lock();
        s.prune(now);
        let w = s
            .wizards
            .entry(participant.to_string())
            .or_insert_with(|| Wizard {
                study: study.to_string(),
                seen: now,
                conversations: BTreeMap::new(),
                waiting: BTreeMap::new(),
            });
        w.seen = now;
    }

    /// The wizard leaves: the turns they held fail, their conversations go to others. Returns
    /// whether they were at the desk.
    pub fn leave(&self, participant: &str) -> bool {
        self.lock().remove(participant)
    }

    /// Whether the wizard is at the desk (seen within [`GONE_AFTER`] of `now`).
    #[cfg(test)]
    pub fn present_at(&self, participant: &str, now: Instant) -> bool {
        let mut s = self.lock();
        s.prune(now);
        s.wizards.contains_key(participant)
    }

    /// Wizards at the desk of `study`.
    #[cfg(test)]
    pub fn wizards(&self, study: &str) -> usize {
        let mut s = self.lock();
        s.prune(Instant::now());
        s.wizards.values().filter(|w| w.study == study).count()
    }

    /// The wizard's conversations, those with a turn waiting first (oldest conversation
    /// first within each group).
    pub fn conversations(&self, participant: &str) -> Vec<DeskConversation> {
        let s = self.lock();
        let Some(w) = s.wizards.get(participant) else {
            return vec![];
        };
        let mut out: Vec<DeskConversation> = w
            .conversations
            .iter()
            .map(|(id, history)| {
                let waiting = w.waiting.get(id);
                DeskConversation {
                    dialogue_id: id.clone(),
                    history: waiting.map_or_else(|| history.clone(), |t| t.history.clone()),
                    waiting: waiting.map(|t| (t.system.clone(), t.turn)),
                }
            })
            .collect();
        out.sort_by_key(|c| c.waiting.is_none());
        out
    }

    /// The wizard answers the turn `turn` of `dialogue_id`: the waiting turn gets `text`.
    /// `Err` says why nothing was answered (no such turn waiting for this wizard).
    pub fn answer(
        &self,
        participant: &str,
        dialogue_id: &str,
        turn: usize,
        text: &str,
    ) -> Result<(), &'static str> {
        let mut s = self.lock();
        let w = s
            .wizards
            .get_mut(participant)
            .ok_or("you are not at the desk")?;
        let Some(waiting) = w.waiting.get(dialogue_id).filter(|t| t.turn == turn) else {
            return Err("this turn is no longer waiting for your reply");
        };
        if waiting.reply.is_closed() {
            w.waiting.remove(dialogue_id);
            return Err("this turn is no longer waiting for your reply");
        }
        let waiting = w.waiting.remove(dialogue_id).ok_or("no turn")?;
        let mut history = waiting.history;
        history.push(Turn::assistant(text));
        w.conversations.insert(dialogue_id.to_string(), history);
        waiting
            .reply
            .send(text.to_string())
            .map_err(|_| "this turn is no longer waiting for your reply")
    }

    /// Whether the turn `turn` of `dialogue_id` is waiting for this wizard.
    pub fn is_waiting(&self, participant: &str, dialogue_id: &str, turn: usize) -> bool {
        self.lock()
            .wizards
            .get(participant)
            .and_then(|w| w.waiting.get(dialogue_id))
            .is_some_and(|t| t.turn == turn && !t.reply.is_closed())
    }

    /// Hands a turn to a wizard of `study`: the conversation's wizard if still here, else the
    /// one with no turn waiting and the fewest conversations. `None` when nobody is at the desk.
    fn assign(
        &self,
        study: &str,
        system: &str,
        dialogue_id: &str,
        history: &[Turn],
    ) -> Option<(String, oneshot::Receiver<String>)> {
        let mut s = self.lock();
        s.prune(Instant::now());
        let held = s
            .holder
            .get(dialogue_id)
            .filter(|id| s.wizards.contains_key(*id))
            .cloned();
        let wizard = held.or_else(|| {
            s.wizards
                .iter()
                .filter(|(_, w)| w.study == study)
                .min_by_key(|(id, w)| (!w.waiting.is_empty(), w.conversations.len(), *id))
                .map(|(id, _)| id.clone())
        })?;
        let (tx, rx) = oneshot::channel();
        s.holder.insert(dialogue_id.to_string(), wizard.clone());
        let w = s.wizards.get_mut(&wizard)?;
        w.conversations
            .insert(dialogue_id.to_string(), history.to_vec());
        w.waiting.insert(
            dialogue_id.to_string(),
            Waiting {
                system: system.to_string(),
                turn: history.len(),
                history: history.to_vec(),
                reply: tx,
            },
        );
        Some((wizard, rx))
    }

    /// Forgets a turn nobody waits for any more (the call timed out or was dropped).
    fn withdraw(&self, wizard: &str, dialogue_id: &str, turn: usize) {
        let mut s = self.lock();
        if let Some(w) = s.wizards.get_mut(wizard)
            && w.waiting.get(dialogue_id).is_some_and(|t| t.turn == turn)
        {
            w.waiting.remove(dialogue_id);
        }
    }

    /// Removes wizards not seen since [`GONE_AFTER`] before `now`.
    pub fn prune_at(&self, now: Instant) {
        self.lock().prune(now);
    }
}

/// A `human` system of one study: its turns are answered at that study's desk.
pub struct HumanSystem {
    desk: Arc<HumanDesk>,
    study: String,
    name: String,
}

impl HumanSystem {
    /// The human system `name` of `study`, answered at `desk`.
    pub fn new(desk: Arc<HumanDesk>, study: &str, name: &str) -> HumanSystem {
        HumanSystem {
            desk,
            study: study.to_string(),
            name: name.to_string(),
        }
    }
}

/// Withdraws the turn from the desk when the call ends without a reply (dropped by a timeout).
struct Withdraw<'a> {
    desk: &'a HumanDesk,
    wizard: String,
    dialogue_id: &'a str,
    turn: usize,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        self.desk
            .withdraw(&self.wizard, self.dialogue_id, self.turn);
    }
}

#[async_trait]
impl System for HumanSystem {
    async fn reply(&self, dialogue_id: &str, history: &[Turn]) -> Result<Reply, SystemError> {
        let failed = |detail: &str| SystemError::BadResponse {
            system: self.name.clone(),
            detail: detail.to_string(),
        };
        let (wizard, mut rx) = self
            .desk
            .assign(&self.study, &self.name, dialogue_id, history)
            .ok_or_else(|| failed("no wizard is at the desk"))?;
        let _withdraw = Withdraw {
            desk: &self.desk,
            wizard,
            dialogue_id,
            turn: history.len(),
        };
        loop {
            tokio::select! {
                text = &mut rx => {
                    return text
                        .map(|text| Reply { text })
                        .map_err(|_| failed("the wizard left the desk"));
                }
                // A wizard whose page stopped polling is dropped here, which fails the turn.
                _ = tokio::time::sleep(CHECK_EVERY) => self.desk.prune_at(Instant::now()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desk() -> Arc<HumanDesk> {
        Arc::new(HumanDesk::default())
    }

    #[tokio::test]
    async fn no_wizard_fails_at_once() {
        let d = desk();
        let sys = HumanSystem::new(d.clone(), "s", "person");
        let err = sys.reply("c1", &[Turn::user("hi")]).await;
        assert!(
            matches!(&err, Err(SystemError::BadResponse { detail, .. }) if detail == "no wizard is at the desk"),
            "{err:?}"
        );
        // A wizard of another study does not answer this one.
        d.touch("other", "w1");
        assert!(sys.reply("c1", &[Turn::user("hi")]).await.is_err());
    }

    #[tokio::test]
    async fn conversations_stick_to_their_wizard_and_new_ones_go_to_the_least_busy() {
        let d = desk();
        d.touch("s", "w1");
        d.touch("s", "w2");
        let (a, _ra) = d.assign("s", "p", "c1", &[Turn::user("1")]).unwrap();
        let (b, _rb) = d.assign("s", "p", "c2", &[Turn::user("1")]).unwrap();
        assert_ne!(a, b, "a wizard with a turn waiting is busy");
        let other = if a == "w1" { "w2" } else { "w1" };
        assert_eq!(d.answer(&a, "c1", 1, "hello"), Ok(()));
        assert_eq!(d.answer(&b, "c2", 1, "hey"), Ok(()));
        let hist = [Turn::user("1"), Turn::assistant("hello"), Turn::user("2")];
        let (again, _r) = d.assign("s", "p", "c1", &hist).unwrap();
        assert_eq!(again, a, "the same wizard for every turn");
        assert_eq!(d.conversations(&a)[0].waiting, Some(("p".to_string(), 3)));
        assert_eq!(d.answer(&a, "c1", 3, "x"), Ok(()));
        // Both have one conversation: the third goes to either; then the fourth to the other.
        let (c, _rc) = d.assign("s", "p", "c3", &[Turn::user("1")]).unwrap();
        assert_eq!(d.answer(&c, "c3", 1, "x"), Ok(()));
        let (e, _re) = d.assign("s", "p", "c4", &[Turn::user("1")]).unwrap();
        assert_ne!(e, c, "fewest conversations first");
        assert!(other == c || other == e);
    }

    #[tokio::test]
    async fn the_reply_is_what_the_wizard_typed_and_leaving_fails_the_turn() {
        let d = desk();
        d.touch("s", "w1");
        let sys = Arc::new(HumanSystem::new(d.clone(), "s", "person"));
        let s2 = sys.clone();
        let call = tokio::spawn(async move { s2.reply("c1", &[Turn::user("hi")]).await });
        while !d.is_waiting("w1", "c1", 1) {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            d.answer("w1", "c1", 0, "wrong turn"),
            Err("this turn is no longer waiting for your reply")
        );
        assert_eq!(d.answer("w1", "c1", 1, "typed by hand"), Ok(()));
        let reply = call.await.unwrap().unwrap();
        assert_eq!(reply.text, "typed by hand");

        let s3 = sys.clone();
        let hist = vec![
            Turn::user("hi"),
            Turn::assistant("typed by hand"),
            Turn::user("more"),
        ];
        let call = tokio::spawn(async move { s3.reply("c1", &hist).await });
        while !d.is_waiting("w1", "c1", 3) {
            tokio::task::yield_now().await;
        }
        assert!(d.leave("w1"));
        let err = call.await.unwrap();
        assert!(
            matches!(&err, Err(SystemError::BadResponse { detail, .. }) if detail == "the wizard left the desk"),
            "{err:?}"
        );
        assert_eq!(d.wizards("s"), 0);
    }

    #[test]
    fn a_wizard_whose_page_stopped_polling_is_gone() {
        let d = desk();
        let t0 = Instant::now();
        d.touch_at("s", "w1", t0);
        assert!(d.present_at("w1", t0 + GONE_AFTER));
        d.touch_at("s", "w1", t0 + GONE_AFTER);
        assert!(d.present_at("w1", t0 + GONE_AFTER * 2));
        assert!(!d.present_at("w1", t0 + GONE_AFTER * 2 + Duration::from_millis(1)));
    }

    #[test]
    fn a_dropped_call_withdraws_its_turn() {
        let d = desk();
        d.touch("s", "w1");
        let (w, rx) = d.assign("s", "p", "c1", &[Turn::user("hi")]).unwrap();
        {
            let _g = Withdraw {
                desk: &d,
                wizard: w.clone(),
                dialogue_id: "c1",
                turn: 1,
            };
        }
        drop(rx);
        assert!(!d.is_waiting(&w, "c1", 1));
        assert_eq!(
            d.conversations(&w)[0].waiting,
            None,
            "kept as a conversation, nothing waiting"
        );
    }
}
