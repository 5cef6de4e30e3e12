//! A new room is leased before anyone is seated in it (`pairing.rs`): between the pairing and
//! the start of the room's task no other instance can rebuild the room, since a participant's
//! record names the session only once its lease is held. Checked with a trigger in the store's
//! SQLite file that notes, as each participant's record gets its session, who holds that
//! session's room lease at that moment (in the same transaction as the seating).

use crate::cluster::{Pair, instance, owner, pair_on, stop};
use crate::helpers::Tiny;

/// Installs the trigger: every write that puts a participant in a session adds a row to
/// `seat_watch` with the participant, the session and the lease holder then (NULL for none).
fn watch_seatings(db: &std::path::Path) {
    let conn = rusqlite::Connection::open(db).expect("the store's file opens");
    conn.execute_batch(
        "CREATE TABLE seat_watch (participant TEXT, session TEXT, holder TEXT);
         CREATE TRIGGER seat_watch AFTER UPDATE OF session_id ON participants
         WHEN NEW.session_id IS NOT NULL AND NEW.session_id IS NOT OLD.session_id
         BEGIN
           INSERT INTO seat_watch VALUES (NEW.id, NEW.session_id,
             (SELECT instance_id FROM room_leases WHERE session_id = NEW.session_id));
         END;",
    )
    .expect("the trigger is installed");
}

/// The seatings the trigger saw: (participant, session, lease holder), by participant.
fn seatings(db: &std::path::Path) -> Vec<(String, String, Option<String>)> {
    let conn = rusqlite::Connection::open(db).expect("the store's file opens");
    let mut stmt = conn
        .prepare("SELECT participant, session, holder FROM seat_watch ORDER BY participant")
        .expect("query");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("seatings")
}

#[tokio::test]
async fn a_new_room_is_leased_before_its_participants_are_seated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(dir.path().to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    let db = dir.path().join(wozkit_store::sqlite::DB_FILE);
    watch_seatings(&db);
    let a = instance("A", store.clone(), &Tiny::default(), None).await;
    let Pair {
        session,
        waiting: _waiting,
        ..
    } = pair_on(a.addr, "alice", "bob").await;
    let seated = seatings(&db);
    let mut expected: Vec<String> = store
        .participants_in_session(&session)
        .await
        .expect("participants")
        .into_iter()
        .map(|p| p.id)
        .collect();
    expected.sort_unstable();
    assert_eq!(expected.len(), 2, "{expected:?}");
    let who: Vec<String> = seated.iter().map(|(p, _, _)| p.clone()).collect();
    assert_eq!(who, expected, "both participants were seated: {seated:#?}");
    for (participant, in_session, holder) in &seated {
        assert_eq!(in_session, &session);
        assert_eq!(
            holder.as_deref(),
            Some("A"),
            "{participant} was seated in a room nobody held"
        );
    }
    assert_eq!(owner(store.as_ref(), &session).await.as_deref(), Some("A"));
    stop(a).await;
}
