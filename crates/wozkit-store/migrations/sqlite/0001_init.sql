-- wozkit schema for SQLite: sessions, their append-only event logs, participants, settings.

CREATE TABLE sessions (
    id            TEXT PRIMARY KEY NOT NULL,
    study_id      TEXT NOT NULL,
    study_version TEXT NOT NULL,
    -- decimal text: a u64 seed does not fit SQLite's signed integer
    seed          TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    ended_at_ms   INTEGER,
    end_reason    TEXT
);
CREATE INDEX sessions_by_study ON sessions (study_id, created_at_ms);

-- One row per event, clustered by (session_id, seq): a session's log is read back in one range
-- scan. seq is gap-free from 1 per session, assigned by the store's single writer.
CREATE TABLE events (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    v          INTEGER NOT NULL,
    at_ms      INTEGER NOT NULL,
    actor      TEXT NOT NULL,
    payload    TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE participants (
    id              TEXT PRIMARY KEY NOT NULL,
    token_hash      TEXT NOT NULL UNIQUE,
    study_id        TEXT NOT NULL,
    platform        TEXT NOT NULL,
    worker_id       TEXT,
    external_ids    TEXT NOT NULL,
    role            TEXT,
    session_id      TEXT,
    flow_step       TEXT NOT NULL,
    completion_code TEXT,
    created_at_ms   INTEGER NOT NULL
);
-- NULL worker ids (anonymous lab links) never collide.
CREATE UNIQUE INDEX participants_by_worker ON participants (study_id, platform, worker_id);
CREATE INDEX participants_by_session ON participants (session_id);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
