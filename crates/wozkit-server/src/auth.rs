//! Researcher access: one password, stored as an argon2id hash in the store's meta table, and
//! login sessions held in memory (a restart asks the researcher to log in again, which is
//! cheaper than a sessions table for a single-researcher tool).

use std::collections::HashMap;
use std::sync::Mutex;

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use wozkit_store::{Store, StoreError, hash_token, new_token};

use crate::app::now_ms;

/// Meta key of the password hash (a PHC string).
const META_PASSWORD: &str = "researcher_password_argon2";
/// How long a researcher login lasts.
const LOGIN_TTL_MS: u64 = 12 * 3600 * 1000;

/// Why the password could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot hash the researcher password: {0}")]
    Hash(String),
}

/// Makes sure a researcher password exists. With `from_env` (e.g. `WOZKIT_RESEARCHER_PASSWORD`)
/// that password is stored (if it is not the stored one already); without it, a password is
/// generated on first start and returned so the caller can print it once. Returns `None` when
/// nothing new has to be shown.
pub async fn ensure_password(
    store: &dyn Store,
    from_env: Option<&str>,
) -> Result<Option<String>, AuthError> {
    let stored = store.meta(META_PASSWORD).await?;
    match from_env.map(str::trim).filter(|p| !p.is_empty()) {
        Some(pw) => {
            if let Some(hash) = &stored
                && verify(hash, pw).await
            {
                return Ok(None);
            }
            store
                .set_meta(META_PASSWORD, &hash_password(pw).await?)
                .await?;
            Ok(None)
        }
        None if stored.is_some() => Ok(None),
        None => {
            // 20 hex digits: 80 bits, easy to copy from a terminal.
            let pw: String = new_token().0.chars().take(20).collect();
            store
                .set_meta(META_PASSWORD, &hash_password(&pw).await?)
                .await?;
            Ok(Some(pw))
        }
    }
}

/// Whether `password` is the researcher password.
pub async fn check_password(store: &dyn Store, password: &str) -> Result<bool, StoreError> {
    Ok(match store.meta(META_PASSWORD).await? {
        Some(hash) => verify(&hash, password).await,
        None => false,
    })
}

/// Argon2 takes tens of milliseconds of CPU: keep it off the async workers.
async fn hash_password(pw: &str) -> Result<String, AuthError> {
    let pw = pw.to_string();
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(pw.as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| AuthError::Hash(e.to_string()))
    })
    .await
    .map_err(|e| AuthError::Hash(e.to_string()))?
}

async fn verify(hash: &str, pw: &str) -> bool {
    let (hash, pw) = (hash.to_string(), pw.to_string());
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&hash).is_ok_and(|parsed| {
            Argon2::default()
                .verify_password(pw.as_bytes(), &parsed)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false)
}

/// What a researcher account may do, from least to most. Ordered, so `access >= need` asks
/// whether an account may do what `need` allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// Reads everything, changes nothing.
    Observer,
    /// Runs studies: observes and takes over rooms, reviews, pays.
    Researcher,
    /// Everything, including accounts.
    Owner,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Observer => "observer",
            Access::Researcher => "researcher",
            Access::Owner => "owner",
        }
    }

    pub fn parse(s: &str) -> Option<Access> {
        match s {
            "observer" => Some(Access::Observer),
            "researcher" => Some(Access::Researcher),
            "owner" => Some(Access::Owner),
            _ => None,
        }
    }
}

/// A logged-in researcher, as a request sees them.
#[derive(Clone, Debug)]
pub struct Researcher {
    /// The account's id (stable; what the log records as the one who acted).
    pub id: String,
    /// The account's login name.
    pub name: String,
    pub access: Access,
    /// The login's CSRF token: every state-changing request carries it (a hidden form field
    /// `csrf`, or the `X-CSRF-Token` header from scripts).
    pub csrf: String,
}

impl Researcher {
    /// Whether this account may do what `need` allows.
    pub fn may(&self, need: Access) -> bool {
        self.access >= need
    }
}

/// Logged-in researchers: hashes of their cookie tokens and when each expires.
#[derive(Default)]
pub struct ResearcherSessions {
    /// A std mutex: held only for a map lookup, never across an await.
    tokens: Mutex<HashMap<String, u64>>,
}

impl ResearcherSessions {
    /// Starts a login; returns the cookie token.
    pub fn create(&self) -> String {
        let (token, hash) = new_token();
        let now = now_ms();
        if let Ok(mut map) = self.tokens.lock() {
            map.retain(|_, exp| *exp > now);
            map.insert(hash, now + LOGIN_TTL_MS);
        }
        token
    }

    /// The researcher of a current login, if the cookie token is one.
    pub fn get(&self, token: &str) -> Option<Researcher> {
        let hash = hash_token(token);
        let live = self
            .tokens
            .lock()
            .map(|map| map.get(&hash).is_some_and(|exp| *exp > now_ms()))
            .unwrap_or(false);
        live.then(|| Researcher {
            id: "owner".into(),
            name: "owner".into(),
            access: Access::Owner,
            csrf: hash_token(&format!("csrf:{token}")),
        })
    }

    /// Whether the cookie token belongs to a current login.
    pub fn valid(&self, token: &str) -> bool {
        self.get(token).is_some()
    }

    /// Ends a login.
    pub fn remove(&self, token: &str) {
        if let Ok(mut map) = self.tokens.lock() {
            map.remove(&hash_token(token));
        }
    }
}
