//! `disconnect` and `reconnect` (system): a participant's connection drops, or comes back
//! within the grace period.

use crate::engine::{Tx, after_secs};
use crate::event::{EventKind, Role};

/// A participant's connection dropped: the grace period starts (once).
pub(in crate::engine) fn disconnect(tx: &mut Tx<'_>, role: Role) {
    let study = tx.study;
    if !tx.s.away.iter().any(|(r, _)| *r == role) {
        let grace = f64::from(study.study.session.disconnect_grace_s);
        let until = after_secs(tx.now, grace);
        tx.system(EventKind::Disconnected {
            role,
            grace_until_ms: until,
        });
    }
}

/// A participant came back: the grace period ends.
pub(in crate::engine) fn reconnect(tx: &mut Tx<'_>, role: Role) {
    if tx.s.away.iter().any(|(r, _)| *r == role) {
        tx.system(EventKind::Reconnected { role });
    }
}
