-- Evaluation studies: participant logs beside dialogues, the items a study asks judgments of,
-- and the leases that hand items to workers (exactly `needed` judgments per item).

-- What a session's log holds: 'dialogue' (live or imported) or 'participant' (one worker's
-- own log of an evaluation flow).
ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'dialogue';
CREATE INDEX sessions_by_kind ON sessions (kind, study_id, created_at_ms);

-- One row per item of a study. dialogues: a JSON array of dialogue ids.
CREATE TABLE eval_items (
    study_id  TEXT NOT NULL,
    item_id   TEXT NOT NULL,
    pool      TEXT NOT NULL,
    needed    INTEGER NOT NULL,
    dialogues TEXT NOT NULL,
    -- Leases done plus leases open (expired or not), kept by claim, submit and return, so a
    -- claim walks items in order of need through `eval_items_by_taken` and stops at the first
    -- eligible one instead of counting every item's leases.
    taken     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (study_id, item_id)
) WITHOUT ROWID;
CREATE INDEX eval_items_by_taken ON eval_items (study_id, pool, taken, item_id);

-- The dialogues each item shows, one row each, so "never the same dialogue twice for a worker"
-- is a join instead of a JSON scan.
CREATE TABLE eval_item_dialogues (
    study_id    TEXT NOT NULL,
    item_id     TEXT NOT NULL,
    dialogue_id TEXT NOT NULL,
    PRIMARY KEY (study_id, item_id, dialogue_id)
) WITHOUT ROWID;
CREATE INDEX eval_item_dialogues_by_dialogue ON eval_item_dialogues (study_id, dialogue_id);

-- A worker's claim on an item. state: leased, done, surplus or returned; expiry is by time
-- (expires_at_ms), not by state. dialogues: the item's dialogues when claimed (JSON array).
CREATE TABLE leases (
    id            TEXT PRIMARY KEY NOT NULL,
    study_id      TEXT NOT NULL,
    item_id       TEXT NOT NULL,
    worker        TEXT NOT NULL,
    pool          TEXT NOT NULL,
    dialogues     TEXT NOT NULL,
    claimed_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    state         TEXT NOT NULL,
    closed_at_ms  INTEGER,
    UNIQUE (study_id, item_id, worker)
);
-- Covers the per-item counts a claim makes (done, live by expiry) without reading the rows.
CREATE INDEX leases_by_item ON leases (study_id, item_id, state, expires_at_ms);
CREATE INDEX leases_by_worker ON leases (study_id, worker);
