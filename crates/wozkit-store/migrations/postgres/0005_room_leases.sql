-- Room ownership across server instances sharing one database. A live dialogue session's room
-- runs on exactly one instance: the one holding the session's row here, until expires_at_ms
-- (wall-clock milliseconds). The owner renews all its rows at once every third of the lease
-- length; another instance may take a row over only once it has expired (the owner died or
-- stalled). A session without a row is unowned: the first instance to acquire it runs it.
-- address: the owner's advertised base URL, for other instances to reach the room.
CREATE TABLE room_leases (
    session_id    TEXT PRIMARY KEY,
    instance_id   TEXT NOT NULL,
    address       TEXT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX room_leases_by_instance ON room_leases (instance_id);
