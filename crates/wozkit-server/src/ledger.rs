//! The store's meta table as the ledger of payment and decision records
//! ([`wozkit_platforms::once`]): the one place the console and the command line keep what they
//! paid, so that both meet on the same records. It only reads and compare-and-sets values; what
//! the records mean is `once`'s business.

use wozkit_platforms::once::{self, Ledger};
use wozkit_store::Store;

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
