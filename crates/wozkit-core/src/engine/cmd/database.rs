//! `query` and `select`: the wizard searches the study's database and selects a row into
//! the dialogue.

use crate::database::Filter;
use crate::engine::Tx;
use crate::engine::command::{Refusal, need_role};
use crate::event::{Actor, EventKind, Role};

/// The wizard searches `table` with `filters`; the rows found go to the wizard only.
pub(in crate::engine) fn query(
    tx: &mut Tx<'_>,
    actor: &Actor,
    table: String,
    filters: Vec<Filter>,
) -> Result<(), Refusal> {
    let study = tx.study;
    need_role(actor, Role::Wizard)?;
    let db = study.database.as_ref().ok_or(Refusal::NoDatabase)?;
    let found = db
        .query(&table, &filters, crate::database::MAX_RESULTS)
        .map_err(|problem| Refusal::Database { problem })?;
    tx.emit(
        actor.clone(),
        EventKind::DbQueried {
            table,
            filters,
            result_keys: found.keys,
            rows: found.rows,
        },
    );
    Ok(())
}

/// The wizard selects the row `key` of `table` into the dialogue.
pub(in crate::engine) fn select(
    tx: &mut Tx<'_>,
    actor: &Actor,
    table: String,
    key: String,
) -> Result<(), Refusal> {
    let study = tx.study;
    need_role(actor, Role::Wizard)?;
    let db = study.database.as_ref().ok_or(Refusal::NoDatabase)?;
    let row = db
        .select(&table, &key)
        .map_err(|problem| Refusal::Database { problem })?;
    tx.emit(actor.clone(), EventKind::DbSelected { table, key, row });
    Ok(())
}
