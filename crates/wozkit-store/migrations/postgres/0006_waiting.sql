-- The lobby: participants waiting for a partner, shared by every instance using the database.
-- One row per waiting participant (a second tab replaces the first tab's row). pair_key is the
-- private pair key ('' for the public queue of a study); role is what the participant plays
-- ('user' or 'wizard'); worker is 'platform:worker id' when the platform gave one (two rows of
-- the same worker never pair). instance and conn name the connection holding the place, so only
-- that connection gives it up and only that instance is told of a pairing. ord is the order of
-- arrival (first come first served); front marks a participant whose partner never arrived
-- (queued ahead of the others). heard_at_ms is when the connection last said anything: a row
-- not heard from lately is passed over. Pairing takes a row with FOR UPDATE SKIP LOCKED inside
-- a transaction that holds the queue's advisory lock (see postgres/waiting.rs).
CREATE SEQUENCE waiting_ord;
CREATE TABLE waiting (
    participant TEXT PRIMARY KEY,
    study_id    TEXT NOT NULL,
    pair_key    TEXT NOT NULL,
    role        TEXT NOT NULL,
    worker      TEXT,
    instance    TEXT NOT NULL,
    conn        BIGINT NOT NULL,
    front       BOOLEAN NOT NULL,
    ord         BIGINT NOT NULL,
    since_ms    BIGINT NOT NULL,
    heard_at_ms BIGINT NOT NULL
);
CREATE INDEX waiting_queue ON waiting (study_id, pair_key, role, front DESC, ord);
