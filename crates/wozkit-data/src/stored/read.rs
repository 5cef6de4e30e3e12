//! Reading sessions back from the store one at a time: [`SessionStream`] pages through
//! [`EventStore::events_page`] (ordered by session id, then `seq`) and hands out each session once all
//! its events have arrived, so memory holds one page and one session, whatever the store's size.
//!
//! The store's event pages hold every kind of session: dialogues (live or imported) and the
//! participants' own logs of evaluation flows (first event [`EventKind::ParticipantLogStarted`]).
//! A stream gives one kind: [`SessionStream::open`] the dialogues, which dataset exports and the
//! dialogue statistics of reports read, and [`SessionStream::participant_logs`] the logs, which
//! the judgments export and the evaluation part of reports read.

use std::collections::{HashMap, HashSet, VecDeque};

use wozkit_core::event::{Event, EventKind};
use wozkit_store::{EventCursor, SessionFilter, SessionKind, SessionStatus, Store, StoreError};

use super::{IMPORT_STUDY_PREFIX, Origin};
use crate::judgments::{Worker, log_owner};
use crate::session::ImportedSession;

/// Events fetched per page.
const PAGE: u32 = 4096;

/// One session as stored: its store id, its events, and where it was imported from.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSession {
    pub store_id: String,
    /// `None` for a session collected live.
    pub origin: Option<Origin>,
    /// Server time of the first event: the import time for an imported session.
    pub first_at_ms: u64,
    /// Every stored event, the origin annotation included.
    pub events: Vec<Event>,
}

impl StoredSession {
    fn new(events: Vec<Event>) -> Option<StoredSession> {
        let first = events.first()?;
        Some(StoredSession {
            store_id: first.session.clone(),
            origin: Origin::of(&first.kind),
            first_at_ms: first.at_ms,
            events,
        })
    }

    /// Whether this is a participant's own log of an evaluation flow rather than a dialogue.
    pub fn is_participant_log(&self) -> bool {
        is_participant_log(&self.events)
    }

    /// The session as the dataset importers made it: the dialogue id as in its file and the
    /// events without the origin annotation (their `seq` stay the store's). A live session is
    /// given as it is.
    pub fn dataset_view(&self) -> ImportedSession {
        match &self.origin {
            Some(origin) => ImportedSession {
                id: origin.id.clone(),
                events: self.events.iter().skip(1).cloned().collect(),
            },
            None => ImportedSession {
                id: self.store_id.clone(),
                events: self.events.clone(),
            },
        }
    }

    /// Where the session goes in a file whose record order is free: imported sessions by import
    /// run and position in their file, then live ones by start time (and id on a tie).
    pub fn order_key(&self) -> (u64, u64, String) {
        let position = self.origin.as_ref().map_or(0, |o| o.position);
        (self.first_at_ms, position, self.store_id.clone())
    }
}

/// Streams every visible session of one kind of the store (or of one study), in session-id
/// order. Sessions of an unfinished import are skipped.
pub struct SessionStream<'a> {
    store: &'a dyn Store,
    study: Option<String>,
    /// Participant logs instead of dialogues.
    participant_logs: bool,
    /// Unfinished imports, invisible until the import that wrote them is run again.
    importing: HashSet<String>,
    cursor: Option<EventCursor>,
    /// Events of the session being assembled (its last event may not have arrived yet).
    pending: Vec<Event>,
    ready: VecDeque<StoredSession>,
    /// Sessions left out, e.g. test sessions (see [`test_session_ids`]).
    skip: HashSet<String>,
    /// Leave out chats and arena battles of test participants (see
    /// [`SessionStream::skipping_test_chats`]), with what is known of each participant.
    test_chats: Option<HashMap<String, bool>>,
    done: bool,
    /// Events read so far, for summaries.
    pub events_read: u64,
}

impl<'a> SessionStream<'a> {
    /// Starts a stream over `study`'s dialogues, or all dialogues: participant logs are left out.
    pub async fn open(
        store: &'a dyn Store,
        study: Option<&str>,
    ) -> Result<SessionStream<'a>, StoreError> {
        Ok(SessionStream {
            store,
            study: study.map(str::to_string),
            participant_logs: false,
            importing: importing_sessions(store).await?,
            cursor: None,
            pending: Vec::new(),
            ready: VecDeque::new(),
            skip: HashSet::new(),
            test_chats: None,
            done: false,
            events_read: 0,
        })
    }

    /// Starts a stream over the participant logs of `study`, or of every study.
    pub async fn participant_logs(
        store: &'a dyn Store,
        study: Option<&str>,
    ) -> Result<SessionStream<'a>, StoreError> {
        let mut stream = SessionStream::open(store, study).await?;
        stream.participant_logs = true;
        Ok(stream)
    }

    /// Leaves these sessions out of the stream.
    pub fn skipping(mut self, skip: HashSet<String>) -> SessionStream<'a> {
        self.skip = skip;
        self
    }

    /// Also leaves out the chats and arena battles (sessions starting with `ChatStarted`) of
    /// test participants: the store does not list those participants in the sessions, so
    /// [`test_session_ids`] cannot find them.
    pub fn skipping_test_chats(mut self) -> SessionStream<'a> {
        self.test_chats = Some(HashMap::new());
        self
    }

    /// Whether `session` is a chat of a test participant that the stream leaves out.
    async fn is_skipped_chat(&mut self, session: &StoredSession) -> Result<bool, StoreError> {
        let Some(known) = &mut self.test_chats else {
            return Ok(false);
        };
        let Some(EventKind::ChatStarted { participant, .. }) =
            session.events.first().map(|e| &e.kind)
        else {
            return Ok(false);
        };
        if let Some(test) = known.get(participant) {
            return Ok(*test);
        }
        let test = self
            .store
            .participant(participant)
            .await?
            .is_some_and(|p| p.is_test());
        known.insert(participant.clone(), test);
        Ok(test)
    }

    /// The next session, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<StoredSession>, StoreError> {
        loop {
            if let Some(session) = self.ready.pop_front() {
                if self.is_skipped_chat(&session).await? {
                    continue;
                }
                return Ok(Some(session));
            }
            if self.done {
                return Ok(None);
            }
            let page = self
                .store
                .events_page(self.study.as_deref(), self.cursor.as_ref(), PAGE)
                .await?;
            let Some(last) = page.last() else {
                self.done = true;
                let pending = std::mem::take(&mut self.pending);
                self.push_ready(pending);
                continue;
            };
            self.cursor = Some(EventCursor::after(last));
            self.events_read += page.len() as u64;
            for event in page {
                let same = self
                    .pending
                    .first()
                    .is_none_or(|e| e.session == event.session);
                if !same {
                    let finished = std::mem::take(&mut self.pending);
                    self.push_ready(finished);
                }
                self.pending.push(event);
            }
        }
    }

    fn push_ready(&mut self, events: Vec<Event>) {
        if is_participant_log(&events) != self.participant_logs {
            return;
        }
        if let Some(session) = StoredSession::new(events)
            && !self.importing.contains(&session.store_id)
            && !self.skip.contains(&session.store_id)
        {
            self.ready.push_back(session);
        }
    }
}

/// The participant behind a participant log, as the store has them, and whether they are a test
/// participant (`/try`, a link with `test=1`). A participant the store does not have is not a
/// test.
pub async fn log_worker(
    store: &dyn Store,
    session: &StoredSession,
) -> Result<(Worker, bool), StoreError> {
    let Some((_, id)) = log_owner(&session.events) else {
        return Ok((Worker::default(), false));
    };
    let known = store.participant(id).await?;
    let worker = Worker {
        participant: Some(id.to_string()),
        worker_id: known.as_ref().and_then(|p| p.worker_id.clone()),
    };
    Ok((worker, known.is_some_and(|p| p.is_test())))
}

/// Whether a log whose events start with `events` is a participant's own log (or a model
/// judge's, which is no dialogue either).
fn is_participant_log(events: &[Event]) -> bool {
    events.first().is_some_and(|e| {
        matches!(
            e.kind,
            EventKind::ParticipantLogStarted { .. } | EventKind::JudgeLogStarted { .. }
        )
    })
}

/// Ids of the sessions of unfinished imports: live sessions of an `import:` study.
pub async fn importing_sessions(store: &dyn Store) -> Result<HashSet<String>, StoreError> {
    let live = SessionFilter {
        status: Some(SessionStatus::Live),
        ..SessionFilter::default()
    };
    Ok(store
        .list_sessions(&live)
        .await?
        .into_iter()
        .filter(|s| s.study_id.starts_with(IMPORT_STUDY_PREFIX))
        .map(|s| s.id)
        .collect())
}

/// Ids of the test dialogues (of `study`, when given): those with a test participant (`/try`, a
/// lab link with `test=1`; see [`wozkit_store::TEST_KEY`]). Imported sessions have no
/// participants, so only live studies' sessions are asked about.
pub async fn test_session_ids(
    store: &dyn Store,
    study: Option<&str>,
) -> Result<HashSet<String>, StoreError> {
    let filter = SessionFilter {
        study_id: study.map(str::to_string),
        kind: SessionKind::Dialogue,
        ..SessionFilter::default()
    };
    let mut out = HashSet::new();
    for s in store.list_sessions(&filter).await? {
        if s.study_id.starts_with(IMPORT_STUDY_PREFIX) {
            continue;
        }
        let people = store.participants_in_session(&s.id).await?;
        if people.iter().any(|p| p.is_test()) {
            out.insert(s.id);
        }
    }
    Ok(out)
}

/// Ids of every visible dialogue (of `study`, when given), sorted; participant logs are not
/// listed.
pub async fn visible_session_ids(
    store: &dyn Store,
    study: Option<&str>,
) -> Result<Vec<String>, StoreError> {
    let filter = SessionFilter {
        study_id: study.map(str::to_string),
        kind: SessionKind::Dialogue,
        ..SessionFilter::default()
    };
    let mut ids: Vec<String> = store
        .list_sessions(&filter)
        .await?
        .into_iter()
        .filter(|s| !(s.is_live() && s.study_id.starts_with(IMPORT_STUDY_PREFIX)))
        .map(|s| s.id)
        .collect();
    ids.sort();
    Ok(ids)
}
