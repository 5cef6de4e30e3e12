//! Conversions between the crate's records and database rows, shared by both backends so they
//! store exactly the same text: events as JSON (`actor` and the kind with its payload in two
//! columns), enums as their snake_case names, integers as `i64` (checked, never wrapped), seeds as
//! decimal text (a `u64` does not fit a signed 64-bit column).

use std::collections::BTreeMap;

use sqlx::{ColumnIndex, Decode, Row, Type};
use wozkit_core::event::{EVENT_SCHEMA_VERSION, EndReason, Event, ItemPool, Role};

use crate::error::{Result, StoreError};
use crate::model::{
    Account, ClaimRequest, FailedLogins, ItemCount, Lease, LeaseState, LiveLogin, NewEvent,
    NewParticipant, Participant, Platform, SessionEnd, SessionKind, SessionRecord,
};

/// An event ready to insert: the columns that do not depend on its `seq`.
#[derive(Debug)]
pub(crate) struct EncodedEvent {
    pub at_ms: i64,
    pub actor: String,
    pub payload: String,
}

/// Encodes events before they reach the writer, so JSON work runs on the caller's task.
pub(crate) fn encode_events(events: &[NewEvent]) -> Result<Vec<EncodedEvent>> {
    events
        .iter()
        .map(|e| {
            Ok(EncodedEvent {
                at_ms: to_i64("event time", e.at_ms)?,
                actor: serde_json::to_string(&e.actor).map_err(StoreError::Encode)?,
                payload: serde_json::to_string(&e.kind).map_err(StoreError::Encode)?,
            })
        })
        .collect()
}

/// The stored form of appended events, numbered from `first_seq`.
pub(crate) fn stored_events(session: &str, first_seq: u64, events: Vec<NewEvent>) -> Vec<Event> {
    (first_seq..)
        .zip(events)
        .map(|(seq, e)| Event {
            v: EVENT_SCHEMA_VERSION,
            session: session.to_owned(),
            seq,
            at_ms: e.at_ms,
            actor: e.actor,
            kind: e.kind,
        })
        .collect()
}

pub(crate) fn to_i64(what: &'static str, value: u64) -> Result<i64> {
    i64::try_from(value).map_err(|_| StoreError::OutOfRange { what, value })
}

fn to_u64(what: &'static str, value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| corrupt(what, format!("negative value {value}")))
}

fn corrupt(what: &'static str, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        what,
        detail: detail.into(),
    }
}

pub(crate) fn end_reason_name(reason: EndReason) -> &'static str {
    reason.as_str()
}

fn parse_end_reason(name: &str) -> Result<EndReason> {
    serde_json::from_value(serde_json::Value::String(name.to_owned()))
        .map_err(|_| corrupt("session end reason", format!("unknown reason {name:?}")))
}

/// The error for a participant whose id, token hash or worker id is taken (both backends).
pub(crate) fn participant_conflict(new: &NewParticipant) -> StoreError {
    StoreError::Conflict {
        what: "participant (id, token or worker)",
        key: match &new.worker_id {
            Some(worker) => format!("{} / {} worker {worker}", new.id, new.platform.as_str()),
            None => new.id.clone(),
        },
    }
}

pub(crate) fn external_ids_json(ids: &BTreeMap<String, String>) -> Result<String> {
    serde_json::to_string(ids).map_err(StoreError::Encode)
}

/// Decodes rows of both backends; the bounds say "this database reads `i64` and text".
pub(crate) trait RowExt: Row {
    fn text(&self, col: &str) -> Result<String>;
    fn opt_text(&self, col: &str) -> Result<Option<String>>;
    fn int(&self, col: &str) -> Result<i64>;
    fn opt_int(&self, col: &str) -> Result<Option<i64>>;
}

impl<R> RowExt for R
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    fn text(&self, col: &str) -> Result<String> {
        Ok(self.try_get(col)?)
    }
    fn opt_text(&self, col: &str) -> Result<Option<String>> {
        Ok(self.try_get(col)?)
    }
    fn int(&self, col: &str) -> Result<i64> {
        Ok(self.try_get(col)?)
    }
    fn opt_int(&self, col: &str) -> Result<Option<i64>> {
        Ok(self.try_get(col)?)
    }
}

/// An event from a row with columns `session_id, seq, v, at_ms, actor, payload`.
pub(crate) fn event_from_row(row: &impl RowExt) -> Result<Event> {
    let session = row.text("session_id")?;
    let seq = to_u64("event seq", row.int("seq")?)?;
    let v = u32::try_from(row.int("v")?).map_err(|_| corrupt("event version", "out of range"))?;
    let at_ms = to_u64("event time", row.int("at_ms")?)?;
    let actor = serde_json::from_str(&row.text("actor")?)
        .map_err(|e| corrupt("event actor", format!("{session} #{seq}: {e}")))?;
    let kind = serde_json::from_str(&row.text("payload")?)
        .map_err(|e| corrupt("event payload", format!("{session} #{seq}: {e}")))?;
    Ok(Event {
        v,
        session,
        seq,
        at_ms,
        actor,
        kind,
    })
}

/// A session from a row with the `sessions` columns plus `last_seq`.
pub(crate) fn session_from_row(row: &impl RowExt) -> Result<SessionRecord> {
    let seed_text = row.text("seed")?;
    let seed = seed_text
        .parse()
        .map_err(|_| corrupt("session seed", format!("not a u64: {seed_text:?}")))?;
    let ended = match (row.opt_text("end_reason")?, row.opt_int("ended_at_ms")?) {
        (Some(reason), Some(at)) => Some(SessionEnd {
            reason: parse_end_reason(&reason)?,
            at_ms: to_u64("session end time", at)?,
        }),
        (None, None) => None,
        _ => {
            return Err(corrupt(
                "session end",
                "reason and time must be set together",
            ));
        }
    };
    Ok(SessionRecord {
        id: row.text("id")?,
        study_id: row.text("study_id")?,
        study_version: row.text("study_version")?,
        seed,
        created_at_ms: to_u64("session creation time", row.int("created_at_ms")?)?,
        kind: parse_session_kind(&row.text("kind")?)?,
        ended,
        last_seq: to_u64("session last seq", row.int("last_seq")?)?,
    })
}

fn parse_session_kind(name: &str) -> Result<SessionKind> {
    match name {
        "dialogue" => Ok(SessionKind::Dialogue),
        "participant" => Ok(SessionKind::Participant),
        _ => Err(corrupt("session kind", format!("unknown kind {name:?}"))),
    }
}

pub(crate) fn parse_pool(name: &str) -> Result<ItemPool> {
    match name {
        "item" => Ok(ItemPool::Item),
        "gold" => Ok(ItemPool::Gold),
        _ => Err(corrupt("item pool", format!("unknown pool {name:?}"))),
    }
}

pub(crate) fn parse_lease_state(name: &str) -> Result<LeaseState> {
    match name {
        "leased" => Ok(LeaseState::Leased),
        "done" => Ok(LeaseState::Done),
        "surplus" => Ok(LeaseState::Surplus),
        "returned" => Ok(LeaseState::Returned),
        _ => Err(corrupt("lease state", format!("unknown state {name:?}"))),
    }
}

/// An item's or lease's dialogues as stored: a JSON array of ids.
pub(crate) fn dialogues_json(dialogues: &[String]) -> Result<String> {
    serde_json::to_string(dialogues).map_err(StoreError::Encode)
}

fn parse_dialogues(what: &'static str, json: &str) -> Result<Vec<String>> {
    serde_json::from_str(json).map_err(|e| corrupt(what, e.to_string()))
}

/// The lease a claim was just granted: item `item_id`, whose stored dialogues are `dialogues`
/// (JSON), until `expires_at_ms`.
pub(crate) fn granted_lease(
    req: &ClaimRequest,
    item_id: String,
    dialogues: &str,
    expires_at_ms: i64,
) -> Result<Lease> {
    let dialogues = serde_json::from_str(dialogues)
        .map_err(|e| corrupt("item dialogues", format!("{}/{item_id}: {e}", req.study_id)))?;
    Ok(Lease {
        id: req.lease_id.clone(),
        study_id: req.study_id.clone(),
        item_id,
        worker: req.worker.clone(),
        pool: req.pool,
        dialogues,
        claimed_at_ms: req.now_ms,
        expires_at_ms: u64::try_from(expires_at_ms).unwrap_or(u64::MAX),
        state: LeaseState::Leased,
    })
}

/// A lease from a row with the `leases` columns.
pub(crate) fn lease_from_row(row: &impl RowExt) -> Result<Lease> {
    Ok(Lease {
        id: row.text("id")?,
        study_id: row.text("study_id")?,
        item_id: row.text("item_id")?,
        worker: row.text("worker")?,
        pool: parse_pool(&row.text("pool")?)?,
        dialogues: parse_dialogues("lease dialogues", &row.text("dialogues")?)?,
        claimed_at_ms: to_u64("lease claim time", row.int("claimed_at_ms")?)?,
        expires_at_ms: to_u64("lease expiry time", row.int("expires_at_ms")?)?,
        state: parse_lease_state(&row.text("state")?)?,
    })
}

/// An item's figures from a row with columns `item_id, pool, needed, done, surplus, active,
/// returned, expired`.
pub(crate) fn item_count_from_row(row: &impl RowExt) -> Result<ItemCount> {
    let count = |col: &'static str| -> Result<u32> {
        let value = row.int(col)?;
        u32::try_from(value).map_err(|_| corrupt("item count", format!("{col}: {value}")))
    };
    Ok(ItemCount {
        item_id: row.text("item_id")?,
        pool: parse_pool(&row.text("pool")?)?,
        needed: count("needed")?,
        done: count("done")?,
        surplus: count("surplus")?,
        active: count("active")?,
        returned: count("returned")?,
        expired: count("expired")?,
    })
}

/// The `item_counts` query after its `FROM`, with `{study}` and `{now}` for the parameters.
pub(crate) fn item_counts_sql(study: &str, now: &str) -> String {
    let sum = |cond: &str| format!("COALESCE(SUM(CASE WHEN {cond} THEN 1 ELSE 0 END), 0)");
    format!(
        "SELECT i.item_id, i.pool, i.needed, {done} AS done, {surplus} AS surplus, \
         {active} AS active, {returned} AS returned, {expired} AS expired \
         FROM eval_items i LEFT JOIN leases l ON l.study_id = i.study_id AND l.item_id = i.item_id \
         WHERE i.study_id = {study} GROUP BY i.item_id, i.pool, i.needed ORDER BY i.item_id",
        done = sum("l.state = 'done'"),
        surplus = sum("l.state = 'surplus'"),
        active = sum(&format!("l.state = 'leased' AND l.expires_at_ms > {now}")),
        returned = sum("l.state = 'returned'"),
        expired = sum(&format!("l.state = 'leased' AND l.expires_at_ms <= {now}")),
    )
}

/// A participant from a row with the `participants` columns.
pub(crate) fn participant_from_row(row: &impl RowExt) -> Result<Participant> {
    let platform_name = row.text("platform")?;
    let platform = Platform::parse(&platform_name)
        .ok_or_else(|| corrupt("participant platform", platform_name))?;
    let role = match row.opt_text("role")? {
        Some(name) => Some(Role::parse(&name).ok_or_else(|| corrupt("participant role", name))?),
        None => None,
    };
    let external_ids = serde_json::from_str(&row.text("external_ids")?)
        .map_err(|e| corrupt("participant external ids", e.to_string()))?;
    Ok(Participant {
        id: row.text("id")?,
        token_hash: row.text("token_hash")?,
        study_id: row.text("study_id")?,
        platform,
        worker_id: row.opt_text("worker_id")?,
        external_ids,
        role,
        session_id: row.opt_text("session_id")?,
        flow_step: row.text("flow_step")?,
        completion_code: row.opt_text("completion_code")?,
        created_at_ms: to_u64("participant creation time", row.int("created_at_ms")?)?,
    })
}

/// The columns of an account row, for `SELECT`s.
pub(crate) const ACCOUNT_COLUMNS: &str =
    "id, name, access, password_hash, created_at_ms, removed_at_ms";

/// An account from a row with [`ACCOUNT_COLUMNS`].
pub(crate) fn account_from_row(row: &impl RowExt) -> Result<Account> {
    Ok(Account {
        id: row.text("id")?,
        name: row.text("name")?,
        access: row.text("access")?,
        password_hash: row.text("password_hash")?,
        created_at_ms: to_u64("account creation time", row.int("created_at_ms")?)?,
        removed_at_ms: row
            .opt_int("removed_at_ms")?
            .map(|t| to_u64("account removal time", t))
            .transpose()?,
    })
}

/// A live login from a row with [`ACCOUNT_COLUMNS`] (of its account) plus `login_created_ms`
/// and `login_expires_ms`.
pub(crate) fn live_login_from_row(row: &impl RowExt) -> Result<LiveLogin> {
    Ok(LiveLogin {
        account: account_from_row(row)?,
        created_at_ms: to_u64("login creation time", row.int("login_created_ms")?)?,
        expires_at_ms: to_u64("login expiry time", row.int("login_expires_ms")?)?,
    })
}

/// Failed login times from rows `(kind, at_ms)`, split by kind (`address` or `name`).
pub(crate) fn failed_logins_from_rows(rows: &[impl RowExt]) -> Result<FailedLogins> {
    let mut out = FailedLogins::default();
    for row in rows {
        let at = to_u64("failed login time", row.int("at_ms")?)?;
        match row.text("kind")?.as_str() {
            "address" => out.by_address.push(at),
            "name" => out.by_name.push(at),
            other => return Err(corrupt("failed login kind", other.to_owned())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_end_reason_round_trips_through_its_name() {
        use EndReason::*;
        for reason in [
            Terminal, TimeLimit, Finished, Disconnect, NoPartner, Aborted,
        ] {
            assert_eq!(parse_end_reason(end_reason_name(reason)).ok(), Some(reason));
        }
    }

    #[test]
    fn out_of_range_time_is_an_error_not_a_wrap() {
        assert!(matches!(
            to_i64("t", u64::MAX),
            Err(StoreError::OutOfRange { .. })
        ));
    }
}
