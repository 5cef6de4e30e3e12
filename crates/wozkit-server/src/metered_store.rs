//! The store every part of the server uses: the configured store wrapped so that each write of
//! events (`append`, `append_once`, `submit`) is timed and its events counted, once and in one
//! place (`crate::metrics`). Every other call goes straight through.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use wozkit_core::event::{EndReason, Event};
use wozkit_store::{
    Account, ClaimRequest, EvalItem, EventCursor, FailedLogins, ItemCount, Lease, LiveLogin,
    NewAccount, NewEvent, NewLogin, NewParticipant, NewSession, Participant, ParticipantPatch,
    Platform, Result, SessionFilter, SessionRecord, Store, SubmitOutcome,
};

use wozkit_store::store::RoomLease;
use wozkit_store::store::{JoinedLobby, NewWaiter, Waiter};

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
impl Store for MeteredStore {
    async fn create_session(&self, new: NewSession) -> Result<SessionRecord> {
        self.inner.create_session(new).await
    }
    async fn session(&self, id: &str) -> Result<Option<SessionRecord>> {
        self.inner.session(id).await
    }
    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        self.inner.list_sessions(filter).await
    }
    async fn count_sessions(&self, filter: &SessionFilter) -> Result<u64> {
        self.inner.count_sessions(filter).await
    }
    async fn end_session(&self, id: &str, reason: EndReason, at_ms: u64) -> Result<bool> {
        self.inner.end_session(id, reason, at_ms).await
    }
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
    async fn create_participant(&self, new: NewParticipant) -> Result<Participant> {
        self.inner.create_participant(new).await
    }
    async fn participant(&self, id: &str) -> Result<Option<Participant>> {
        self.inner.participant(id).await
    }
    async fn participant_by_token_hash(&self, token_hash: &str) -> Result<Option<Participant>> {
        self.inner.participant_by_token_hash(token_hash).await
    }
    async fn participant_by_worker(
        &self,
        study_id: &str,
        platform: Platform,
        worker_id: &str,
    ) -> Result<Option<Participant>> {
        self.inner
            .participant_by_worker(study_id, platform, worker_id)
            .await
    }
    async fn participants_in_session(&self, session_id: &str) -> Result<Vec<Participant>> {
        self.inner.participants_in_session(session_id).await
    }
    async fn list_participants(&self, study_id: Option<&str>) -> Result<Vec<Participant>> {
        self.inner.list_participants(study_id).await
    }
    async fn update_participant(&self, id: &str, patch: ParticipantPatch) -> Result<Participant> {
        self.inner.update_participant(id, patch).await
    }
    async fn open_participant_log(&self, new: NewSession) -> Result<SessionRecord> {
        self.inner.open_participant_log(new).await
    }
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
    async fn create_account(&self, new: NewAccount) -> Result<Account> {
        self.inner.create_account(new).await
    }
    async fn account(&self, id: &str) -> Result<Option<Account>> {
        self.inner.account(id).await
    }
    async fn account_by_name(&self, name: &str) -> Result<Option<Account>> {
        self.inner.account_by_name(name).await
    }
    async fn accounts(&self) -> Result<Vec<Account>> {
        self.inner.accounts().await
    }
    async fn set_account_password(&self, id: &str, password_hash: &str) -> Result<bool> {
        self.inner.set_account_password(id, password_hash).await
    }
    async fn remove_account(&self, id: &str, at_ms: u64) -> Result<bool> {
        self.inner.remove_account(id, at_ms).await
    }
    async fn create_login(&self, login: NewLogin) -> Result<()> {
        self.inner.create_login(login).await
    }
    async fn login(&self, token_hash: &str, now_ms: u64) -> Result<Option<LiveLogin>> {
        self.inner.login(token_hash, now_ms).await
    }
    async fn end_login(&self, token_hash: &str) -> Result<bool> {
        self.inner.end_login(token_hash).await
    }
    async fn end_logins(&self, account_id: &str) -> Result<u64> {
        self.inner.end_logins(account_id).await
    }
    async fn record_failed_login(
        &self,
        address: &str,
        name: &str,
        at_ms: u64,
        forget_before_ms: u64,
    ) -> Result<()> {
        self.inner
            .record_failed_login(address, name, at_ms, forget_before_ms)
            .await
    }
    async fn failed_logins(
        &self,
        address: &str,
        name: &str,
        since_ms: u64,
    ) -> Result<FailedLogins> {
        self.inner.failed_logins(address, name, since_ms).await
    }
    async fn clear_failed_logins(&self, name: &str) -> Result<()> {
        self.inner.clear_failed_logins(name).await
    }
    async fn join_lobby(&self, entry: NewWaiter, live_since_ms: u64) -> Result<JoinedLobby> {
        self.inner.join_lobby(entry, live_since_ms).await
    }
    async fn lobby_heard(
        &self,
        participant: &str,
        instance: &str,
        conn: u64,
        at_ms: u64,
    ) -> Result<bool> {
        self.inner
            .lobby_heard(participant, instance, conn, at_ms)
            .await
    }
    async fn leave_lobby(&self, participant: &str, instance: &str, conn: u64) -> Result<bool> {
        self.inner.leave_lobby(participant, instance, conn).await
    }
    async fn waiters(&self, study_id: Option<&str>) -> Result<Vec<Waiter>> {
        self.inner.waiters(study_id).await
    }
    async fn lobby_presence(
        &self,
        study_id: &str,
        arrived_since_ms: u64,
        live_since_ms: u64,
    ) -> Result<wozkit_store::store::RoleCounts> {
        self.inner
            .lobby_presence(study_id, arrived_since_ms, live_since_ms)
            .await
    }
    async fn switch_lobby_role(&self, req: wozkit_store::store::RoleSwitch) -> Result<bool> {
        self.inner.switch_lobby_role(req).await
    }
    async fn notify_lobby(&self, notice: &str) -> Result<bool> {
        self.inner.notify_lobby(notice).await
    }
    async fn listen_lobby(&self) -> Result<Option<tokio::sync::mpsc::Receiver<String>>> {
        self.inner.listen_lobby().await
    }
    async fn acquire_room(
        &self,
        session: &str,
        instance: &str,
        address: &str,
        now_ms: u64,
        expires_at_ms: u64,
    ) -> Result<bool> {
        self.inner
            .acquire_room(session, instance, address, now_ms, expires_at_ms)
            .await
    }
    async fn renew_rooms(&self, instance: &str, expires_at_ms: u64) -> Result<Vec<String>> {
        self.inner.renew_rooms(instance, expires_at_ms).await
    }
    async fn release_room(&self, session: &str, instance: &str) -> Result<bool> {
        self.inner.release_room(session, instance).await
    }
    async fn room_owner(&self, session: &str) -> Result<Option<RoomLease>> {
        self.inner.room_owner(session).await
    }
    async fn claim_orphan_rooms(
        &self,
        instance: &str,
        address: &str,
        now_ms: u64,
        unowned_before_ms: u64,
        expires_at_ms: u64,
        limit: u32,
    ) -> Result<Vec<String>> {
        self.inner
            .claim_orphan_rooms(
                instance,
                address,
                now_ms,
                unowned_before_ms,
                expires_at_ms,
                limit,
            )
            .await
    }
    async fn meta(&self, key: &str) -> Result<Option<String>> {
        self.inner.meta(key).await
    }
    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.inner.set_meta(key, value).await
    }
    async fn meta_increment(&self, key: &str) -> Result<i64> {
        self.inner.meta_increment(key).await
    }
    async fn meta_swap(&self, key: &str, expected: Option<&str>, new: &str) -> Result<bool> {
        self.inner.meta_swap(key, expected, new).await
    }
    async fn close(&self) {
        self.inner.close().await
    }
}
