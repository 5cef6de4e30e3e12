-- wozkit schema for PostgreSQL: sessions, their append-only event logs, participants, settings.

CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    study_id      TEXT NOT NULL,
    study_version TEXT NOT NULL,
    -- decimal text: a u64 seed does not fit BIGINT
    seed          TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    ended_at_ms   BIGINT,
    end_reason    TEXT,
    -- the seq counter: an append increments it under the row lock, so instances sharing the
    -- database number a session's events without gaps or duplicates
    last_seq      BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_study ON sessions (study_id, created_at_ms);

CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq        BIGINT NOT NULL,
    v          BIGINT NOT NULL,
    at_ms      BIGINT NOT NULL,
    actor      TEXT NOT NULL,
    payload    TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE participants (
    id              TEXT PRIMARY KEY,
    token_hash      TEXT NOT NULL UNIQUE,
    study_id        TEXT NOT NULL,
    platform        TEXT NOT NULL,
    worker_id       TEXT,
    external_ids    TEXT NOT NULL,
    role            TEXT,
    session_id      TEXT,
    flow_step       TEXT NOT NULL,
    completion_code TEXT,
    created_at_ms   BIGINT NOT NULL
);
-- NULL worker ids (anonymous lab links) never collide.
CREATE UNIQUE INDEX participants_by_worker ON participants (study_id, platform, worker_id);
CREATE INDEX participants_by_session ON participants (session_id);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
