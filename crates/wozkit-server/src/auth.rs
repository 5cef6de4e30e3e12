//! Researcher access: accounts kept in the store (a unique name, an access level, an argon2id
//! password hash), logins kept in the store by the hash of their cookie token, and failed
//! logins kept there too, so accounts, logins and the login rate limit survive restarts and
//! hold across instances sharing a database.
//!
//! - A login lasts [`LOGIN_TTL_MS`] (12 hours) from the moment it was made: a fixed expiry,
//!   not a sliding one, so a request never writes to the store.
//! - Its CSRF token is derived from the cookie token, so it is never stored either.
//! - Changing an account's password, removing it, or "log out everywhere" ends its logins.
//! - After [`FAILED_LOGIN_LIMIT`] failed logins within [`FAILED_LOGIN_WINDOW_MS`] from one
//!   client (its address as the trusted proxies report it), that client is refused (429) until
//!   the oldest of them leaves the window: failures slow down whoever made them.
//! - The same number against one account name, from anywhere, refuses that name only to
//!   browsers the account has not logged in from: a successful login leaves a device cookie
//!   ([`DEVICE_COOKIE`]), and a browser holding the account's device cookie is counted on its
//!   own (by the cookie, not its address or the name), so nobody can lock a researcher out of
//!   their account from outside, while guessing from many addresses still stops.
//! - The first start without accounts creates the owner account [`ADMIN`]: from the old single
//!   password's hash when there is one, else with `WOZKIT_RESEARCHER_PASSWORD`, else with a
//!   generated password printed once.

use std::sync::OnceLock;

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use wozkit_store::{
    Account, NewAccount, NewLogin, Store, StoreError, hash_token, new_id, new_token,
};

use crate::app::now_ms;
/// `YYYY-MM-DD HH:MM:SS` (UTC) of an epoch time in milliseconds, as the account pages show it.
pub use crate::http::researcher::fmt_time;

/// Meta key of the single researcher password's hash of earlier versions (a PHC string); it
/// becomes the password of the [`ADMIN`] account.
const META_PASSWORD: &str = "researcher_password_argon2";
/// How long a login lasts, from the moment it was made (fixed, not sliding).
pub const LOGIN_TTL_MS: u64 = 12 * 3600 * 1000;
/// Failed logins allowed per client address and per account name within the window.
pub const FAILED_LOGIN_LIMIT: usize = 5;
/// The window the failed logins are counted in.
pub const FAILED_LOGIN_WINDOW_MS: u64 = 15 * 60 * 1000;
/// Cookie naming a browser that has logged in to an account before (see the module notes).
pub const DEVICE_COOKIE: &str = "wozkit_device";
/// How long a device cookie lasts.
pub const DEVICE_TTL_S: u64 = 180 * 24 * 3600;
/// Meta key prefix of a device cookie's hash; the value is the account id.
const DEVICE_PREFIX: &str = "researcher_device/";

/// The owner account created on first start (and whose password `WOZKIT_RESEARCHER_PASSWORD`
/// sets).
pub const ADMIN: &str = "admin";
/// Longest password accepted (argon2 would take any length; this bounds the work per request).
pub const MAX_PASSWORD_LEN: usize = 1024;
/// Shortest password accepted when one is chosen.
pub const MIN_PASSWORD_LEN: usize = 8;

/// Why an account could not be set up or changed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot hash the researcher password: {0}")]
    Hash(String),
    #[error("invalid account name {0:?}: use 1 to 64 letters, digits, dots, dashes or underscores")]
    InvalidName(String),
    #[error("the password must have {MIN_PASSWORD_LEN} to {MAX_PASSWORD_LEN} characters")]
    WeakPassword,
    #[error("there is no researcher account named {0:?}")]
    UnknownAccount(String),
    #[error("a researcher account named {0:?} already exists")]
    NameTaken(String),
    #[error("{0:?} is the last owner account; add another owner before removing it")]
    LastOwner(String),
}

/// Makes sure a researcher account exists to log in with (the owner [`ADMIN`]). With
/// `from_env` (e.g. `WOZKIT_RESEARCHER_PASSWORD`) that password becomes admin's (creating admin
/// if needed; admin's logins end if it changes); without it, the first start creates admin from
/// the old single password's hash if there is one, else with a generated password, which is
/// returned so the caller can print it once. Returns `None` when nothing new has to be shown.
pub async fn ensure_password(
    store: &dyn Store,
    from_env: Option<&str>,
) -> Result<Option<String>, AuthError> {
    if let Some(pw) = from_env.map(str::trim).filter(|p| !p.is_empty()) {
        match store.account_by_name(ADMIN).await? {
            Some(admin) if verify(&admin.password_hash, pw).await => {}
            Some(admin) => {
                store
                    .set_account_password(&admin.id, &hash_password(pw).await?)
                    .await?;
            }
            None => {
                create_quietly(store, ADMIN, Access::Owner, hash_password(pw).await?).await?;
            }
        }
        return Ok(None);
    }
    if !store.accounts().await?.is_empty() {
        return Ok(None);
    }
    if let Some(hash) = store.meta(META_PASSWORD).await? {
        create_quietly(store, ADMIN, Access::Owner, hash).await?;
        return Ok(None);
    }
    let pw = generate_password();
    let created = create_quietly(store, ADMIN, Access::Owner, hash_password(&pw).await?).await?;
    Ok(created.then_some(pw))
}

/// Creates an account; `false` if the name was taken meanwhile (another instance starting at
/// the same time created it).
async fn create_quietly(
    store: &dyn Store,
    name: &str,
    access: Access,
    hash: String,
) -> Result<bool, AuthError> {
    match store
        .create_account(NewAccount {
            id: new_id(),
            name: name.to_string(),
            access: access.as_str().to_string(),
            password_hash: hash,
            created_at_ms: now_ms(),
        })
        .await
    {
        Ok(_) => Ok(true),
        Err(StoreError::Conflict { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A new random password: 20 hex digits (80 bits), easy to copy from a terminal.
pub fn generate_password() -> String {
    new_token().0.chars().take(20).collect()
}

/// Checks an account name: 1 to 64 ASCII letters, digits, `.`, `-` or `_`.
pub fn check_name(name: &str) -> Result<(), AuthError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(AuthError::InvalidName(name.to_string()))
    }
}

/// Checks a chosen password's length.
pub fn check_password_rules(pw: &str) -> Result<(), AuthError> {
    if (MIN_PASSWORD_LEN..=MAX_PASSWORD_LEN).contains(&pw.chars().count()) {
        Ok(())
    } else {
        Err(AuthError::WeakPassword)
    }
}

/// Creates an account with `password`, or a generated one (returned, to show once).
pub async fn add_account(
    store: &dyn Store,
    name: &str,
    access: Access,
    password: Option<&str>,
) -> Result<(Account, Option<String>), AuthError> {
    check_name(name)?;
    let (pw, generated) = match password {
        Some(pw) => {
            check_password_rules(pw)?;
            (pw.to_string(), false)
        }
        None => (generate_password(), true),
    };
    let account = store
        .create_account(NewAccount {
            id: new_id(),
            name: name.to_string(),
            access: access.as_str().to_string(),
            password_hash: hash_password(&pw).await?,
            created_at_ms: now_ms(),
        })
        .await
        .map_err(|e| match e {
            StoreError::Conflict { .. } => AuthError::NameTaken(name.to_string()),
            e => e.into(),
        })?;
    Ok((account, generated.then_some(pw)))
}

/// Sets the password of the account named `name` (generating one when `password` is `None`,
/// returned to show once) and ends its logins.
pub async fn set_password(
    store: &dyn Store,
    name: &str,
    password: Option<&str>,
) -> Result<Option<String>, AuthError> {
    let account = store
        .account_by_name(name)
        .await?
        .ok_or_else(|| AuthError::UnknownAccount(name.to_string()))?;
    let (pw, generated) = match password {
        Some(pw) => {
            check_password_rules(pw)?;
            (pw.to_string(), false)
        }
        None => (generate_password(), true),
    };
    if !store
        .set_account_password(&account.id, &hash_password(&pw).await?)
        .await?
    {
        return Err(AuthError::UnknownAccount(name.to_string()));
    }
    Ok(generated.then_some(pw))
}

/// Removes the account named `name` and ends its logins; the last owner account stays.
pub async fn remove_account(store: &dyn Store, name: &str) -> Result<Account, AuthError> {
    let accounts = store.accounts().await?;
    let account = accounts
        .iter()
        .find(|a| a.name == name)
        .cloned()
        .ok_or_else(|| AuthError::UnknownAccount(name.to_string()))?;
    let owners = accounts
        .iter()
        .filter(|a| a.access == Access::Owner.as_str())
        .count();
    if account.access == Access::Owner.as_str() && owners <= 1 {
        return Err(AuthError::LastOwner(name.to_string()));
    }
    if !store.remove_account(&account.id, now_ms()).await? {
        return Err(AuthError::UnknownAccount(name.to_string()));
    }
    Ok(account)
}

/// Argon2 takes tens of milliseconds of CPU: keep it off the async workers.
pub async fn hash_password(pw: &str) -> Result<String, AuthError> {
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

/// Whether `pw` matches the PHC string `hash` (off the async workers).
pub async fn verify(hash: &str, pw: &str) -> bool {
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

/// A hash no password matches, verified against when the name is unknown so that a wrong name
/// takes as long as a wrong password.
async fn decoy_hash() -> &'static str {
    static DECOY: OnceLock<String> = OnceLock::new();
    if let Some(h) = DECOY.get() {
        return h;
    }
    let h = hash_password(&generate_password())
        .await
        .unwrap_or_default();
    DECOY.get_or_init(|| h)
}

/// What a login attempt came to.
#[derive(Debug)]
pub enum LoginOutcome {
    /// Logged in: the cookie token to set, and a new device cookie when the browser had none
    /// for this account.
    LoggedIn {
        token: String,
        device: Option<String>,
    },
    /// Wrong name or password (recorded against the address and the name).
    Wrong,
    /// Too many failed logins from this address or against this name; retry after so many
    /// seconds.
    Limited { retry_after_s: u64 },
}

/// Tries to log in with `name` and `password` from client `address`, in a browser holding the
/// device cookie `device` (if any).
pub async fn log_in(
    store: &dyn Store,
    sessions: &ResearcherSessions,
    address: &str,
    device: Option<&str>,
    name: &str,
    password: &str,
) -> Result<LoginOutcome, StoreError> {
    let now = now_ms();
    // Bounded, so a long name cannot bloat the failed-logins table.
    let name: String = name.chars().take(64).collect();
    let since = now.saturating_sub(FAILED_LOGIN_WINDOW_MS);
    let account = store.account_by_name(&name).await?;
    // A browser this account logged in from is counted by its device cookie alone.
    let device_hash = device.filter(|d| d.len() <= 256).map(hash_token);
    let known = match (&device_hash, &account) {
        (Some(hash), Some(a)) => {
            store
                .meta(&format!("{DEVICE_PREFIX}{hash}"))
                .await?
                .as_deref()
                == Some(&a.id)
        }
        _ => false,
    };
    let client = match (&device_hash, known) {
        (Some(hash), true) => format!("device:{}", &hash[..32]),
        _ => address.to_owned(),
    };
    let failed = store.failed_logins(&client, &name, since).await?;
    let mut counted = vec![&failed.by_address];
    if !known {
        counted.push(&failed.by_name);
    }
    let retry_at = counted
        .iter()
        .filter(|times| times.len() >= FAILED_LOGIN_LIMIT)
        .map(|times| times[times.len() - FAILED_LOGIN_LIMIT] + FAILED_LOGIN_WINDOW_MS)
        .max();
    if let Some(at) = retry_at {
        return Ok(LoginOutcome::Limited {
            retry_after_s: at.saturating_sub(now).div_ceil(1000).max(1),
        });
    }
    let access = account.as_ref().and_then(|a| Access::parse(&a.access));
    let ok = match (&account, access) {
        (Some(a), Some(_)) if password.len() <= MAX_PASSWORD_LEN => {
            verify(&a.password_hash, password).await
        }
        _ => {
            let _ = verify(decoy_hash().await, password).await;
            false
        }
    };
    let Some(account) = account.filter(|_| ok) else {
        store
            .record_failed_login(&client, &name, now, since)
            .await?;
        return Ok(LoginOutcome::Wrong);
    };
    store.clear_failed_logins(&name).await?;
    let device = if known {
        None
    } else {
        let (token, hash) = new_token();
        store
            .set_meta(&format!("{DEVICE_PREFIX}{hash}"), &account.id)
            .await?;
        Some(token)
    };
    Ok(LoginOutcome::LoggedIn {
        token: sessions.create(store, &account.id).await?,
        device,
    })
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
    /// The level's name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Observer => "observer",
            Access::Researcher => "researcher",
            Access::Owner => "owner",
        }
    }

    /// The level named `s` (`observer`, `researcher` or `owner`).
    pub fn parse(s: &str) -> Option<Access> {
        match s {
            "observer" => Some(Access::Observer),
            "researcher" => Some(Access::Researcher),
            "owner" => Some(Access::Owner),
            _ => None,
        }
    }

    /// Every level, least first.
    pub const ALL: [Access; 3] = [Access::Observer, Access::Researcher, Access::Owner];
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

/// The CSRF token of the login whose cookie token is `token`.
fn csrf_of(token: &str) -> String {
    hash_token(&format!("csrf:{token}"))
}

/// Logins as the store keeps them. Every check asks the store, so a login ended anywhere
/// (another instance, the `wozkit researchers` command) is refused on the next request.
#[derive(Default)]
pub struct ResearcherSessions;

impl ResearcherSessions {
    /// Starts a login of the account; returns the cookie token.
    pub async fn create(&self, store: &dyn Store, account_id: &str) -> Result<String, StoreError> {
        let (token, hash) = new_token();
        let now = now_ms();
        store
            .create_login(NewLogin {
                token_hash: hash,
                account_id: account_id.to_string(),
                created_at_ms: now,
                expires_at_ms: now + LOGIN_TTL_MS,
            })
            .await?;
        Ok(token)
    }

    /// The researcher of a current login, if the cookie token is one.
    pub async fn get(&self, store: &dyn Store, token: &str) -> Option<Researcher> {
        let hash = hash_token(token);
        let now = now_ms();
        let found = match store.login(&hash, now).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!("cannot read researcher logins: {e}");
                None
            }
        };
        let login = found?;
        let access = Access::parse(&login.account.access)?;
        Some(Researcher {
            id: login.account.id,
            name: login.account.name,
            access,
            csrf: csrf_of(token),
        })
    }

    /// Ends one login.
    pub async fn remove(&self, store: &dyn Store, token: &str) -> Result<(), StoreError> {
        store.end_login(&hash_token(token)).await?;
        Ok(())
    }

    /// Ends every login of the account ("log out everywhere").
    pub async fn remove_all(&self, store: &dyn Store, account_id: &str) -> Result<(), StoreError> {
        store.end_logins(account_id).await?;
        Ok(())
    }
}
