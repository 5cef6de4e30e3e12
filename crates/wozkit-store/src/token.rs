//! Participant tokens and record ids. A token is the participant's only credential: 256 random
//! bits from the operating system's generator (through `rand`'s thread generator, a CSPRNG seeded
//! from it). Only its SHA-256 is stored, so a leaked database does not let anyone act as a
//! participant.

use sha2::{Digest, Sha256};

/// Bytes of randomness in a participant token.
const TOKEN_BYTES: usize = 32;
/// Bytes of randomness in an id from [`new_id`].
const ID_BYTES: usize = 8;

/// A fresh participant token and the hash to store for it: `(token, hash_token(&token))`.
pub fn new_token() -> (String, String) {
    let mut bytes = [0u8; TOKEN_BYTES];
    rand::fill(&mut bytes[..]);
    let token = hex(&bytes);
    let hash = hash_token(&token);
    (token, hash)
}

/// The SHA-256 of a token, as lowercase hex: what the store keeps and looks up.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// A random id for a session or participant (64 bits as 16 hex digits): unique, not secret.
pub fn new_id() -> String {
    let mut bytes = [0u8; ID_BYTES];
    rand::fill(&mut bytes[..]);
    hex(&bytes)
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_hash_matches_and_tokens_differ() {
        let (token, hash) = new_token();
        assert_eq!(token.len(), TOKEN_BYTES * 2);
        assert_eq!(hash, hash_token(&token));
        assert_eq!(hash.len(), 64);
        assert_ne!(new_token().0, token);
    }

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn ids_are_hex() {
        let id = new_id();
        assert_eq!(id.len(), 16);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
