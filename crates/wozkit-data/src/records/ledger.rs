//! What was paid, where the console and the command line both look: the store's meta table as
//! the ledger of payment and decision records ([`wozkit_platforms::once`]), the keys of a
//! participant's review bonus and decision records, and what a review bonus has paid so far. The
//! ledger only reads and compare-and-sets values; what the records mean is `once`'s business.

use wozkit_platforms::once::{self, Ledger, PaymentRecord};
use wozkit_store::Store;

use super::review_log::Reviewed;

/// A [`Ledger`] over a store's meta table (`MetaStore::meta`, `MetaStore::meta_swap`).
pub struct StoreLedger<'a>(pub &'a dyn Store);

#[once::async_trait]
impl Ledger for StoreLedger<'_> {
    async fn get(&self, key: &str) -> Result<Option<String>, String> {
        self.0.meta(key).await.map_err(|e| e.to_string())
    }

    async fn swap(&self, key: &str, expected: Option<&str>, new: &str) -> Result<bool, String> {
        self.0
            .meta_swap(key, expected, new)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The meta key of a participant's review bonus payments.
pub fn bonus_key(study: &str, participant: &str) -> String {
    format!("pay:review:{study}:{participant}")
}

/// The meta key of a participant's decision sent (approve, reject).
pub fn decision_key(study: &str, participant: &str) -> String {
    format!("pay:review:{study}:{participant}:decision")
}

/// Cents of a participant's review bonus paid so far: what the log shows was paid before there
/// were records, plus what the records paid; with an unsettled record, what it may have paid.
pub fn review_bonus_paid(r: &Reviewed, record: Option<&PaymentRecord>) -> u64 {
    let before_records = r.bonus_sent_cents.saturating_sub(r.record_sent_cents);
    before_records
        + record.map_or(r.record_sent_cents, |rec| {
            if rec.stage.settled() {
                rec.total_paid_cents()
            } else {
                rec.total_maybe_paid_cents()
            }
        })
}
