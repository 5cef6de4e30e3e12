//! The store every part of the server uses: the configured store wrapped so that each write of
//! events (`append`, `append_once`, `submit`) is timed and its events counted, once and in one
//! place (`crate::metrics`). It implements the two capabilities it changes (events, and claims
//! for `submit`); every other capability goes straight through ([`Forward`]).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use wozkit_core::event::Event;
use wozkit_store::{
    ClaimRequest, ClaimStore, EvalItem, EventCursor, EventStore, ItemCount, Lease, NewEvent,
    Result, Store, SubmitOutcome,
};

use wozkit_store::store::{
    Forward, ForwardAccounts, ForwardLobby, ForwardMeta, ForwardParticipants, ForwardRoomLeases,
    ForwardSessions,
};

use crate::metrics::{AppendOp, Metrics};

/// A [`Store`] that measures its event writes into [`Metrics`].
pub struct MeteredStore {
    inner: Arc<dyn Store>,
    metrics: Arc<Metrics>,
}

impl MeteredStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Store>, metrics: Arc<Metrics>) -> MeteredStore {
        MeteredStore { inner, metrics }
    }
}

#[async_trait]
impl EventStore for MeteredStore {
    async fn append(&self, session: &str, events: Vec<NewEvent>) -> Result<Vec<Event>> {
        let started = Instant::now();
        let out = self.inner.append(session, events).await;
        let n = out.as_ref().map_or(0, Vec::len);
        self.metrics
            .appended(AppendOp::Append, n, started.elapsed());
        out
    }
    async fn append_after(
        &self,
        session: &str,
        after_seq: u64,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Event>> {
        let started = Instant::now();
        let out = self.inner.append_after(session, after_seq, events).await;
        let n = out.as_ref().map_or(0, Vec::len);
        self.metrics
            .appended(AppendOp::Append, n, started.elapsed());
        out
    }
    async fn append_once(
        &self,
        session: &str,
        key: &str,
        events: Vec<NewEvent>,
    ) -> Result<Option<Vec<Event>>> {
        let started = Instant::now();
        let out = self.inner.append_once(session, key, events).await;
        let n = out.as_ref().map_or(0, |e| e.as_ref().map_or(0, Vec::len));
        self.metrics
            .appended(AppendOp::AppendOnce, n, started.elapsed());
        out
    }
    async fn events(&self, session: &str, after_seq: u64) -> Result<Vec<Event>> {
        self.inner.events(session, after_seq).await
    }
    async fn events_page(
        &self,
        study_id: Option<&str>,
        after: Option<&EventCursor>,
        limit: u32,
    ) -> Result<Vec<Event>> {
        self.inner.events_page(study_id, after, limit).await
    }
}

#[async_trait]
impl ClaimStore for MeteredStore {
    async fn register_items(&self, study_id: &str, items: &[EvalItem]) -> Result<()> {
        self.inner.register_items(study_id, items).await
    }
    async fn claim(&self, req: ClaimRequest) -> Result<Option<Lease>> {
        self.inner.claim(req).await
    }
    async fn lease(&self, lease_id: &str) -> Result<Option<Lease>> {
        self.inner.lease(lease_id).await
    }
    async fn open_lease(&self, study_id: &str, worker: &str) -> Result<Option<Lease>> {
        self.inner.open_lease(study_id, worker).await
    }
    async fn submit(
        &self,
        lease_id: &str,
        now_ms: u64,
        session: &str,
        events: Box<dyn FnOnce(SubmitOutcome) -> Vec<NewEvent> + Send>,
    ) -> Result<(SubmitOutcome, Vec<Event>)> {
        let started = Instant::now();
        let out = self.inner.submit(lease_id, now_ms, session, events).await;
        let n = out.as_ref().map_or(0, |(_, e)| e.len());
        self.metrics
            .appended(AppendOp::Submit, n, started.elapsed());
        out
    }
    async fn return_lease(&self, lease_id: &str, now_ms: u64) -> Result<bool> {
        self.inner.return_lease(lease_id, now_ms).await
    }
    async fn leases(&self, study_id: &str) -> Result<Vec<Lease>> {
        self.inner.leases(study_id).await
    }
    async fn item_counts(&self, study_id: &str, now_ms: u64) -> Result<Vec<ItemCount>> {
        self.inner.item_counts(study_id, now_ms).await
    }
}

#[async_trait]
impl Store for MeteredStore {
    async fn close(&self) {
        self.inner.close().await
    }
    fn memory(&self) -> Option<wozkit_store::cached::CacheFigures> {
        self.inner.memory()
    }
}

/// Everything else goes to the store as it is.
impl Forward for MeteredStore {
    type To = dyn Store;
    fn inner(&self) -> &dyn Store {
        self.inner.as_ref()
    }
}
impl ForwardSessions for MeteredStore {}
impl ForwardParticipants for MeteredStore {}
impl ForwardAccounts for MeteredStore {}
impl ForwardRoomLeases for MeteredStore {}
impl ForwardLobby for MeteredStore {}
impl ForwardMeta for MeteredStore {}
