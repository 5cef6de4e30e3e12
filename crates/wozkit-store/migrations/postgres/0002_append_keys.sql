-- Keys of appends that may happen only once per session (`Store::append_once`): the key row is
-- inserted in the same transaction as the events, so the primary key decides which of two
-- concurrent appends is stored, also between instances sharing the database.
CREATE TABLE append_keys (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    key        TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
);
