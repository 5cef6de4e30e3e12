//! Completion codes: what a participant pastes into the crowd platform to be paid.
//!
//! A code is the HMAC-SHA256 of the participant id under a 256-bit key kept in the store's meta
//! table, written as 8 Crockford base-32 characters (40 bits). It cannot be guessed or minted
//! without the key, it is the same every time it is computed for a participant (so issuing it
//! twice is harmless), and anyone holding the data directory can verify one
//! (`wozkit payments --verify CODE`).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use wozkit_store::{MetaStore, Result};

/// Meta key holding the hex-encoded code key.
const META_KEY: &str = "completion_code_key";
/// Characters of a code: Crockford's base 32 (no I, L, O or U, so nothing is misread).
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Length of a code.
pub const CODE_LEN: usize = 8;

/// The secret that signs completion codes.
#[derive(Clone)]
pub struct CodeKey([u8; 32]);

impl CodeKey {
    /// Reads the key from the store, creating it on first start. Instances started together on
    /// a new database all end up with the key that was stored first
    /// ([`MetaStore::meta_swap`] from absent), so a code issued by one verifies on every other.
    pub async fn load_or_create(store: &dyn MetaStore) -> Result<CodeKey> {
        if let Some(hex) = store.meta(META_KEY).await?
            && let Some(key) = from_hex(&hex)
        {
            return Ok(CodeKey(key));
        }
        let mut key = [0u8; 32];
        rand::fill(&mut key[..]);
        let mine = to_hex(&key);
        let current = store.meta(META_KEY).await?;
        if store.meta_swap(META_KEY, current.as_deref(), &mine).await? {
            return Ok(CodeKey(key));
        }
        // Another instance stored its key first: everyone uses that one.
        match store.meta(META_KEY).await?.and_then(|h| from_hex(&h)) {
            Some(key) => Ok(CodeKey(key)),
            None => Err(wozkit_store::StoreError::Conflict {
                what: "completion code key",
                key: META_KEY.to_owned(),
            }),
        }
    }

    /// Reads the key if the data directory has one.
    pub async fn load(store: &dyn MetaStore) -> Result<Option<CodeKey>> {
        Ok(store
            .meta(META_KEY)
            .await?
            .and_then(|h| from_hex(&h))
            .map(CodeKey))
    }

    /// 40 bits of the HMAC of `parts` (NUL between them) under `domain`, as 8 Crockford
    /// base-32 characters.
    fn mac(&self, domain: &[u8], parts: &[&str]) -> String {
        let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0) else {
            // HMAC takes keys of any length; this branch cannot run.
            return String::new();
        };
        mac.update(domain);
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                mac.update(b"\0");
            }
            mac.update(part.as_bytes());
        }
        let digest = mac.finalize().into_bytes();
        // 40 bits → 8 characters of 5 bits.
        let mut bits: u64 = 0;
        for b in &digest[..5] {
            bits = (bits << 8) | u64::from(*b);
        }
        (0..CODE_LEN)
            .rev()
            .map(|i| char::from(ALPHABET[((bits >> (i * 5)) & 31) as usize]))
            .collect()
    }

    /// The completion code of a participant.
    pub fn code(&self, participant_id: &str) -> String {
        self.mac(b"wozkit completion code v1\0", &[participant_id])
    }

    /// The signature of a lab link for participant `name` of `study` (`&sig=` of the link): with
    /// it, the link resumes that participant in any browser; without it, only the browser that
    /// holds the participant's cookie or token does.
    pub fn lab_signature(&self, study: &str, name: &str) -> String {
        self.mac(b"wozkit lab link v1\0", &[study, name])
    }

    /// Whether `code` is this participant's code (case and Crockford look-alikes forgiven).
    pub fn verify(&self, participant_id: &str, code: &str) -> bool {
        normalize(code) == self.code(participant_id)
    }
}

/// Upper-cases a typed code and maps the letters Crockford treats as digits.
pub fn normalize(code: &str) -> String {
    code.trim()
        .chars()
        .filter(|c| *c != '-' && !c.is_whitespace())
        .map(|c| match c.to_ascii_uppercase() {
            'O' => '0',
            'I' | 'L' => '1',
            other => other,
        })
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_distinct_and_verifiable() {
        let key = CodeKey([7u8; 32]);
        let a = key.code("p1");
        assert_eq!(a.len(), CODE_LEN);
        assert!(a.bytes().all(|b| ALPHABET.contains(&b)));
        assert_eq!(a, key.code("p1"));
        assert_ne!(a, key.code("p2"));
        assert!(key.verify("p1", &a.to_lowercase()));
        assert!(!key.verify("p2", &a));
        assert_ne!(a, CodeKey([8u8; 32]).code("p1"));
        // Lab signatures are another function of the key: a code is not a signature.
        let sig = key.lab_signature("s", "p1");
        assert_eq!(sig.len(), CODE_LEN);
        assert_ne!(sig, a);
        assert_ne!(sig, key.lab_signature("s", "p2"));
        assert_ne!(sig, key.lab_signature("t", "p1"));
    }

    #[test]
    fn hex_round_trip() {
        let k = [0xabu8; 32];
        assert_eq!(from_hex(&to_hex(&k)), Some(k));
        assert_eq!(from_hex("zz"), None);
    }
}
