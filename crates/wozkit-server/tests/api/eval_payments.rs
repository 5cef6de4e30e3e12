//! The payment table's rows of evaluation participants, rules 9 to 13 of
//! `wozkit_data::records::payments`. Participant logs are written straight into a store with
//! chosen events and times; every expected value below is worked out by hand from those events
//! and the study's `payment:` block (base 1.50, 0.10 a minute, at most 10 minutes, 0.25 an
//! item, 0.40 for someone turned away), as the comment over each participant says. The last test takes three
//! workers through the real server's pages and checks their rows.

// The server-test harness of `tests/api`, for the test against the real server at the end.
use crate::{client, helpers};

use std::sync::Arc;

use indexmap::IndexMap;
use wozkit_core::event::{Actor, EventKind, ItemPool, Judgment, Role, ScreenReason};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_data::completion::CodeKey;
use wozkit_data::records::payments::{self, COLUMNS, PaymentRow, Verdict};
use wozkit_store::{NewEvent, NewParticipant, NewSession, ParticipantPatch, Platform, Store};

/// When every participant entered.
const T0: u64 = 1_700_000_000_000;
const SECOND: u64 = 1_000;
const MINUTE: u64 = 60 * SECOND;
const STUDY_ID: &str = "judge-pay";

/// The study, with surplus judgments paid or not; pages: 0 consent, 1 onboarding, 2 rate,
/// 3 completion.
fn study(pay_surplus: bool) -> Arc<LoadedStudy> {
    let yaml = format!(
        r#"
id: {STUDY_ID}
title: Judge and get paid
flow:
  user:
    - {{kind: consent}}
    - {{kind: onboarding}}
    - {{kind: rate}}
    - {{kind: completion}}
evaluation:
  task: rate
  judgments_per_item: 2
  items_per_worker: 3
  pay_surplus: {pay_surplus}
  questions:
    - {{id: fluent, text: Fluent?, kind: likert, points: 5}}
  no_items: {{code: true}}
  onboarding:
    items: [{{dialogue: o1, expect: {{fluent: {{min: 4}}}}}}]
    fail: {{code: true}}
  gold:
    rate: 0.2
    max_failures: 1
    items: [{{dialogue: g1, expect: {{fluent: {{min: 4}}}}}}]
    fail: {{code: false}}
  dialogues:
    - {{id: d1, system: A, turns: [{{speaker: user, text: hi}}, {{speaker: bot, text: hello}}]}}
    - {{id: d2, system: B, turns: [{{speaker: user, text: hi}}, {{speaker: bot, text: hey}}]}}
    - {{id: d3, system: A, turns: [{{speaker: user, text: hi}}, {{speaker: bot, text: yo}}]}}
    - {{id: o1, system: A, turns: [{{speaker: user, text: hi}}, {{speaker: bot, text: good day}}]}}
    - {{id: g1, system: B, turns: [{{speaker: user, text: hi}}, {{speaker: bot, text: welcome}}]}}
payment: {{currency: GBP, base: 1.50, per_minute: 0.10, max_minutes: 10, no_partner: 0.40, per_item: 0.25}}
"#
    );
    match load_text("judge-pay.yaml", &yaml, StudySource::Dir(".".into())) {
        Ok(s) => Arc::new(s),
        Err(e) => panic!("the test study does not load:\n{e}"),
    }
}

/// One participant's log, built event by event at chosen times.
#[derive(Default)]
struct Log {
    events: Vec<NewEvent>,
    leases: u32,
}

impl Log {
    fn add(&mut self, at_ms: u64, kind: EventKind) -> &mut Log {
        self.events.push(NewEvent {
            actor: Actor::Participant {
                role: Role::User,
                participant: None,
            },
            kind,
            at_ms,
        });
        self
    }

    /// Claims `item` of `pool`; returns the lease id.
    fn claim(&mut self, at_ms: u64, item: &str, pool: ItemPool) -> String {
        self.leases += 1;
        let lease = format!("lease-{}", self.leases);
        self.add(
            at_ms,
            EventKind::ItemClaimed {
                page: "2-rate".into(),
                item: item.into(),
                lease: lease.clone(),
                dialogues: vec![item.into()],
                systems: vec!["A".into()],
                pool,
                claimed_at_ms: at_ms,
                expires_at_ms: at_ms + 10 * MINUTE,
            },
        );
        lease
    }

    /// Claims and judges an ordinary item: counted, or surplus.
    fn judge(&mut self, at_ms: u64, item: &str, surplus: bool) -> &mut Log {
        let lease = self.claim(at_ms, item, ItemPool::Item);
        let judgment = judgment(item, &lease, ItemPool::Item, !surplus, surplus, None, at_ms);
        self.add(at_ms + 30 * SECOND, EventKind::Judged(Box::new(judgment)))
    }

    /// Claims and judges the gold item, rightly or not.
    fn gold(&mut self, at_ms: u64, right: bool) -> &mut Log {
        let lease = self.claim(at_ms, "g1", ItemPool::Gold);
        let judgment = judgment(
            "g1",
            &lease,
            ItemPool::Gold,
            false,
            false,
            Some(right),
            at_ms,
        );
        self.add(at_ms + 30 * SECOND, EventKind::Judged(Box::new(judgment)))
    }

    fn onboarding(&mut self, at_ms: u64, passed: bool) -> &mut Log {
        self.add(
            at_ms,
            EventKind::OnboardingDone {
                passed,
                correct: u32::from(passed),
                total: 1,
                answers: IndexMap::new(),
            },
        )
    }

    fn screened(&mut self, at_ms: u64, reason: ScreenReason) -> &mut Log {
        self.add(at_ms, EventKind::ScreenedOut { reason })
    }

    fn code(&mut self, at_ms: u64) -> &mut Log {
        self.add(
            at_ms,
            EventKind::CompletionIssued {
                role: Role::User,
                code: "in the participant record".into(),
                no_partner: false,
            },
        )
    }
}

fn judgment(
    item: &str,
    lease: &str,
    pool: ItemPool,
    counted: bool,
    surplus: bool,
    gold_correct: Option<bool>,
    claimed_at_ms: u64,
) -> Judgment {
    Judgment {
        page: "2-rate".into(),
        item: item.into(),
        lease: lease.into(),
        pool,
        dialogues: vec![item.into()],
        systems: vec!["A".into()],
        choice: None,
        justification: None,
        answers: IndexMap::new(),
        turns: vec![],
        counted,
        surplus,
        gold_correct,
        claimed_at_ms,
        void: false,
    }
}

/// A participant as stored.
struct Who {
    id: &'static str,
    flow_step: &'static str,
    /// Whether they hold their completion (or screening) code.
    coded: bool,
    test: bool,
}

/// A data directory with evaluation participants.
struct Data {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    key: CodeKey,
}

impl Data {
    async fn new() -> Data {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = wozkit_store::open(&dir.path().display().to_string())
            .await
            .expect("open store");
        let key = CodeKey::load_or_create(store.as_ref())
            .await
            .expect("code key");
        Data {
            _dir: dir,
            store,
            key,
        }
    }

    /// Stores the participant (entered at `T0`, on Prolific as worker `W-<id>`) and their log
    /// `log-<id>`, started at `T0`.
    async fn participant(&self, who: &Who, log: &Log) {
        let mut external_ids = std::collections::BTreeMap::new();
        external_ids.insert("PROLIFIC_PID".to_string(), format!("W-{}", who.id));
        if who.test {
            external_ids.insert("test".to_string(), "1".to_string());
        }
        self.store
            .create_participant(NewParticipant {
                id: who.id.into(),
                token_hash: format!("hash-{}", who.id),
                study_id: STUDY_ID.into(),
                platform: Platform::Prolific,
                worker_id: Some(format!("W-{}", who.id)),
                external_ids,
                flow_step: "0:consent".into(),
                created_at_ms: T0,
            })
            .await
            .expect("create participant");
        self.store
            .update_participant(
                who.id,
                ParticipantPatch {
                    flow_step: Some(who.flow_step.into()),
                    completion_code: Some(who.coded.then(|| self.key.code(who.id))),
                    ..ParticipantPatch::default()
                },
            )
            .await
            .expect("update participant");
        let log_id = format!("log-{}", who.id);
        self.store
            .open_participant_log(NewSession {
                id: log_id.clone(),
                study_id: STUDY_ID.into(),
                study_version: "1".into(),
                seed: 0,
                created_at_ms: T0,
            })
            .await
            .expect("open log");
        let mut events = vec![NewEvent {
            actor: Actor::System,
            kind: EventKind::ParticipantLogStarted {
                participant: who.id.into(),
                study: STUDY_ID.into(),
                study_version: "1".into(),
            },
            at_ms: T0,
        }];
        events.extend(log.events.iter().cloned());
        self.store
            .append(&log_id, events)
            .await
            .expect("append events");
    }

    async fn table(&self, study: Option<Arc<LoadedStudy>>, include_test: bool) -> Vec<PaymentRow> {
        payments::payments(self.store.as_ref(), None, &|_| study.clone(), include_test)
            .await
            .expect("payments")
    }
}

fn row<'a>(rows: &'a [PaymentRow], participant: &str) -> &'a PaymentRow {
    let found: Vec<&PaymentRow> = rows
        .iter()
        .filter(|r| r.participant == participant)
        .collect();
    assert_eq!(found.len(), 1, "rows of {participant}: {rows:?}");
    found[0]
}

/// (base, minutes, bonus, total).
fn amounts(r: &PaymentRow) -> (f64, f64, f64, f64) {
    (r.base, r.minutes, r.bonus, r.total)
}

/// (judgments, surplus, surplus_paid, items_paid, gold_accuracy).
type Counts = (
    Option<u32>,
    Option<u32>,
    Option<bool>,
    Option<u32>,
    Option<f64>,
);

fn counts(r: &PaymentRow) -> Counts {
    (
        r.judgments,
        r.surplus,
        r.surplus_paid,
        r.items_paid,
        r.gold_accuracy,
    )
}

/// Every kind of participant, stored once.
async fn data() -> Data {
    let data = Data::new().await;
    let who = |id, flow_step, coded| Who {
        id,
        flow_step,
        coded,
        test: false,
    };

    // Three counted judgments and one right gold check; code at 6:30.
    let mut log = Log::default();
    log.onboarding(T0 + MINUTE, true)
        .judge(T0 + 2 * MINUTE, "d1", false)
        .judge(T0 + 3 * MINUTE, "d2", false)
        .gold(T0 + 4 * MINUTE, true)
        .judge(T0 + 5 * MINUTE, "d3", false)
        .code(T0 + 6 * MINUTE + 30 * SECOND);
    data.participant(&who("done", "3:completion", true), &log)
        .await;

    // Two counted, one surplus (its lease expired, the item had its two already); gold one
    // right of two; code at 12:00, beyond the 10-minute cap.
    let mut log = Log::default();
    log.onboarding(T0 + MINUTE, true)
        .judge(T0 + 2 * MINUTE, "d1", false)
        .gold(T0 + 3 * MINUTE, false)
        .judge(T0 + 4 * MINUTE, "d2", false)
        .gold(T0 + 5 * MINUTE, true)
        .judge(T0 + 6 * MINUTE, "d3", true)
        .code(T0 + 12 * MINUTE);
    data.participant(&who("late", "3:completion", true), &log)
        .await;

    // Failed onboarding; the study's onboarding ending gives a code.
    let mut log = Log::default();
    log.onboarding(T0 + MINUTE, false)
        .screened(T0 + 2 * MINUTE, ScreenReason::Onboarding)
        .code(T0 + 2 * MINUTE + SECOND);
    data.participant(&who("failed-onboarding", "screened:onboarding", true), &log)
        .await;

    // Screened on gold at 3:00 after one counted judgment, holding a code.
    let gold_fail = || {
        let mut log = Log::default();
        log.onboarding(T0 + MINUTE, true)
            .judge(T0 + MINUTE, "d1", false)
            .gold(T0 + 2 * MINUTE, false)
            .screened(T0 + 3 * MINUTE, ScreenReason::Gold);
        log
    };
    let mut log = gold_fail();
    log.code(T0 + 3 * MINUTE + SECOND);
    data.participant(&who("failed-gold-coded", "screened:gold", true), &log)
        .await;
    // The same without a code.
    data.participant(&who("failed-gold", "screened:gold", false), &gold_fail())
        .await;

    // Passed onboarding, then nothing was left to judge: the no-items page gave a code.
    let mut log = Log::default();
    log.onboarding(T0 + MINUTE, true).code(T0 + 2 * MINUTE);
    data.participant(&who("nothing-left", "2:rate", true), &log)
        .await;
    // Nothing left either, and no code given.
    let mut log = Log::default();
    log.onboarding(T0 + MINUTE, true);
    data.participant(&who("nothing-left-uncoded", "2:rate", false), &log)
        .await;

    // Claimed an item and left without judging it.
    let mut log = Log::default();
    log.onboarding(T0 + MINUTE, true);
    log.claim(T0 + 2 * MINUTE, "d1", ItemPool::Item);
    data.participant(&who("gone", "2:rate", false), &log).await;

    // A test participant who completed.
    let mut log = Log::default();
    log.judge(T0 + MINUTE, "d1", false).code(T0 + 2 * MINUTE);
    let tester = Who {
        test: true,
        ..who("tester", "3:completion", true)
    };
    data.participant(&tester, &log).await;
    data
}

#[tokio::test]
async fn evaluation_participants_get_status_counts_and_pay_from_their_logs() {
    let data = data().await;
    for pay_surplus in [true, false] {
        let rows = data.table(Some(study(pay_surplus)), false).await;
        let paid = Some(pay_surplus);

        let r = row(&rows, "done");
        assert_eq!(r.status, "completed");
        assert_eq!(r.session, "log-done");
        assert_eq!(r.worker_id, "W-done");
        assert_eq!(r.crowd_ids, "PROLIFIC_PID=W-done");
        assert_eq!(r.platform, "prolific");
        assert_eq!(r.currency, "GBP");
        assert_eq!(r.completion_code, data.key.code("done"));
        assert_eq!(counts(r), (Some(3), Some(0), paid, Some(3), Some(1.0)));
        // 6.5 minutes from entry to code, three items: 1.50 + 0.65 + 0.75.
        assert_eq!(amounts(r), (1.5, 6.5, 0.0, 2.9));

        let r = row(&rows, "late");
        assert_eq!(r.status, "completed");
        // Surplus paid: 2 + 1 items; not paid: 2.
        let items = if pay_surplus { 3 } else { 2 };
        assert_eq!(counts(r), (Some(2), Some(1), paid, Some(items), Some(0.5)));
        // 12 minutes capped at 10: 1.50 + 1.00, and 0.25 for each item paid.
        let total = if pay_surplus { 3.25 } else { 3.0 };
        assert_eq!(amounts(r), (1.5, 10.0, 0.0, total));

        let r = row(&rows, "failed-onboarding");
        assert_eq!(r.status, "screened_onboarding");
        assert_eq!(r.completion_code, data.key.code("failed-onboarding"));
        assert_eq!(counts(r), (Some(0), Some(0), paid, Some(0), None));
        // The short rate only.
        assert_eq!(amounts(r), (0.0, 0.0, 0.0, 0.4));

        let r = row(&rows, "failed-gold-coded");
        assert_eq!(r.status, "screened_gold");
        assert_eq!(counts(r), (Some(1), Some(0), paid, Some(1), Some(0.0)));
        // Entry to screening, 3 minutes, one item: 1.50 + 0.30 + 0.25.
        assert_eq!(amounts(r), (1.5, 3.0, 0.0, 2.05));

        let r = row(&rows, "failed-gold");
        assert_eq!(r.status, "screened_gold");
        assert_eq!(r.completion_code, "");
        assert_eq!(amounts(r), (0.0, 0.0, 0.0, 0.0));

        let r = row(&rows, "nothing-left");
        assert_eq!(r.status, "no_items");
        assert_eq!(counts(r), (Some(0), Some(0), paid, Some(0), None));
        assert_eq!(amounts(r), (0.0, 0.0, 0.0, 0.4));

        let r = row(&rows, "nothing-left-uncoded");
        assert_eq!(r.status, "no_items");
        assert_eq!(amounts(r), (0.0, 0.0, 0.0, 0.0));

        let r = row(&rows, "gone");
        assert_eq!(r.status, "abandoned");
        assert_eq!(amounts(r), (0.0, 0.0, 0.0, 0.0));

        assert!(rows.iter().all(|r| r.participant != "tester"), "{rows:?}");
        assert_eq!(rows.len(), 8, "{rows:?}");
    }
    let with_tests = data.table(Some(study(true)), true).await;
    assert_eq!(row(&with_tests, "tester").status, "completed");
}

#[tokio::test]
async fn without_a_payment_scheme_the_counts_stay_and_every_amount_is_zero() {
    let data = data().await;
    let rows = data.table(None, false).await;
    let r = row(&rows, "late");
    assert_eq!(r.status, "completed");
    // The study is unknown: whether surplus is paid is unknown too.
    assert_eq!(counts(r), (Some(2), Some(1), None, None, Some(0.5)));
    assert_eq!(r.currency, "");
    assert!(rows.iter().all(|r| amounts(r) == (0.0, 0.0, 0.0, 0.0)));
}

#[tokio::test]
async fn a_participant_placed_in_a_session_is_priced_by_the_session_only() {
    let data = data().await;
    // A participant with both a session and an own log (they answered a page before pairing).
    data.participant(
        &Who {
            id: "paired",
            flow_step: "3:completion",
            coded: true,
            test: false,
        },
        &Log::default(),
    )
    .await;
    data.store
        .create_session(NewSession {
            id: "s1".into(),
            study_id: STUDY_ID.into(),
            study_version: "1".into(),
            seed: 0,
            created_at_ms: T0,
        })
        .await
        .expect("create session");
    data.store
        .update_participant(
            "paired",
            ParticipantPatch {
                role: Some(Some(Role::User)),
                session_id: Some(Some("s1".into())),
                ..ParticipantPatch::default()
            },
        )
        .await
        .expect("place participant");
    let rows = data.table(Some(study(true)), false).await;
    let r = row(&rows, "paired");
    assert_eq!(r.session, "s1");
    assert_eq!(r.judgments, None);
}

#[tokio::test]
async fn evaluation_codes_verify_and_the_header_is_the_same_with_or_without_rows() {
    let data = data().await;
    for who in ["done", "failed-onboarding", "nothing-left"] {
        let typed = data.key.code(who).to_lowercase();
        match payments::verify(data.store.as_ref(), &typed)
            .await
            .expect("verify")
        {
            Verdict::Valid {
                participant,
                session,
            } => {
                assert_eq!(participant.id, who);
                assert_eq!(session.as_deref(), Some(format!("log-{who}").as_str()));
            }
            other => panic!("the code of {who} is not valid: {other:?}"),
        }
    }
    // Signed by the key, but of nobody in the store.
    let nobody = data.key.code("nobody");
    assert_eq!(
        payments::verify(data.store.as_ref(), &nobody)
            .await
            .expect("verify"),
        Verdict::Unknown
    );

    let csv = |rows: &[PaymentRow]| {
        let mut out = vec![];
        payments::write_csv(rows, &mut out).expect("csv");
        String::from_utf8(out).expect("utf-8")
    };
    let header = COLUMNS.join(",");
    assert_eq!(csv(&[]).lines().next(), Some(header.as_str()));
    let rows = data.table(Some(study(false)), false).await;
    let table = csv(&rows);
    assert_eq!(table.lines().next(), Some(header.as_str()));
    let late = table
        .lines()
        .find(|l| l.starts_with("late,"))
        .expect("row of late");
    assert!(
        late.contains(",completed,") && late.contains(",2,1,false,2,0.5,GBP,1.5,10.0,0.0,3.0"),
        "{late}"
    );
}

/// A comparison study run by the real server: base 1.25, no per-minute pay (so amounts do not
/// depend on how long the test takes), 0.30 for someone turned away; a failed practice item
/// and "nothing left" both give a code.
const LIVE_STUDY: &str = r#"id: eval-live
title: Compare
flow:
  user:
    - {kind: consent}
    - {kind: onboarding}
    - {kind: compare}
    - {kind: completion}
evaluation:
  task: compare
  judgments_per_item: 1
  items_per_worker: 1
  pairs: {rule: all_systems}
  justification: {required: false}
  no_items: {code: true}
  onboarding:
    items: [{a: g1, b: g2, better: g1}]
    fail: {code: true}
  dialogues:
    - {id: a1, system: A, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: hello there}]}
    - {id: b1, system: B, scenario: s1, turns: [{speaker: user, text: hi}, {speaker: bot, text: go away}]}
    - {id: g1, system: A, turns: [{speaker: user, text: hi}, {speaker: bot, text: good day}]}
    - {id: g2, system: B, turns: [{speaker: user, text: hi}, {speaker: bot, text: asdf qwer}]}
payment: {currency: EUR, base: 1.25, no_partner: 0.30}
"#;

/// The `data-page` of a page.
fn page_kind(body: &str) -> String {
    body.split("data-page=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_default()
        .to_string()
}

/// The value of a hidden form field.
fn hidden(body: &str, name: &str) -> String {
    body.split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_default()
        .to_string()
}

/// The completion code shown on a page, if any.
fn shown_code(body: &str) -> Option<String> {
    body.split("data-testid=\"completion-code\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .map(str::to_string)
}

/// The side (`left`/`right`) on which the page's first item shows `text`.
fn side_of(body: &str, text: &str) -> &'static str {
    let left = body
        .split("data-testid=\"dialogue-1\"")
        .next()
        .unwrap_or_default();
    if left.contains(text) { "left" } else { "right" }
}

/// Posts the current page's form with `extra` fields; returns the status.
async fn submit(c: &client::Client, path: &str, extra: &str) -> u16 {
    let step = c.step().await;
    c.post(path, &format!("step={step}{extra}")).await.status
}

/// Consent, then the practice item answered rightly or not; returns the next page.
async fn through_onboarding(c: &client::Client, right: bool) -> String {
    assert_eq!(submit(c, "/p/next", "").await, 303);
    let body = c.page().await.body;
    assert_eq!(page_kind(&body), "onboarding", "{body}");
    let side = side_of(&body, if right { "good day" } else { "asdf qwer" });
    assert_eq!(
        submit(c, "/p/onboarding", &format!("&ob0={side}")).await,
        303
    );
    c.page().await.body
}

#[tokio::test]
async fn workers_taken_through_the_real_server_get_their_rows() {
    let study = match load_text("eval-live.yaml", LIVE_STUDY, StudySource::Dir(".".into())) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut app = helpers::spawn_app_in(tmp.path().to_path_buf(), study.clone()).await;

    // Fails the practice item: screened out, with the onboarding ending's code.
    let fails = app
        .join("study=eval-live&PROLIFIC_PID=w-fail&STUDY_ID=s&SESSION_ID=1")
        .await;
    let body = through_onboarding(&fails, false).await;
    assert_eq!(page_kind(&body), "screened", "{body}");
    let fail_code = shown_code(&body).expect("the screening page gives a code");

    // Passes, judges the one pair, reaches the completion page.
    let good = app
        .join("study=eval-live&PROLIFIC_PID=w-good&STUDY_ID=s&SESSION_ID=2")
        .await;
    let body = through_onboarding(&good, true).await;
    assert_eq!(page_kind(&body), "compare", "{body}");
    let lease = hidden(&body, "lease");
    let choice = side_of(&body, "hello there");
    assert_eq!(
        submit(
            &good,
            "/p/judge",
            &format!("&lease={lease}&choice={choice}")
        )
        .await,
        303
    );
    let body = good.page().await.body;
    assert_eq!(page_kind(&body), "completion", "{body}");
    let good_code = shown_code(&body).expect("the completion page gives a code");

    // Passes, and finds nothing left: the no-items page gives a code.
    let late = app
        .join("study=eval-live&PROLIFIC_PID=w-late&STUDY_ID=s&SESSION_ID=3")
        .await;
    let body = through_onboarding(&late, true).await;
    assert_eq!(page_kind(&body), "no-items", "{body}");
    let late_code = shown_code(&body).expect("the no-items page gives a code");

    let study = Arc::new(study);
    let rows = payments::payments(app.store.as_ref(), None, &|_| Some(study.clone()), false)
        .await
        .expect("payments");
    assert_eq!(rows.len(), 3, "{rows:?}");
    let by_worker = |w: &str| {
        rows.iter()
            .find(|r| r.worker_id == w)
            .unwrap_or_else(|| panic!("no row of {w}: {rows:?}"))
    };
    let r = by_worker("w-fail");
    assert_eq!(
        (r.status.as_str(), r.completion_code.as_str()),
        ("screened_onboarding", fail_code.as_str())
    );
    assert_eq!(amounts(r), (0.0, 0.0, 0.0, 0.3));
    let r = by_worker("w-good");
    assert_eq!(
        (r.status.as_str(), r.completion_code.as_str()),
        ("completed", good_code.as_str())
    );
    assert_eq!(counts(r), (Some(1), Some(0), Some(true), Some(1), None));
    assert_eq!((r.base, r.bonus, r.total), (1.25, 0.0, 1.25));
    let r = by_worker("w-late");
    assert_eq!(
        (r.status.as_str(), r.completion_code.as_str()),
        ("no_items", late_code.as_str())
    );
    assert_eq!(amounts(r), (0.0, 0.0, 0.0, 0.3));

    for (worker, code) in [
        ("w-fail", &fail_code),
        ("w-good", &good_code),
        ("w-late", &late_code),
    ] {
        match payments::verify(app.store.as_ref(), code)
            .await
            .expect("verify")
        {
            Verdict::Valid { participant, .. } => {
                assert_eq!(participant.worker_id.as_deref(), Some(worker));
            }
            other => panic!("the code of {worker} is not valid: {other:?}"),
        }
    }
    app.stop().await;
}
