//! What the browsers did, and the check that the session's event log holds every bit of it.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;
use wozkit_core::event::{EndReason, Event, EventKind, LockRelease, MessageSource, Role};
use wozkit_core::load::LoadedStudy;
use wozkit_store::Platform;

use crate::server::TestServer;

/// A wizard option as the browsers showed it.
#[derive(Debug)]
pub struct Said {
    pub state: String,
    /// The state's dialogue-act label in the study.
    pub label: String,
    /// The message both chats showed.
    pub text: String,
    /// The label the wizard's chat showed under it.
    pub shown_label: String,
}

/// Everything the two browsers did and saw that the log must hold.
#[derive(Debug, Default)]
pub struct Played {
    pub said: Vec<Said>,
    pub user_text: Vec<String>,
    pub wizard_text: String,
    /// Id of the fixed option the wizard clicked.
    pub fixed: String,
    pub answers: BTreeMap<Role, BTreeMap<String, Value>>,
    /// Completion codes read from the browsers.
    pub codes: BTreeMap<Role, String>,
    /// The study's Prolific code for a completed part: what a Prolific participant is shown
    /// (wozkit's own code is still issued and logged for them).
    pub prolific_code: Option<String>,
    /// How each participant joined (platform, worker id).
    pub workers: Vec<(Platform, String)>,
}

/// The robot actions the scenario runs, in order: (action, robot, target).
const ACTIONS: [(&str, &str, Option<&str>); 5] = [
    ("send", "qdc1", Some("pu_et")),
    ("inspect", "qdc1", None),
    ("send", "qdc2", Some("pu_et")),
    ("extinguish", "qdc2", None),
    ("assess", "qdc2", None),
];
/// The milestones the actions reach: (subtask, media shown, action that reaches it).
const MILESTONES: [(&str, &str, &str); 3] = [
    ("inspect", "quad_inspect", "inspect"),
    ("extinguish", "quad_extinguish", "extinguish"),
    ("assess_damage", "quad_assess", "assess"),
];

fn seq_of(events: &[Event], pred: impl Fn(&EventKind) -> bool) -> Option<u64> {
    events.iter().find(|e| pred(&e.kind)).map(|e| e.seq)
}

/// The act label the wizard's page shows beside a message of `state`: the study's own label
/// with spaces for `_` and `.`, as on the buttons; for a state without one its act type in the
/// page's words (never its id).
pub fn shown_act(study: &LoadedStudy, state: &str) -> String {
    let st = study.study.states.iter().find(|s| s.id == state);
    match st.and_then(|s| s.label.as_ref().filter(|l| **l != s.id)) {
        Some(own) => own.replace(['_', '.'], " "),
        None => wozkit_server::i18n::words(study.study.language).get(&format!(
            "room-js-act-{}",
            st.map_or("interaction", |s| s.act_type.as_str())
        )),
    }
}

pub async fn check(server: &TestServer, study: &LoadedStudy, p: &Played) -> Result<()> {
    let st = &study.study;
    let mut session = None;
    for (platform, worker) in &p.workers {
        let part = server
            .store
            .participant_by_worker(&st.id, *platform, worker)
            .await
            .map_err(|e| anyhow!("store: {e}"))?
            .with_context(|| format!("no participant {worker} on {}", platform.as_str()))?;
        let s = part
            .session_id
            .with_context(|| format!("{worker} has no session"))?;
        if session.get_or_insert_with(|| s.clone()) != &s {
            bail!("the two participants are in different sessions");
        }
    }
    let session = session.context("no participants")?;
    let events = server
        .store
        .events(&session, 0)
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    let mut problems: Vec<String> = vec![];
    let mut need = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };

    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    need(
        seqs == (1..=events.len() as u64).collect::<Vec<_>>(),
        format!("seq is not gap-free from 1: {seqs:?}"),
    );

    for s in &p.said {
        need(
            s.shown_label == shown_act(study, &s.state),
            format!(
                "`{}` was shown with label `{}`, not `{}`",
                s.state, s.shown_label, s.label
            ),
        );
        let logged = events.iter().any(|e| match &e.kind {
            EventKind::Message {
                role: Role::Wizard,
                text,
                source: MessageSource::State { state, label, .. },
            } => state == &s.state && label == &s.label && text == &s.text,
            _ => false,
        });
        need(
            logged,
            format!(
                "no wizard message for option `{}` labelled `{}`: {:?}",
                s.state, s.label, s.text
            ),
        );
    }
    let free = |role: Role, t: &str| {
        events.iter().any(|e| {
            matches!(&e.kind, EventKind::Message { role: r, text, source: MessageSource::Free } if *r == role && text == t)
        })
    };
    for t in &p.user_text {
        need(
            free(Role::User, t),
            format!("no free-text message from the operator: {t:?}"),
        );
    }
    need(
        free(Role::Wizard, &p.wizard_text),
        format!("no free-text message from the wizard: {:?}", p.wizard_text),
    );
    let fixed = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Message { role: Role::Wizard, source: MessageSource::Fixed { id, .. }, .. } if *id == p.fixed)
    });
    need(
        fixed,
        format!("no message for the fixed option `{}`", p.fixed),
    );
    let approved = events.iter().any(|e| {
        matches!(
            e.kind,
            EventKind::LockReleased {
                how: LockRelease::Approved
            }
        )
    });
    need(approved, "no approval by the operator".into());

    for (action, robot, target) in ACTIONS {
        let target = target.map(str::to_string);
        let started = events.iter().filter(|e| {
            matches!(&e.kind, EventKind::ActionStarted { action: a, robot: r, target: t, .. } if a == action && r == robot && *t == target)
        });
        let completed = events.iter().filter(|e| {
            matches!(&e.kind, EventKind::ActionCompleted { action: a, robot: r, target: t, .. } if a == action && r == robot && *t == target)
        });
        let (s, c) = (
            started.map(|e| e.seq).next(),
            completed.map(|e| e.seq).next(),
        );
        need(
            matches!((s, c), (Some(s), Some(c)) if s < c),
            format!("`{action}` by {robot}: started at {s:?}, completed at {c:?}"),
        );
    }
    for (subtask, media, action) in MILESTONES {
        let done = seq_of(
            &events,
            |k| matches!(k, EventKind::ActionCompleted { action: a, .. } if a == action),
        );
        let milestone = seq_of(
            &events,
            |k| matches!(k, EventKind::Milestone { subtask: s, .. } if s == subtask),
        );
        let file = st.media.get(media).map(|m| m.file.clone());
        let shown = seq_of(
            &events,
            |k| matches!(k, EventKind::MediaShown { media: m, file: f } if m == media && Some(f) == file.as_ref()),
        );
        need(
            matches!((done, milestone), (Some(d), Some(m)) if d <= m),
            format!("Milestone `{subtask}` at {milestone:?}, its action completed at {done:?}"),
        );
        need(
            matches!((done, shown), (Some(d), Some(s)) if d <= s),
            format!(
                "MediaShown `{media}` ({file:?}) at {shown:?}, its action completed at {done:?}"
            ),
        );
    }
    let alarm = seq_of(
        &events,
        |k| matches!(k, EventKind::MediaShown { media, .. } if media == "alarm"),
    );
    need(
        alarm.is_some(),
        "no MediaShown `alarm` after `inform_alert_emergency`".into(),
    );

    let ended: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::SessionEnded { .. }))
        .collect();
    let ended_ok = matches!(ended.as_slice(), [e] if matches!(e.kind, EventKind::SessionEnded { reason: EndReason::Terminal, goal_reached: true }));
    need(
        ended_ok,
        format!("expected one SessionEnded (terminal, goal reached), got {ended:?}"),
    );
    let end_seq = ended.first().map_or(u64::MAX, |e| e.seq);

    for role in [Role::User, Role::Wizard] {
        let expected = p.answers.get(&role).cloned().unwrap_or_default();
        let answered = events.iter().find_map(|e| match &e.kind {
            EventKind::SurveyAnswered { role: r, answers } if *r == role => Some((e.seq, answers)),
            _ => None,
        });
        match answered {
            Some((seq, answers)) => {
                let got: BTreeMap<String, Value> = answers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                need(
                    got == expected,
                    format!("{role:?}'s answers: logged {got:?}, given {expected:?}"),
                );
                need(
                    seq > end_seq,
                    format!("{role:?}'s answers were logged before the session ended"),
                );
            }
            None => need(false, format!("no SurveyAnswered for {role:?}")),
        }
        let code = p.codes.get(&role).cloned().unwrap_or_default();
        let issued = events.iter().any(|e| {
            matches!(&e.kind, EventKind::CompletionIssued { role: r, code: c, no_partner: false }
                if *r == role && (*c == code || p.prolific_code.as_deref() == Some(code.as_str())))
        });
        need(
            issued,
            format!("no CompletionIssued for {role:?} with the code shown ({code})"),
        );
    }
    if p.codes.get(&Role::User) == p.codes.get(&Role::Wizard) {
        problems.push("both participants were shown the same completion code".into());
    }

    if problems.is_empty() {
        return Ok(());
    }
    let kinds: Vec<String> = events
        .iter()
        .map(|e| {
            serde_json::to_value(&e.kind)
                .ok()
                .and_then(|v| v["kind"].as_str().map(str::to_string))
                .unwrap_or_default()
        })
        .collect();
    bail!(
        "the event log of session {session} misses what the browsers did:\n  - {}\n  log: {}",
        problems.join("\n  - "),
        kinds.join(", ")
    )
}
