//! The payment table follows the study's payment scheme, one test per rule of
//! `wozkit_data::records::payments` (see its module documentation). Sessions are written
//! straight into a store with chosen timestamps, so every minute is known in advance.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::json;
use wozkit_core::event::{Actor, EndReason, EventKind, MessageSource, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_data::records::payments::{PaymentRow, payments};
use wozkit_store::{NewEvent, NewParticipant, NewSession, ParticipantPatch, Platform, Store};

/// Start of every session.
const T0: u64 = 1_700_000_000_000;
const MINUTE: u64 = 60_000;

/// What varies between the tests' studies.
struct Scheme {
    time_limit_s: u32,
    clock_starts: &'static str,
    /// The `payment:` block, or "" for none.
    payment: &'static str,
}

const PAY: &str = "payment: {currency: EUR, base: 1.00, per_minute: 0.10, max_minutes: 5, \
                   no_partner: 0.50, bonus: {amount: 0.20, when: fire_out}}";

impl Default for Scheme {
    fn default() -> Self {
        Scheme {
            time_limit_s: 600,
            clock_starts: "start",
            payment: PAY,
        }
    }
}

fn study(scheme: &Scheme) -> Arc<LoadedStudy> {
    let yaml = format!(
        r#"
id: paid
title: Paid study
roles:
  user: {{label: Operator}}
  wizard: {{label: Assistant}}
session: {{time_limit_s: {limit}, clock_starts: {clock}}}
world:
  variables: {{fire_out: false}}
states:
  - {{id: start, type: interaction, initial: true, transitions: [bye]}}
  - {{id: bye, type: interaction, templates: ["Goodbye."], terminal: true}}
{payment}
"#,
        limit = scheme.time_limit_s,
        clock = scheme.clock_starts,
        payment = scheme.payment,
    );
    match load_text("paid.yaml", &yaml, StudySource::Dir(".".into())) {
        Ok(s) => Arc::new(s),
        Err(e) => panic!("the test study does not load:\n{e}"),
    }
}

/// A session's log, built up event by event at chosen times.
struct Log {
    events: Vec<NewEvent>,
}

impl Log {
    /// `SessionStarted` at `T0`, and `ClockStarted` at `clock_at` when given.
    fn started(clock_at: Option<u64>) -> Log {
        let mut log = Log { events: vec![] };
        log.system(
            T0,
            EventKind::SessionStarted {
                study: "paid".into(),
                study_version: "1".into(),
                seed: 0,
                initial_state: "start".into(),
            },
        );
        if let Some(at) = clock_at {
            log.system(
                at,
                EventKind::ClockStarted {
                    deadline_ms: at + 10 * MINUTE,
                },
            );
        }
        log
    }

    fn system(&mut self, at_ms: u64, kind: EventKind) -> &mut Log {
        self.events.push(NewEvent {
            actor: Actor::System,
            kind,
            at_ms,
        });
        self
    }

    fn wizard_says(&mut self, at_ms: u64) -> &mut Log {
        self.events.push(NewEvent {
            actor: Actor::Participant {
                role: Role::Wizard,
                participant: None,
            },
            kind: EventKind::Message {
                role: Role::Wizard,
                text: "Hello.".into(),
                source: MessageSource::Free,
            },
            at_ms,
        });
        self
    }

    fn fire_out(&mut self, at_ms: u64) -> &mut Log {
        let values: IndexMap<String, serde_json::Value> = [("fire_out".to_string(), json!(true))]
            .into_iter()
            .collect();
        self.system(at_ms, EventKind::WorldSet { values })
    }

    fn ended(&mut self, at_ms: u64, reason: EndReason) -> &mut Log {
        self.system(
            at_ms,
            EventKind::SessionEnded {
                reason,
                goal_reached: false,
            },
        )
    }
}

/// A data directory with sessions and their participants.
struct Data {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
}

impl Data {
    async fn new() -> Data {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = wozkit_store::open(&dir.path().display().to_string())
            .await
            .expect("open store");
        Data { _dir: dir, store }
    }

    /// Stores the session `id` with its log, and one participant per (role, completion code).
    async fn session(&self, id: &str, log: &Log, people: &[(Role, Option<&str>)]) {
        let store = &self.store;
        store
            .create_session(NewSession {
                id: id.into(),
                study_id: "paid".into(),
                study_version: "1".into(),
                seed: 0,
                created_at_ms: T0 - 5 * MINUTE,
            })
            .await
            .expect("create session");
        store
            .append(id, log.events.clone())
            .await
            .expect("append events");
        let ended = log.events.iter().find_map(|e| match e.kind {
            EventKind::SessionEnded { reason, .. } => Some((reason, e.at_ms)),
            _ => None,
        });
        if let Some((reason, at_ms)) = ended {
            store
                .end_session(id, reason, at_ms)
                .await
                .expect("end session");
        }
        for (role, code) in people {
            let pid = format!("{id}-{}", role.as_str());
            store
                .create_participant(NewParticipant {
                    id: pid.clone(),
                    token_hash: format!("hash-{pid}"),
                    study_id: "paid".into(),
                    platform: Platform::Lab,
                    worker_id: None,
                    external_ids: Default::default(),
                    flow_step: "0".into(),
                    created_at_ms: T0 - 5 * MINUTE,
                })
                .await
                .expect("create participant");
            store
                .update_participant(
                    &pid,
                    ParticipantPatch {
                        role: Some(Some(*role)),
                        session_id: Some(Some(id.into())),
                        completion_code: Some(code.map(str::to_string)),
                        ..ParticipantPatch::default()
                    },
                )
                .await
                .expect("place participant");
        }
    }

    /// The payment table with every session priced by `study` (or by nothing).
    async fn table(&self, study: Option<Arc<LoadedStudy>>) -> Vec<PaymentRow> {
        payments(self.store.as_ref(), None, &|_| study.clone(), false)
            .await
            .expect("payments")
    }
}

fn row<'a>(rows: &'a [PaymentRow], session: &str, role: Role) -> &'a PaymentRow {
    rows.iter()
        .find(|r| r.session == session && r.role == role.as_str())
        .unwrap_or_else(|| panic!("no row for {session} {role:?} in {rows:?}"))
}

fn amounts(r: &PaymentRow) -> (f64, f64, f64, f64) {
    (r.base, r.minutes, r.bonus, r.total)
}

/// A completed four-minute session with the bonus condition met.
fn four_minutes_with_bonus() -> Log {
    let mut log = Log::started(Some(T0));
    log.fire_out(T0 + MINUTE)
        .ended(T0 + 4 * MINUTE, EndReason::Terminal);
    log
}

#[tokio::test]
async fn rule_scheme_a_study_without_payment_or_not_given_pays_nothing() {
    let data = Data::new().await;
    data.session(
        "s1",
        &four_minutes_with_bonus(),
        &[(Role::User, Some("CODE1"))],
    )
    .await;
    let unpaid = study(&Scheme {
        payment: "",
        ..Scheme::default()
    });
    for priced_by in [None, Some(unpaid)] {
        let rows = data.table(priced_by).await;
        let r = row(&rows, "s1", Role::User);
        assert_eq!(r.status, "completed");
        assert_eq!(amounts(r), (0.0, 0.0, 0.0, 0.0));
        assert_eq!(r.currency, "");
    }
    let rows = data.table(Some(study(&Scheme::default()))).await;
    assert_eq!(row(&rows, "s1", Role::User).currency, "EUR");
}

#[tokio::test]
async fn rule_status_no_partner_then_completion_code_then_incomplete() {
    let data = Data::new().await;
    let mut alone = Log::started(None);
    alone.ended(T0, EndReason::NoPartner).system(
        T0,
        EventKind::CompletionIssued {
            role: Role::User,
            code: "ALONE".into(),
            no_partner: true,
        },
    );
    data.session("alone", &alone, &[(Role::User, Some("ALONE"))])
        .await;
    data.session(
        "pair",
        &four_minutes_with_bonus(),
        &[(Role::User, Some("DONE")), (Role::Wizard, None)],
    )
    .await;
    let rows = data.table(Some(study(&Scheme::default()))).await;
    assert_eq!(row(&rows, "alone", Role::User).status, "no_partner");
    assert_eq!(row(&rows, "pair", Role::User).status, "completed");
    assert_eq!(row(&rows, "pair", Role::Wizard).status, "incomplete");
}

#[tokio::test]
async fn rule_no_partner_pays_the_no_partner_rate_and_nothing_else() {
    let data = Data::new().await;
    // Waited three minutes in the lobby, then the session ended without a partner.
    let mut alone = Log::started(Some(T0));
    alone.ended(T0 + 3 * MINUTE, EndReason::NoPartner);
    data.session("alone", &alone, &[(Role::User, Some("ALONE"))])
        .await;
    let rows = data.table(Some(study(&Scheme::default()))).await;
    let r = row(&rows, "alone", Role::User);
    assert_eq!(r.status, "no_partner");
    assert_eq!(amounts(r), (0.0, 0.0, 0.0, 0.50));
}

#[tokio::test]
async fn rule_incomplete_pays_nothing() {
    let data = Data::new().await;
    data.session(
        "pair",
        &four_minutes_with_bonus(),
        &[(Role::User, Some("DONE")), (Role::Wizard, None)],
    )
    .await;
    let rows = data.table(Some(study(&Scheme::default()))).await;
    let wizard = row(&rows, "pair", Role::Wizard);
    assert_eq!(wizard.status, "incomplete");
    assert_eq!(amounts(wizard), (0.0, 0.0, 0.0, 0.0));
    // The partner of the same session, who finished, is paid in full.
    assert_eq!(
        amounts(row(&rows, "pair", Role::User)),
        (1.0, 4.0, 0.20, 1.60)
    );
}

#[tokio::test]
async fn rule_base_is_paid_to_a_completed_participant() {
    let data = Data::new().await;
    // Ended the moment the clock started: no minutes, no bonus.
    let mut log = Log::started(Some(T0));
    log.ended(T0, EndReason::Terminal);
    data.session("s1", &log, &[(Role::User, Some("DONE"))])
        .await;
    let rows = data.table(Some(study(&Scheme::default()))).await;
    assert_eq!(amounts(row(&rows, "s1", Role::User)), (1.0, 0.0, 0.0, 1.0));
}

#[tokio::test]
async fn rule_minutes_count_from_the_clock_start_not_the_session_start() {
    let data = Data::new().await;
    let first_word = T0 + 90_000;
    let end = first_word + 150_000;
    // Time limit: the engine logs ClockStarted at the wizard's first message.
    let mut timed = Log::started(Some(first_word));
    timed
        .wizard_says(first_word)
        .ended(end, EndReason::Terminal);
    data.session("timed", &timed, &[(Role::User, Some("A"))])
        .await;
    let rows = data
        .table(Some(study(&Scheme {
            clock_starts: "first_wizard_message",
            ..Scheme::default()
        })))
        .await;
    assert_eq!(row(&rows, "timed", Role::User).minutes, 2.5);

    // No time limit: no ClockStarted is logged; the clock rule names the wizard's first message.
    let untimed_study = study(&Scheme {
        time_limit_s: 0,
        clock_starts: "first_wizard_message",
        ..Scheme::default()
    });
    let mut untimed = Log::started(None);
    untimed
        .wizard_says(first_word)
        .ended(end, EndReason::Terminal);
    data.session("untimed", &untimed, &[(Role::User, Some("B"))])
        .await;
    // The wizard never spoke: the clock never started.
    let mut silent = Log::started(None);
    silent.ended(end, EndReason::Disconnect);
    data.session("silent", &silent, &[(Role::User, Some("C"))])
        .await;
    let rows = data.table(Some(untimed_study)).await;
    let untimed_row = row(&rows, "untimed", Role::User);
    assert_eq!((untimed_row.minutes, untimed_row.total), (2.5, 1.25));
    assert_eq!(row(&rows, "silent", Role::User).minutes, 0.0);
}

#[tokio::test]
async fn rule_minutes_are_capped_at_max_minutes() {
    let data = Data::new().await;
    let mut long = Log::started(Some(T0));
    long.ended(T0 + 9 * MINUTE, EndReason::TimeLimit);
    data.session("long", &long, &[(Role::User, Some("A"))])
        .await;
    let rows = data.table(Some(study(&Scheme::default()))).await;
    assert_eq!(
        amounts(row(&rows, "long", Role::User)),
        (1.0, 5.0, 0.0, 1.50)
    );
}

#[tokio::test]
async fn rule_bonus_only_when_its_condition_holds_at_the_end() {
    let data = Data::new().await;
    data.session(
        "won",
        &four_minutes_with_bonus(),
        &[(Role::User, Some("A"))],
    )
    .await;
    let mut lost = Log::started(Some(T0));
    lost.ended(T0 + 4 * MINUTE, EndReason::Terminal);
    data.session("lost", &lost, &[(Role::User, Some("B"))])
        .await;
    let rows = data.table(Some(study(&Scheme::default()))).await;
    assert_eq!(row(&rows, "won", Role::User).bonus, 0.20);
    assert_eq!(row(&rows, "lost", Role::User).bonus, 0.0);
    assert_eq!(row(&rows, "lost", Role::User).total, 1.40);
}

#[tokio::test]
async fn rule_total_is_exact_in_decimal_and_rounded_to_cents() {
    let data = Data::new().await;
    // 3.30 minutes at 0.15 on a base of 0.50: 0.995 exactly, 1.00 in cents (in binary floating
    // point the sum is 0.99499…, which would round to 0.99).
    let mut log = Log::started(Some(T0));
    log.ended(T0 + 198_000, EndReason::Terminal);
    data.session("s1", &log, &[(Role::User, Some("A"))]).await;
    // 20 s is 0.333… minutes, shown and paid as 0.33.
    let mut short = Log::started(Some(T0));
    short.ended(T0 + 20_000, EndReason::Terminal);
    data.session("s2", &short, &[(Role::User, Some("B"))]).await;
    let rows = data
        .table(Some(study(&Scheme {
            payment: "payment: {base: 0.50, per_minute: 0.15, max_minutes: 10}",
            ..Scheme::default()
        })))
        .await;
    let r = row(&rows, "s1", Role::User);
    assert_eq!((r.minutes, r.total), (3.3, 1.0));
    let r = row(&rows, "s2", Role::User);
    assert_eq!((r.minutes, r.total), (0.33, 0.55));
}
