//! The vocabularies of the released datasets that exports must stay within (the tables live in
//! [`wozkit_core::datasets`], where the loader checks the studies' mappings against them):
//! MultiWOZ 2.1's seven domains with their belief-state slots (`metadata`), its act domains,
//! intents and slots, and CrossWOZ's five domains with their system-state slots and its
//! intents. A study's act, domain or slot outside these is never written as if it were the
//! format's; the sidecar keeps the event it came from (see `docs/datasets.md`).

use serde_json::{Value, json};

pub(crate) use wozkit_core::datasets::{
    CROSSWOZ_DOMAINS, MULTIWOZ_DOMAINS, crosswoz_slots, is_crosswoz_act, is_multiwoz_act,
};

use super::record::Fields;

/// A system turn's `metadata` with every domain and slot of the released files, each value
/// `""` (untouched), then `set(domain, part, slot)` giving a value where the session has one.
pub(crate) fn multiwoz_metadata(set: impl Fn(&str, &str, &str) -> Option<String>) -> Value {
    let mut meta = Fields::new();
    for (domain, book, semi) in MULTIWOZ_DOMAINS {
        let mut b = Fields::new();
        b.insert("booked".into(), json!([]));
        for slot in book {
            let v = set(domain, "book", slot).unwrap_or_default();
            b.insert((*slot).into(), json!(v));
        }
        let mut s = Fields::new();
        for slot in semi {
            let v = set(domain, "semi", slot).unwrap_or_default();
            s.insert((*slot).into(), json!(v));
        }
        meta.insert(domain.into(), json!({"book": b, "semi": s}));
    }
    Value::Object(meta)
}
