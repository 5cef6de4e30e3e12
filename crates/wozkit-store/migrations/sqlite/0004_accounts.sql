-- Researcher accounts, their logins and failed login attempts (for the login rate limit), kept
-- in the database so they survive restarts and hold across instances sharing it.

-- One row per account. A removed account keeps its row (the log names who acted by id) but
-- frees its name and can no longer log in. access: 'owner', 'researcher' or 'observer';
-- password_hash: an argon2 PHC string.
CREATE TABLE accounts (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    access        TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    removed_at_ms INTEGER
);
CREATE UNIQUE INDEX accounts_live_name ON accounts (name) WHERE removed_at_ms IS NULL;

-- One row per login: the hash of the cookie token (never the token), whose account, and when
-- it ends. The CSRF token is derived from the cookie token, so it is not stored.
CREATE TABLE logins (
    token_hash    TEXT PRIMARY KEY,
    account_id    TEXT NOT NULL REFERENCES accounts (id),
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);
CREATE INDEX logins_by_account ON logins (account_id);
CREATE INDEX logins_by_expiry ON logins (expires_at_ms);

-- One row per failed login and per thing it counts against: kind 'address' (the client's
-- address) or 'name' (the account name tried).
CREATE TABLE failed_logins (
    kind    TEXT NOT NULL,
    subject TEXT NOT NULL,
    at_ms   INTEGER NOT NULL
);
CREATE INDEX failed_logins_by_subject ON failed_logins (kind, subject, at_ms);
CREATE INDEX failed_logins_by_time ON failed_logins (at_ms);
