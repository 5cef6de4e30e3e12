//! Where a participant is in the study's page flow. Pure: the store keeps the participant's
//! `flow_step` as `"<index>:<kind>"` (the kind is for people reading the database), and these
//! functions say which page that is and which comes next.
//!
//! Rules: the role's pages are shown in order (a page's `next` jumps, and a page whose `when` is
//! false is skipped, see `http::pages`); "waiting" (or a "room" reached without a session)
//! is the lobby; the room is left when the session ends; a participant left without a partner
//! skips to the completion page; past the last page the participant is done (a completion page
//! with the code is shown even if the study forgot one).

use wozkit_core::event::Role;
use wozkit_core::model::{Page, PageKind, Study};

/// The role's pages.
pub fn pages(study: &Study, role: Role) -> &[Page] {
    match role {
        Role::User => &study.flow.user,
        Role::Wizard => &study.flow.wizard,
    }
}

/// The stored form of step `i`.
pub fn encode(study: &Study, role: Role, i: usize) -> String {
    format!("{i}:{}", kind_name(kind_at(study, role, i)))
}

/// The index of a stored step (0 when unreadable: the participant starts over at consent,
/// which is harmless because accepting pages is idempotent).
pub fn index(flow_step: &str) -> usize {
    flow_step
        .split(':')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The kind of page `i`; past the end it is the completion page.
pub fn kind_at(study: &Study, role: Role, i: usize) -> PageKind {
    pages(study, role)
        .get(i)
        .map_or(PageKind::Completion, |p| p.kind)
}

/// The first page of `kind` at or after `from`.
pub fn find_from(study: &Study, role: Role, kind: PageKind, from: usize) -> Option<usize> {
    pages(study, role)
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, p)| p.kind == kind)
        .map(|(i, _)| i)
}

/// Where a participant who got no partner goes: the next completion page, else the end.
pub fn after_no_partner(study: &Study, role: Role, from: usize) -> usize {
    find_from(study, role, PageKind::Completion, from).unwrap_or(pages(study, role).len())
}

/// The room page a paired participant goes to: the first room page from `from`; a flow without
/// one still gets a room right after the waiting page.
pub fn room_step(study: &Study, role: Role, from: usize) -> usize {
    find_from(study, role, PageKind::Room, from).unwrap_or(from)
}

/// Where a waiter moved to `role` by the lobby goes: that role's first instructions page
/// before its waiting room, else the waiting room itself (a waiting page, or a room page
/// reached without a session); `None` when the role has no waiting room.
pub fn after_switch(study: &Study, role: Role) -> Option<usize> {
    let lobby = find_from(study, role, PageKind::Waiting, 0)
        .or_else(|| find_from(study, role, PageKind::Room, 0))?;
    Some(
        pages(study, role)[..lobby]
            .iter()
            .position(|p| p.kind == PageKind::Instructions)
            .unwrap_or(lobby),
    )
}

/// Whether step `i` is the lobby for a participant with or without a session.
pub fn in_lobby(study: &Study, role: Role, i: usize, has_session: bool) -> bool {
    match kind_at(study, role, i) {
        PageKind::Waiting => !has_session,
        PageKind::Room => !has_session,
        _ => false,
    }
}

pub use wozkit_core::load::kind_name;

/// The page after step `i`: its `next` jump when it has one, else the following page.
pub fn after(study: &Study, role: Role, i: usize) -> usize {
    let pages = pages(study, role);
    pages
        .get(i)
        .and_then(|p| p.next.as_deref())
        .and_then(|id| pages.iter().position(|q| q.id.as_deref() == Some(id)))
        .unwrap_or(i + 1)
}

/// The name of page `i` in the log: its `id`, else its position and kind.
pub fn page_id(study: &Study, role: Role, i: usize) -> String {
    match pages(study, role).get(i).and_then(|p| p.id.clone()) {
        Some(id) => id,
        None => format!("{i}-{}", kind_name(kind_at(study, role, i))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wozkit_core::load::{StudySource, load_text};

    fn study() -> Study {
        let yaml = "id: t\ntitle: T\nroles: {user: {label: U}, wizard: {label: W}}\nstates:\n  - {id: s, type: interaction, initial: true, transitions: [e]}\n  - {id: e, type: interaction, templates: [Bye], terminal: true}\n";
        match load_text("t.yaml", yaml, StudySource::Dir(".".into())) {
            Ok(s) => s.study,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn default_flow_walks_in_order() {
        let s = study();
        assert_eq!(encode(&s, Role::User, 0), "0:consent");
        assert_eq!(index("3:room"), 3);
        assert_eq!(index("garbage"), 0);
        assert_eq!(kind_at(&s, Role::User, 2), PageKind::Waiting);
        assert!(in_lobby(&s, Role::User, 2, false));
        assert!(!in_lobby(&s, Role::User, 3, true));
        assert_eq!(room_step(&s, Role::Wizard, 2), 3);
        assert_eq!(after_no_partner(&s, Role::User, 2), 5);
        assert_eq!(kind_at(&s, Role::User, 99), PageKind::Completion);
        // A waiter switched to the wizard role reads the wizard's instructions (after consent).
        assert_eq!(after_switch(&s, Role::Wizard), Some(1));
        assert_eq!(kind_at(&s, Role::Wizard, 1), PageKind::Instructions);
    }
}
