-- The lobby balances roles over everyone on their way to the waiting room (see
-- Store::lobby_presence). role_at_ms is when the lobby last changed the participant's role
-- (0: never; the role given at entry dates from created_at_ms): a participant switched to the
-- other role counts as on their way again from then.
ALTER TABLE participants ADD COLUMN role_at_ms INTEGER NOT NULL DEFAULT 0;
CREATE INDEX participants_by_arrival ON participants (study_id, created_at_ms);
CREATE INDEX participants_by_role_change ON participants (study_id, role_at_ms);
