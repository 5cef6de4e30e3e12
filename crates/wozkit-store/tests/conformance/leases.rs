//! Conformance cases about evaluation items and their leases: exactly `needed` judgments per
//! item under heavy concurrency (also between two PostgreSQL stores, as two processes would be),
//! the worker rules (never the same item or dialogue twice, `max_per_worker`), the gold pool,
//! late submits, returns, counts and participant logs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use wozkit_core::event::{Actor, EventKind, ItemPool};
use wozkit_store::{
    ClaimRequest, EvalItem, LeaseState, NewEvent, SessionFilter, SessionKind, Store, StoreError,
    SubmitOutcome,
};

use crate::harness::{Backend, message, new_session, text_of};

/// Two handles on the backend's database: one store shared twice on SQLite (one process holds
/// it), two separate stores on PostgreSQL (as two server instances would be).
async fn two_stores(backend: &Backend) -> (Arc<dyn Store>, Arc<dyn Store>) {
    let first = backend.open().await;
    let second = match backend {
        Backend::Sqlite(_) => Arc::clone(&first),
        Backend::Postgres { .. } => backend.open().await,
    };
    (first, second)
}

fn item(id: &str, pool: ItemPool, dialogues: &[&str], needed: u32) -> EvalItem {
    EvalItem {
        id: id.to_owned(),
        pool,
        dialogues: dialogues.iter().map(|d| (*d).to_owned()).collect(),
        needed,
    }
}

fn req(study: &str, worker: &str, lease_id: &str, now_ms: u64) -> ClaimRequest {
    ClaimRequest {
        study_id: study.to_owned(),
        worker: worker.to_owned(),
        pool: ItemPool::Item,
        lease_id: lease_id.to_owned(),
        now_ms,
        lease_ms: 100,
        max_per_worker: None,
        prefer: vec![],
    }
}

/// A submit callback appending one message naming the outcome.
fn judged(text: &'static str) -> Box<dyn FnOnce(SubmitOutcome) -> Vec<NewEvent> + Send> {
    Box::new(move |outcome| vec![message(&format!("{text} {outcome:?}"), 7)])
}

/// The same small pseudo-random choice for a (worker, round) on every run.
fn choice(worker: usize, round: u64) -> u64 {
    let mut x = (worker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ round;
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x ^ (x >> 32)) % 10
}

/// 20 comparison items in a ring (item i shows dialogues i and i+1), 3 judgments each, 200
/// workers claiming together round after round; a share of the workers return their item, let
/// the lease expire, or submit it late. At the end every item has exactly 3 done leases from 3
/// different workers and no worker was given an item or a dialogue twice.
pub async fn exact_n_with_many_workers(backend: &Backend) {
    const ITEMS: usize = 20;
    const WORKERS: usize = 200;
    const LEASE_MS: u64 = 1500;
    let (a, b) = two_stores(backend).await;
    let items: Vec<EvalItem> = (0..ITEMS)
        .map(|i| {
            let left = format!("d{i:02}");
            let right = format!("d{:02}", (i + 1) % ITEMS);
            item(&format!("i{i:02}"), ItemPool::Item, &[&left, &right], 3)
        })
        .collect();
    a.register_items("st", &items).await.expect("register");
    for w in 0..WORKERS {
        a.open_participant_log(new_session(&format!("log-{w}"), "st", 1))
            .await
            .expect("participant log");
    }

    // Leases a worker let expire, which it may still submit later.
    let mut abandoned: Vec<Option<String>> = vec![None; WORKERS];
    let mut idle_rounds = 0;
    let mut round = 0u64;
    while idle_rounds < 2 {
        round += 1;
        assert!(round < 500, "claims never ran out");
        let now = round * 1000;
        let mut tasks = Vec::new();
        for (w, pending) in abandoned.iter_mut().enumerate() {
            let store = Arc::clone(if w % 2 == 0 { &a } else { &b });
            let pending = pending.take();
            tasks.push(tokio::spawn(async move {
                worker_round(store, w, round, now, LEASE_MS, pending).await
            }));
        }
        let mut claimed = 0;
        for (w, task) in tasks.into_iter().enumerate() {
            let (got, keep) = task.await.expect("worker task");
            claimed += usize::from(got);
            abandoned[w] = keep;
        }
        idle_rounds = if claimed == 0 { idle_rounds + 1 } else { 0 };
    }

    let counts = a
        .item_counts("st", (round + 10) * 1000)
        .await
        .expect("counts");
    assert_eq!(counts.len(), ITEMS);
    for count in &counts {
        assert_eq!(count.done, 3, "{count:?}");
        assert_eq!(count.active, 0, "{count:?}");
    }
    let leases = a.leases("st").await.expect("leases");
    let mut done_by_item: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut items_of: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut dialogues_of: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut states: HashMap<LeaseState, usize> = HashMap::new();
    for lease in &leases {
        *states.entry(lease.state).or_default() += 1;
        if lease.state == LeaseState::Done {
            done_by_item
                .entry(&lease.item_id)
                .or_default()
                .insert(&lease.worker);
        }
        items_of
            .entry(&lease.worker)
            .or_default()
            .push(&lease.item_id);
        dialogues_of
            .entry(&lease.worker)
            .or_default()
            .extend(lease.dialogues.iter().map(String::as_str));
    }
    assert_eq!(done_by_item.len(), ITEMS);
    for (item, workers) in &done_by_item {
        assert_eq!(workers.len(), 3, "{item}: three different workers");
    }
    for (worker, mut seen) in items_of.into_iter().chain(dialogues_of) {
        let all = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), all, "{worker} got an item or dialogue twice");
    }
    // Every way out of a lease happened, so the run exercised what it claims to.
    for state in [LeaseState::Done, LeaseState::Returned, LeaseState::Leased] {
        assert!(states.get(&state).is_some_and(|&n| n > 0), "{states:?}");
    }
    // Each worker's log holds one event per stored judgment, numbered without gaps.
    let judged_by: usize = leases
        .iter()
        .filter(|l| matches!(l.state, LeaseState::Done | LeaseState::Surplus))
        .count();
    let mut logged = 0;
    for w in 0..WORKERS {
        let log = a.events(&format!("log-{w}"), 0).await.expect("log");
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
        logged += log.len();
    }
    assert_eq!(logged, judged_by);
    a.close().await;
    b.close().await;
}

/// One worker's turn in a round: maybe submit a lease abandoned earlier, then claim and submit,
/// return or abandon the new lease. Returns whether a claim succeeded and the lease abandoned.
async fn worker_round(
    store: Arc<dyn Store>,
    w: usize,
    round: u64,
    now: u64,
    lease_ms: u64,
    pending: Option<String>,
) -> (bool, Option<String>) {
    let pick = choice(w, round);
    let log = format!("log-{w}");
    if let Some(lease) = pending {
        if pick < 5 {
            store
                .submit(&lease, now, &log, judged("late"))
                .await
                .expect("late submit");
        } else if pick < 7 {
            assert!(store.return_lease(&lease, now).await.expect("return"));
        }
        // Otherwise the lease stays open (and expired) for good.
    }
    let claim = ClaimRequest {
        lease_ms,
        ..req("st", &format!("w{w}"), &format!("l-{w}-{round}"), now)
    };
    let Some(lease) = store.claim(claim).await.expect("claim") else {
        return (false, None);
    };
    match choice(w, round + 1_000_000) {
        0..=5 => {
            let (outcome, events) = store
                .submit(&lease.id, now + 10, &log, judged("on time"))
                .await
                .expect("submit");
            assert_eq!(outcome, SubmitOutcome::Counted, "a live lease counts");
            assert_eq!(events.len(), 1);
            (true, None)
        }
        6..=7 => {
            assert!(
                store
                    .return_lease(&lease.id, now + 10)
                    .await
                    .expect("return")
            );
            (true, None)
        }
        _ => (true, Some(lease.id)),
    }
}

/// Two workers race for the single judgment of a single item, 2,000 times over: exactly one
/// gets it each time (on PostgreSQL each worker through its own store).
pub async fn two_workers_race_for_the_last_claim(backend: &Backend) {
    let (a, b) = two_stores(backend).await;
    for round in 0..2000 {
        let study = format!("race-{round}");
        a.register_items(&study, &[item("only", ItemPool::Item, &["d"], 1)])
            .await
            .expect("register");
        let claim = |store: &Arc<dyn Store>, worker: &'static str| {
            let store = Arc::clone(store);
            let request = req(&study, worker, &format!("{worker}-{round}"), 5);
            tokio::spawn(async move { store.claim(request).await })
        };
        let (x, y) = tokio::join!(claim(&a, "x"), claim(&b, "y"));
        let x = x.expect("task").expect("claim x");
        let y = y.expect("task").expect("claim y");
        assert_eq!(
            usize::from(x.is_some()) + usize::from(y.is_some()),
            1,
            "round {round}: {x:?} / {y:?}"
        );
        assert_eq!(a.leases(&study).await.expect("leases").len(), 1);
    }
    a.close().await;
    b.close().await;
}

/// A lease submitted after it expired is kept and counted while its item still needs a
/// judgment (other live leases included), and is surplus once the item is full; a second submit
/// stores nothing; the submit's events land in the log numbered after everything appended.
pub async fn late_submits_double_submits_and_their_events(backend: &Backend) {
    let store = backend.open().await;
    store
        .register_items(
            "st",
            &[
                item("a", ItemPool::Item, &["da"], 1),
                item("b", ItemPool::Item, &["db"], 1),
                item("c", ItemPool::Item, &["dc"], 1),
            ],
        )
        .await
        .expect("register");
    store
        .open_participant_log(new_session("log", "st", 1))
        .await
        .expect("log");
    store
        .append("log", vec![message("started", 1)])
        .await
        .expect("append");
    let claim = |worker: &str, lease: &str, now: u64| req("st", worker, lease, now);
    // w1 takes a, b and c in id order (all equally empty), each lease running 0..100.
    for lease in ["w1-a", "w1-b", "w1-c"] {
        let got = store.claim(claim("w1", lease, 0)).await.expect("claim");
        assert_eq!(got.map(|l| l.item_id), Some(lease[3..].to_owned()));
    }

    // a: expired, nobody else took it: counted.
    let (outcome, events) = store
        .submit("w1-a", 200, "log", judged("a"))
        .await
        .expect("late submit a");
    assert_eq!(outcome, SubmitOutcome::Counted);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].seq, 2);

    // b: after expiry w2 took it and judged it in time, so w1's late judgment is surplus.
    let w2b = store.claim(claim("w2", "w2-b", 150)).await.expect("claim");
    assert_eq!(w2b.map(|l| l.item_id).as_deref(), Some("b"));
    let (outcome, _) = store
        .submit("w2-b", 160, "log", judged("b on time"))
        .await
        .expect("submit");
    assert_eq!(outcome, SubmitOutcome::Counted);
    let (outcome, events) = store
        .submit("w1-b", 200, "log", judged("b late"))
        .await
        .expect("late submit b");
    assert_eq!(outcome, SubmitOutcome::Surplus);
    assert_eq!(events.len(), 1, "a surplus judgment is kept");

    // c: after expiry w2 holds a live lease on it: the late judgment is surplus.
    let w2c = store.claim(claim("w2", "w2-c", 150)).await.expect("claim");
    assert_eq!(w2c.map(|l| l.item_id).as_deref(), Some("c"));
    let (outcome, _) = store
        .submit("w1-c", 200, "log", judged("c late"))
        .await
        .expect("late submit c");
    assert_eq!(outcome, SubmitOutcome::Surplus);
    let (outcome, _) = store
        .submit("w2-c", 210, "log", judged("c on time"))
        .await
        .expect("submit c");
    assert_eq!(outcome, SubmitOutcome::Counted);

    // A second submit stores nothing and returns no events.
    let before = store.events("log", 0).await.expect("log").len();
    let (outcome, events) = store
        .submit("w1-a", 300, "log", judged("again"))
        .await
        .expect("double submit");
    assert_eq!(outcome, SubmitOutcome::AlreadyClosed(LeaseState::Done));
    assert!(events.is_empty());
    let (outcome, _) = store
        .submit("w1-b", 300, "log", judged("again"))
        .await
        .expect("double submit");
    assert_eq!(outcome, SubmitOutcome::AlreadyClosed(LeaseState::Surplus));
    assert_eq!(store.events("log", 0).await.expect("log").len(), before);

    // The log: everything in order, numbered 1.. without gaps, as each submit returned it.
    store
        .append("log", vec![message("between", 8)])
        .await
        .expect("append");
    let log = store.events("log", 0).await.expect("log");
    let texts: Vec<&str> = log.iter().map(|e| text_of(&e.kind)).collect();
    assert_eq!(
        texts,
        [
            "started",
            "a Counted",
            "b on time Counted",
            "b late Surplus",
            "c late Surplus",
            "c on time Counted",
            "between"
        ]
    );
    let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=7).collect::<Vec<_>>());

    let states: Vec<(String, LeaseState)> = store
        .leases("st")
        .await
        .expect("leases")
        .into_iter()
        .map(|l| (l.id, l.state))
        .collect();
    let expected = [
        ("w1-a", LeaseState::Done),
        ("w1-b", LeaseState::Surplus),
        ("w1-c", LeaseState::Surplus),
        ("w2-b", LeaseState::Done),
        ("w2-c", LeaseState::Done),
    ];
    let expected: Vec<(String, LeaseState)> = expected
        .iter()
        .map(|(id, s)| ((*id).to_owned(), *s))
        .collect();
    assert_eq!(states, expected, "by claim time, then id");

    // Unknown lease; unknown log (nothing stored, the lease stays open).
    let err = store
        .submit("nope", 300, "log", judged("x"))
        .await
        .expect_err("unknown lease");
    assert!(
        matches!(err, StoreError::NotFound { what: "lease", ref id } if id == "nope"),
        "{err}"
    );
    store
        .register_items("st", &[item("d", ItemPool::Item, &["dd"], 1)])
        .await
        .expect("register d");
    let w3 = store.claim(claim("w3", "w3-d", 400)).await.expect("claim");
    assert_eq!(w3.map(|l| l.item_id).as_deref(), Some("d"));
    let err = store
        .submit("w3-d", 410, "ghost", judged("x"))
        .await
        .expect_err("unknown log");
    assert!(matches!(err, StoreError::UnknownSession(_)), "{err}");
    let lease = store.lease("w3-d").await.expect("lease").expect("stored");
    assert_eq!(lease.state, LeaseState::Leased);
    store.close().await;
}

/// Comparison items sharing a dialogue are never given to the same worker; `max_per_worker`
/// caps a worker's item leases; the least judged item goes first, ties by id; gold items ignore
/// `needed` and never mix with the item pool.
pub async fn worker_rules_order_and_gold(backend: &Backend) {
    let store = backend.open().await;
    store
        .register_items(
            "st",
            &[
                item("p1", ItemPool::Item, &["d1", "d2"], 5),
                item("p2", ItemPool::Item, &["d2", "d3"], 5),
                item("p3", ItemPool::Item, &["d4", "d5"], 5),
                item("p4", ItemPool::Item, &["d3", "d1"], 5),
                item("g1", ItemPool::Gold, &["dg"], 0),
            ],
        )
        .await
        .expect("register");
    let claim = |worker: &str, lease: &str| req("st", worker, lease, 10);
    let mut got = Vec::new();
    while let Some(lease) = store
        .claim(claim("w", &format!("w-{}", got.len())))
        .await
        .expect("claim")
    {
        got.push(lease.item_id);
    }
    // p1 (d1, d2) first; p2 shares d2 and p4 shares d1: only p3 is left.
    assert_eq!(got, ["p1", "p3"]);
    // The pairs sharing a dialogue with nothing the worker saw are given in order.
    let mut other = Vec::new();
    while let Some(lease) = store
        .claim(claim("v", &format!("v-{}", other.len())))
        .await
        .expect("claim")
    {
        other.push(lease.item_id);
    }
    // p1 and p3 have one lease each, p2 and p4 none: p2 first; then p4 shares d3, p1 shares d2,
    // p3 is free.
    assert_eq!(other, ["p2", "p3"]);

    // max_per_worker counts every lease of the item pool, returned ones too.
    let capped = |lease: &str| ClaimRequest {
        max_per_worker: Some(1),
        ..claim("m", lease)
    };
    let first = store
        .claim(capped("m-0"))
        .await
        .expect("claim")
        .expect("one");
    assert!(store.return_lease(&first.id, 11).await.expect("return"));
    assert!(store.claim(capped("m-1")).await.expect("claim").is_none());

    // Gold: any number of workers, regardless of needed; never from the item pool.
    let gold = |worker: &str| ClaimRequest {
        pool: ItemPool::Gold,
        ..claim(worker, &format!("{worker}-gold"))
    };
    store
        .open_participant_log(new_session("glog", "st", 1))
        .await
        .expect("log");
    for worker in ["g-a", "g-b", "g-c"] {
        let lease = store
            .claim(gold(worker))
            .await
            .expect("claim")
            .expect("gold");
        assert_eq!((lease.item_id.as_str(), lease.pool), ("g1", ItemPool::Gold));
    }
    assert!(
        store.claim(gold("g-a")).await.expect("claim").is_none(),
        "the same gold item twice"
    );
    for (lease, now) in [("g-a-gold", 10_000), ("g-b-gold", 50)] {
        let (outcome, events) = store
            .submit(lease, now, "glog", Box::new(|_| Vec::new()))
            .await
            .expect("gold submit");
        assert_eq!(outcome, SubmitOutcome::Counted, "gold is never surplus");
        assert!(events.is_empty());
    }
    let items: Vec<String> = store
        .leases("st")
        .await
        .expect("leases")
        .into_iter()
        .filter(|l| l.pool == ItemPool::Item)
        .map(|l| l.item_id)
        .collect();
    assert!(!items.contains(&"g1".to_owned()));
    store.close().await;
}

/// `item_counts` figures, `open_lease`, `return_lease` and re-registering items.
pub async fn counts_open_leases_returns_and_reregistering(backend: &Backend) {
    let store = backend.open().await;
    let items = [
        item("a", ItemPool::Item, &["da"], 2),
        item("b", ItemPool::Item, &["db"], 2),
    ];
    store.register_items("st", &items).await.expect("register");
    store
        .open_participant_log(new_session("log", "st", 1))
        .await
        .expect("log");
    assert!(store.open_lease("st", "w1").await.expect("open").is_none());

    // t=0: w1 gets a, w2 gets b, w3 gets a (a and b at one each, a first), w4 gets b.
    let mut leases = Vec::new();
    for worker in ["w1", "w2", "w3", "w4"] {
        let lease = store
            .claim(req("st", worker, &format!("{worker}-1"), 0))
            .await
            .expect("claim")
            .expect("an item");
        leases.push(lease.item_id.clone());
        assert_eq!(
            store.open_lease("st", worker).await.expect("open").as_ref(),
            Some(&lease)
        );
    }
    assert_eq!(leases, ["a", "b", "a", "b"]);
    // All full (two live leases each): w5 gets nothing.
    assert!(
        store
            .claim(req("st", "w5", "w5-1", 50))
            .await
            .expect("claim")
            .is_none()
    );

    // w1 submits (done), w2 returns (b has room again), w3 lets its lease expire.
    store
        .submit("w1-1", 50, "log", judged("w1"))
        .await
        .expect("submit");
    assert!(store.open_lease("st", "w1").await.expect("open").is_none());
    assert!(store.return_lease("w2-1", 50).await.expect("return"));
    assert!(
        !store.return_lease("w2-1", 51).await.expect("again"),
        "not open any more"
    );
    assert!(!store.return_lease("nope", 51).await.expect("unknown"));
    assert!(
        !store.return_lease("w1-1", 51).await.expect("done"),
        "a done lease stays done"
    );
    // w2 never gets b again, and a is full (one done, one live): nothing for w2.
    assert!(
        store
            .claim(req("st", "w2", "w2-2", 60))
            .await
            .expect("claim")
            .is_none()
    );
    // w5 gets b (one live) before a (one done, one live: full).
    let w5 = store
        .claim(req("st", "w5", "w5-2", 60))
        .await
        .expect("claim");
    assert_eq!(w5.map(|l| l.item_id).as_deref(), Some("b"));

    // At t=120 w3's and w4's leases (0..100) have expired; w5's (60..160) is live.
    let counts = store.item_counts("st", 120).await.expect("counts");
    let figures: Vec<(&str, u32, u32, u32, u32, u32, u32)> = counts
        .iter()
        .map(|c| {
            (
                c.item_id.as_str(),
                c.needed,
                c.done,
                c.surplus,
                c.active,
                c.returned,
                c.expired,
            )
        })
        .collect();
    assert_eq!(figures, [("a", 2, 1, 0, 0, 0, 1), ("b", 2, 0, 0, 1, 1, 1)]);
    assert!(counts.iter().all(|c| c.pool == ItemPool::Item));

    // An expired lease is still the item on the worker's page; a newer one replaces it.
    let open = store
        .open_lease("st", "w3")
        .await
        .expect("open")
        .expect("w3");
    assert_eq!(open.id, "w3-1");
    let w3 = store
        .claim(req("st", "w3", "w3-2", 120))
        .await
        .expect("claim");
    assert_eq!(w3.map(|l| l.item_id).as_deref(), Some("b"));
    let open = store
        .open_lease("st", "w3")
        .await
        .expect("open")
        .expect("w3");
    assert_eq!(open.id, "w3-2");

    // Re-registering keeps the leases and takes the new `needed`; items not given stay.
    let before = store.leases("st").await.expect("leases");
    store
        .register_items(
            "st",
            &[
                item("a", ItemPool::Item, &["da"], 4),
                item("c", ItemPool::Item, &["dc"], 1),
            ],
        )
        .await
        .expect("register again");
    assert_eq!(store.leases("st").await.expect("leases"), before);
    let counts = store.item_counts("st", 120).await.expect("counts");
    let needed: Vec<(&str, u32, u32)> = counts
        .iter()
        .map(|c| (c.item_id.as_str(), c.needed, c.done))
        .collect();
    assert_eq!(needed, [("a", 4, 1), ("b", 2, 0), ("c", 1, 0)]);
    // Another study's figures are its own.
    assert!(
        store
            .item_counts("other", 120)
            .await
            .expect("counts")
            .is_empty()
    );
    store.close().await;
}

/// Participant logs: opening one twice returns the same record, they are not listed as
/// dialogues, and a filter asks for them.
pub async fn participant_logs_are_listed_apart(backend: &Backend) {
    let store = backend.open().await;
    let dialogue = store
        .create_session(new_session("dlg", "st", 1))
        .await
        .expect("dialogue");
    assert_eq!(dialogue.kind, SessionKind::Dialogue);
    let log = store
        .open_participant_log(new_session("plog", "st", 2))
        .await
        .expect("log");
    assert_eq!((log.kind, log.last_seq), (SessionKind::Participant, 0));
    store
        .append("plog", vec![message("answer", 3)])
        .await
        .expect("append");
    let again = store
        .open_participant_log(new_session("plog", "st", 9))
        .await
        .expect("again");
    assert_eq!(
        (again.created_at_ms, again.last_seq),
        (2, 1),
        "the existing record"
    );
    assert_eq!(
        store
            .session("plog")
            .await
            .expect("session")
            .map(|s| s.kind),
        Some(SessionKind::Participant)
    );

    let ids = |sessions: Vec<wozkit_store::SessionRecord>| -> Vec<String> {
        sessions.into_iter().map(|s| s.id).collect()
    };
    let dialogues = SessionFilter::default();
    assert_eq!(
        ids(store.list_sessions(&dialogues).await.expect("list")),
        ["dlg"]
    );
    assert_eq!(store.count_sessions(&dialogues).await.expect("count"), 1);
    let logs = SessionFilter {
        kind: SessionKind::Participant,
        study_id: Some("st".to_owned()),
        ..SessionFilter::default()
    };
    assert_eq!(
        ids(store.list_sessions(&logs).await.expect("list")),
        ["plog"]
    );
    assert_eq!(store.count_sessions(&logs).await.expect("count"), 1);
    // The events page still walks every kind.
    let page = store
        .events_page(Some("st"), None, 100)
        .await
        .expect("page");
    assert_eq!(page.len(), 1);
    assert!(matches!(page[0].actor, Actor::Participant { .. }));
    assert!(matches!(page[0].kind, EventKind::Message { .. }));
    store.close().await;
}

/// The ids as owned strings, for `ClaimRequest::prefer`.
fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// A preference puts the listed items first in its order, whatever their judgments or ids;
/// listed items that are full, already leased to the worker, share a dialogue with one of the
/// worker's items, are unknown or of another pool are skipped; unlisted eligible items follow
/// in the usual order (fewest done plus open leases, then id); `max_per_worker` still caps.
pub async fn preference_order_skips_and_the_rest(backend: &Backend) {
    let store = backend.open().await;
    store
        .register_items(
            "st",
            &[
                item("i1", ItemPool::Item, &["d1"], 1),
                item("i2", ItemPool::Item, &["d2"], 3),
                item("i3", ItemPool::Item, &["d3", "d5"], 3),
                item("i4", ItemPool::Item, &["d4"], 3),
                item("i5", ItemPool::Item, &["d5"], 3),
                item("i6", ItemPool::Item, &["d6"], 3),
                item("i7", ItemPool::Item, &["d7"], 3),
                item("g1", ItemPool::Gold, &["dg1"], 0),
                item("g2", ItemPool::Gold, &["dg2"], 0),
            ],
        )
        .await
        .expect("register");
    let claim = |worker: &str, lease: &str, prefer: &[&str]| ClaimRequest {
        prefer: ids(prefer),
        ..req("st", worker, lease, 10)
    };
    let got = |lease: Option<wozkit_store::Lease>| lease.map(|l| l.item_id);

    // Other workers fill i1 (needed 1) and give i2 and i6 one lease each; i7 has none.
    for (worker, item_id) in [("x", "i1"), ("y", "i2"), ("y", "i6")] {
        let lease = store
            .claim(claim(worker, &format!("{worker}-{item_id}"), &[item_id]))
            .await
            .expect("claim");
        assert_eq!(
            got(lease).as_deref(),
            Some(item_id),
            "{worker} asked for it"
        );
    }
    // Worker w sees i5 (dialogue d5, shared with i3).
    let lease = store
        .claim(claim("w", "w-0", &["i5"]))
        .await
        .expect("claim");
    assert_eq!(got(lease).as_deref(), Some("i5"));

    // i1 is full, i5 was leased to w, i3 shares d5, "nope" is unknown and g1 is gold: the first
    // eligible listed item is i2 (judged more than i4 and i7), then i4.
    let prefer = ["i1", "i5", "i3", "nope", "g1", "i2", "i4"];
    let mut order = Vec::new();
    while let Some(lease) = store
        .claim(claim("w", &format!("w-{}", order.len() + 1), &prefer))
        .await
        .expect("claim")
    {
        order.push(lease.item_id);
    }
    // Then the unlisted eligible items, fewest leases first (i7 has none, i6 one).
    assert_eq!(order, ["i2", "i4", "i7", "i6"]);

    // Without a preference the same state gives the usual order: fewest leases, then id.
    let mut usual = Vec::new();
    while let Some(lease) = store
        .claim(claim("u", &format!("u-{}", usual.len()), &[]))
        .await
        .expect("claim")
    {
        usual.push(lease.item_id);
    }
    // Leases now: i1 full, i2 2, i3 0, i4 1, i5 1, i6 2, i7 1. i3 first, then i4 (d4), i5
    // shares d5 with i3, i7, then i2 and i6.
    assert_eq!(usual, ["i3", "i4", "i7", "i2", "i6"]);

    // A repeated id keeps its first place (i2 is full by now; i4 and i7 have room); a
    // preference does not lift max_per_worker.
    let capped = |lease: &str| ClaimRequest {
        max_per_worker: Some(1),
        ..claim("m", lease, &["i2", "i4", "i7", "i4"])
    };
    let first = store.claim(capped("m-0")).await.expect("claim");
    assert_eq!(got(first).as_deref(), Some("i4"));
    assert!(store.claim(capped("m-1")).await.expect("claim").is_none());

    // Gold items follow a preference too, and item ids of the other pool are skipped.
    let gold = |worker: &str, prefer: &[&str]| ClaimRequest {
        pool: ItemPool::Gold,
        ..claim(worker, &format!("{worker}-gold"), prefer)
    };
    let lease = store.claim(gold("ga", &["i7", "g2"])).await.expect("claim");
    assert_eq!(got(lease).as_deref(), Some("g2"));
    let lease = store.claim(gold("gb", &["i7"])).await.expect("claim");
    assert_eq!(got(lease).as_deref(), Some("g1"), "unlisted: usual order");
    store.close().await;
}

/// Exactly `needed` judgments per item when 60 workers claim together through two handles
/// (two stores on PostgreSQL), most of them preferring the same few items (so their claims
/// contend for the same rows) and the rest with no preference; some workers give their item
/// back. No worker gets an item or a dialogue twice.
pub async fn exact_n_with_a_preference_under_concurrency(backend: &Backend) {
    const ITEMS: usize = 12;
    const WORKERS: usize = 60;
    const NEEDED: usize = 2;
    let (a, b) = two_stores(backend).await;
    let items: Vec<EvalItem> = (0..ITEMS)
        .map(|i| {
            let left = format!("d{i:02}");
            let right = format!("d{:02}", (i + 1) % ITEMS);
            item(
                &format!("c{i:02}"),
                ItemPool::Item,
                &[&left, &right],
                NEEDED as u32,
            )
        })
        .collect();
    a.register_items("st", &items).await.expect("register");
    for w in 0..WORKERS {
        a.open_participant_log(new_session(&format!("log-{w}"), "st", 1))
            .await
            .expect("participant log");
    }
    let prefer_of = |w: usize| -> Vec<String> {
        match w % 3 {
            // The hot items, then one of the worker's own.
            0 | 1 => vec![
                "c03".to_owned(),
                "c07".to_owned(),
                "c10".to_owned(),
                format!("c{:02}", w % ITEMS),
            ],
            _ => Vec::new(),
        }
    };
    let mut idle_rounds = 0;
    let mut round = 0u64;
    while idle_rounds < 2 {
        round += 1;
        assert!(round < 200, "claims never ran out");
        let now = round * 1000;
        let mut tasks = Vec::new();
        for w in 0..WORKERS {
            let store = Arc::clone(if w % 2 == 0 { &a } else { &b });
            let claim = ClaimRequest {
                lease_ms: 100_000,
                prefer: prefer_of(w),
                ..req("st", &format!("w{w}"), &format!("l-{w}-{round}"), now)
            };
            tasks.push(tokio::spawn(async move {
                let Some(lease) = store.claim(claim).await.expect("claim") else {
                    return false;
                };
                if choice(w, round) < 7 {
                    let (outcome, _) = store
                        .submit(&lease.id, now + 10, &format!("log-{w}"), judged("pref"))
                        .await
                        .expect("submit");
                    assert_eq!(outcome, SubmitOutcome::Counted, "a live lease counts");
                } else {
                    assert!(
                        store
                            .return_lease(&lease.id, now + 10)
                            .await
                            .expect("return")
                    );
                }
                true
            }));
        }
        let mut claimed = 0;
        for task in tasks {
            claimed += usize::from(task.await.expect("worker task"));
        }
        idle_rounds = if claimed == 0 { idle_rounds + 1 } else { 0 };
    }

    let counts = a
        .item_counts("st", (round + 10) * 1000)
        .await
        .expect("counts");
    assert_eq!(counts.len(), ITEMS);
    for count in &counts {
        assert_eq!(count.done as usize, NEEDED, "{count:?}");
        assert_eq!(count.active, 0, "{count:?}");
        assert_eq!(count.surplus, 0, "{count:?}");
    }
    let leases = a.leases("st").await.expect("leases");
    let mut done_by_item: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut seen: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut returned = 0;
    for lease in &leases {
        match lease.state {
            LeaseState::Done => {
                done_by_item
                    .entry(&lease.item_id)
                    .or_default()
                    .insert(&lease.worker);
            }
            LeaseState::Returned => returned += 1,
            other => panic!("lease {} left {other:?}", lease.id),
        }
        let mine = seen.entry(&lease.worker).or_default();
        mine.push(&lease.item_id);
        mine.extend(lease.dialogues.iter().map(|d| d.as_str()));
    }
    assert!(returned > 0, "the run gave items back");
    assert_eq!(done_by_item.len(), ITEMS);
    for (item_id, workers) in &done_by_item {
        assert_eq!(workers.len(), NEEDED, "{item_id}: different workers");
    }
    for (worker, mut mine) in seen {
        let all = mine.len();
        mine.sort_unstable();
        mine.dedup();
        assert_eq!(mine.len(), all, "{worker} got an item or dialogue twice");
    }
    a.close().await;
    b.close().await;
}
