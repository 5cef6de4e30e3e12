//! `wozkit crowd` against the real `wozkit serve`: 200 simulated workers on a comparison study,
//! 30% of them abandoning their item (half give it back, half let the lease expire), then fresh
//! crowds after the leases expired until no item needs a judgment. In the end every item has
//! exactly `judgments_per_item` counted judgments, each from a different worker, and the
//! crowd's own figures agree with the store's leases.
//!
//! Two instances on one PostgreSQL database with a crowd on each, one instance killed with
//! SIGKILL while its workers hold leases: the leases it granted run out, the other instance's
//! crowds take the items over, and every item still ends with exactly `N` judgments.
//!
//! And a live study's launch (`wozkit crowd --launch`): 300 workers arriving within 20 s, each
//! page before the waiting room read for 0.2 to 10 s, 10% leaving before the waiting room: all
//! but at most one of those who stay are paired.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, wozkit};
use serde_json::Value;
use wozkit_core::event::ItemPool;
use wozkit_store::LeaseState;
use wozkit_store::testing::TestDatabase;

const STUDY: &str = "crowd-compare";
const PAIRS: usize = 10;
const N: u32 = 3;
/// Crowds after the first, each after the leases of the previous one expired.
const MAX_ROUNDS: u64 = 4;

/// A comparison study of `PAIRS` pairs (systems A and B on each scenario), one practice item,
/// `N` judgments per item, two items per worker and the shortest lease (10 s).
fn study_yaml() -> String {
    study_yaml_of(PAIRS)
}

/// [`study_yaml`] with `pairs` pairs.
fn study_yaml_of(pairs: usize) -> String {
    let mut s = format!(
        "id: {STUDY}\ntitle: Crowd compare\nflow:\n  user:\n\
         \x20   - {{kind: consent}}\n\
         \x20   - {{id: about, kind: questions, questions: [{{id: native, text: Native speaker?, kind: choice, options: [\"yes\", \"no\"]}}]}}\n\
         \x20   - {{kind: instructions, when: \"answers.native == 'no'\", text: \"Take your time.\"}}\n\
         \x20   - {{kind: onboarding}}\n\
         \x20   - {{kind: compare}}\n\
         \x20   - {{kind: completion}}\n\
         evaluation:\n  task: compare\n  judgments_per_item: {N}\n  items_per_worker: 2\n  lease_s: 10\n\
         \x20 pairs: {{rule: all_systems}}\n\
         \x20 onboarding:\n    items: [{{a: g1, b: g2, better: g1}}]\n\
         \x20 dialogues:\n\
         \x20   - {{id: g1, system: A, turns: [{{speaker: user, text: hi}}, {{speaker: bot, text: hello}}]}}\n\
         \x20   - {{id: g2, system: B, turns: [{{speaker: user, text: hi}}, {{speaker: bot, text: asdf}}]}}\n"
    );
    for i in 0..pairs {
        for sys in ["A", "B"] {
            s.push_str(&format!(
                "    - {{id: {}{i}, system: {sys}, scenario: s{i}, turns: [{{speaker: user, text: hi {i}}}, {{speaker: bot, text: reply {sys} {i}}}]}}\n",
                sys.to_lowercase()
            ));
        }
    }
    s
}

/// Runs one crowd and returns its JSON figures.
fn crowd(url: &str, workers: usize, abandon: f64, seed: u64) -> Value {
    let args = crowd_args(url, workers, abandon, seed);
    let (code, out, err) = wozkit(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "wozkit crowd failed:\n{out}\n{err}");
    eprintln!("crowd {seed}: {out}");
    serde_json::from_str(out.trim()).expect("one JSON object")
}

/// The arguments of [`crowd`].
fn crowd_args(url: &str, workers: usize, abandon: f64, seed: u64) -> Vec<String> {
    let (workers, abandon, seed) = (workers.to_string(), abandon.to_string(), seed.to_string());
    let args: [&str; 12] = [
        "crowd",
        "--url",
        url,
        "--study",
        STUDY,
        "--workers",
        &workers,
        "--abandon",
        &abandon,
        "--seed",
        &seed,
        "--json",
    ];
    args.map(String::from).to_vec()
}

fn num(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("`{key}` missing in {v}"))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
}

/// Items still short of `N` counted judgments, read beside the running server.
fn items_short(rt: &tokio::runtime::Runtime, data: &str) -> usize {
    rt.block_on(async {
        let store = wozkit_store::open_snapshot(data).await.expect("snapshot");
        let counts = store
            .item_counts(STUDY, now_ms())
            .await
            .expect("item counts");
        counts
            .iter()
            .filter(|c| c.pool == ItemPool::Item && c.done < c.needed)
            .count()
    })
}

/// Waits until no lease of the study is still running (the abandoned ones have expired, by the
/// clock the server's claims use): a wait on the condition, not on a duration, so a crowd that
/// took long needs no wait at all. `store` reads the server's data beside it.
fn until_no_lease_runs(rt: &tokio::runtime::Runtime, store: &dyn wozkit_store::Store) {
    let start = Instant::now();
    loop {
        let leases = rt.block_on(store.leases(STUDY)).expect("leases");
        let now = now_ms();
        let running = leases
            .iter()
            .filter(|l| l.state == LeaseState::Leased && l.expires_at_ms > now)
            .count();
        if running == 0 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{running} leases still running after two minutes (leases last 10 s)"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_crowd_with_abandoners_leaves_exactly_n_judgments_per_item() {
    let _turn = common::one_load_test_at_a_time();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let study = tmp.path().join("study.yaml");
    std::fs::write(&study, study_yaml()).expect("study written");
    let mut server = Server::in_dir(study, tmp.path());
    server.start_without_join_limit();
    let url = format!("http://{}", server.addr);
    let data = server.data.to_string_lossy().into_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let first = crowd(&url, 200, 0.3, 1);
    assert_eq!(num(&first, "failed"), 0, "{first}");
    assert!(num(&first, "completed_judgments") > 0, "{first}");
    // About 30% of the claims are abandoned; with ~30 claims none at all would be a bug.
    let abandoned_first = num(&first, "skipped_items") + num(&first, "abandoned_leases");
    assert!(abandoned_first > 0, "nobody abandoned: {first}");
    assert_eq!(num(&first, "abandoned_workers"), abandoned_first, "{first}");
    assert!(
        num(&first, "no_items") > 0,
        "200 workers for 30 judgments: {first}"
    );

    let mut reports = vec![first];
    let mut round = 1;
    while items_short(&rt, &data) > 0 {
        assert!(
            round <= MAX_ROUNDS,
            "items still need judgments after {MAX_ROUNDS} more crowds: {reports:?}"
        );
        // Leases last 10 s: the abandoned ones must have expired.
        let store = rt
            .block_on(wozkit_store::open_snapshot(&data))
            .expect("snapshot");
        until_no_lease_runs(&rt, store.as_ref());
        round += 1;
        let r = crowd(&url, 40, 0.0, round);
        assert_eq!(num(&r, "failed"), 0, "{r}");
        reports.push(r);
    }
    assert!(server.stop(), "the server did not stop cleanly");

    let (leases, counts) = rt.block_on(async {
        let store = wozkit_store::open_snapshot(&data).await.expect("store");
        (
            store.leases(STUDY).await.expect("leases"),
            store.item_counts(STUDY, now_ms()).await.expect("counts"),
        )
    });
    exactly_n(&leases, &counts, PAIRS);

    // The crowds' figures agree with the store.
    let total = |key: &str| reports.iter().map(|r| num(r, key)).sum::<u64>();
    let state_count = |s: LeaseState| leases.iter().filter(|l| l.state == s).count() as u64;
    assert_eq!(total("completed_judgments"), state_count(LeaseState::Done));
    assert_eq!(total("skipped_items"), state_count(LeaseState::Returned));
    assert_eq!(total("abandoned_leases"), state_count(LeaseState::Leased));
    assert_eq!(total("claims"), leases.len() as u64);
}

/// Every one of the `pairs` items has exactly `N` counted judgments, each from a different
/// worker, and no lease ended as surplus.
fn exactly_n(leases: &[wozkit_store::Lease], counts: &[wozkit_store::ItemCount], pairs: usize) {
    let items: Vec<_> = counts.iter().filter(|c| c.pool == ItemPool::Item).collect();
    assert_eq!(items.len(), pairs, "{counts:?}");
    let mut done_by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for l in leases.iter().filter(|l| l.state == LeaseState::Done) {
        done_by.entry(&l.item_id).or_default().push(&l.worker);
    }
    for c in &items {
        assert_eq!(c.needed, N);
        assert_eq!((c.done, c.surplus), (N, 0), "{c:?}");
        let workers = done_by.get(c.item_id.as_str()).cloned().unwrap_or_default();
        let distinct: BTreeSet<_> = workers.iter().collect();
        assert_eq!(
            (workers.len(), distinct.len()),
            (N as usize, N as usize),
            "item {}: done by {workers:?}",
            c.item_id
        );
    }
    assert!(!leases.iter().any(|l| l.state == LeaseState::Surplus));
}

/// The built-in `offshore-emergency` study, exported to `dir`, with generous limits: a wait of
/// 15 minutes (nobody is sent away while the lobby balances the roles) and newcomers counted as
/// on their way for 45 s (longer than anyone here reads).
fn launch_study(dir: &std::path::Path) -> std::path::PathBuf {
    let out = dir.join("launch-study");
    let (code, stdout, stderr) = wozkit(&[
        "studies",
        "export",
        "offshore-emergency",
        &out.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "export failed:\n{stdout}\n{stderr}");
    let file = out.join("study.yaml");
    let yaml = std::fs::read_to_string(&file).expect("study.yaml");
    let limits = "pairing:\n  wait_limit_s: 180\n";
    assert!(yaml.contains(limits), "the study's pairing section moved");
    let yaml = yaml.replace(limits, "pairing:\n  wait_limit_s: 900\n  arrival_s: 45\n");
    std::fs::write(&file, yaml).expect("study.yaml written");
    out
}

#[test]
fn a_launch_burst_pairs_everyone_but_at_most_one() {
    let _turn = common::one_load_test_at_a_time();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let study = launch_study(tmp.path());
    let mut server = Server::in_dir(study, tmp.path());
    server.start_without_join_limit();
    let url = format!("http://{}", server.addr);
    let (code, out, err) = wozkit(&[
        "crowd",
        "--url",
        &url,
        "--study",
        "offshore-emergency",
        "--workers",
        "300",
        "--launch",
        "20",
        "--leave",
        "0.1",
        "--read-ms",
        "200-10000",
        "--seed",
        "7",
        "--give-up",
        "600",
        "--json",
    ]);
    assert!(server.stop(), "the server did not stop cleanly");
    assert_eq!(code, 0, "wozkit crowd --launch failed:\n{out}\n{err}");
    let r: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    eprintln!(
        "launch: {} arrivals, {} left, {} stayed, {} paired, {} unpaired ({} still waiting), \
         {} roles switched, {:.1} s",
        num(&r, "arrivals"),
        num(&r, "left"),
        num(&r, "stayed"),
        num(&r, "paired"),
        num(&r, "unpaired"),
        num(&r, "still_waiting"),
        num(&r, "roles_switched"),
        r["duration_s"].as_f64().unwrap_or(0.0),
    );
    assert_eq!(num(&r, "arrivals"), 300, "{r}");
    assert_eq!(num(&r, "failed"), 0, "{r}");
    assert_eq!(num(&r, "left") + num(&r, "stayed"), 300, "{r}");
    // About 30 leave; none at all would mean nobody left.
    assert!(num(&r, "left") > 0, "{r}");
    assert!(
        num(&r, "unpaired") <= 1,
        "more than the odd one out unpaired: {r}"
    );
    assert_eq!(num(&r, "paired"), 2 * num(&r, "sessions"), "{r}");
    assert_eq!(
        num(&r, "stayed") - num(&r, "paired"),
        num(&r, "unpaired"),
        "{r}"
    );
}

/// Pairs (items) of the failover run: enough that claims are still being made and judged when
/// the instance is killed.
const FAILOVER_PAIRS: usize = 40;

/// A `wozkit crowd` run in the background against `url`, its JSON on standard output.
fn crowd_child(url: &str, workers: usize, seed: u64) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_wozkit"))
        .args(crowd_args(url, workers, 0.0, seed))
        .env_remove("WOZKIT_DATA")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wozkit crowd starts")
}

/// Waits for a background crowd (killing it after `limit`); its exit code and JSON, if any.
fn crowd_result(mut child: std::process::Child, limit: Duration) -> (Option<i32>, Option<Value>) {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Ok(None) = child.try_wait() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("crowd output");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "crowd: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    (out.status.code(), serde_json::from_str(text.trim()).ok())
}

#[test]
fn an_instance_killed_while_claims_are_in_flight_leaves_exactly_n_judgments_per_item() {
    let _turn = common::one_load_test_at_a_time();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let Some(pg) = rt.block_on(TestDatabase::create("crowd failover")) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let study = tmp.path().join("study.yaml");
    std::fs::write(&study, study_yaml_of(FAILOVER_PAIRS)).expect("study written");
    let mut servers: Vec<Server> = ["claims-a", "claims-b"]
        .into_iter()
        .map(|id| {
            let mut server = Server::new(&study, &pg.url, tmp.path().join(format!("{id}.log")));
            let args = [
                "--join-limit".to_string(),
                "0".into(),
                "--instance-id".into(),
                id.into(),
                "--advertise-url".into(),
                format!("http://{}", server.addr),
            ];
            server.start_with(&args);
            server
        })
        .collect();
    let url = |s: &Server| format!("http://{}", s.addr);
    let store = rt
        .block_on(wozkit_store::open_snapshot(&pg.url))
        .expect("store");
    let leases = |store: &std::sync::Arc<dyn wozkit_store::Store>| {
        rt.block_on(store.leases(STUDY)).expect("leases")
    };

    // A crowd on the first instance, killed once its workers hold leases (the only leases so
    // far), as a second crowd starts on the other instance.
    let on_a = crowd_child(&url(&servers[0]), 150, 21);
    let t = Instant::now();
    let open_at_kill = loop {
        let open = leases(&store)
            .iter()
            .filter(|l| l.state == LeaseState::Leased)
            .count();
        if open >= 5 {
            break open;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "no claims in flight after two minutes; logs:\n{}\n{}",
            servers[0].log_text(),
            servers[1].log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let on_b = crowd_child(&url(&servers[1]), 60, 22);
    servers[0].kill();
    eprintln!("killed instance a with {open_at_kill} of its leases open");
    let (_, a_report) = crowd_result(on_a, Duration::from_secs(120));
    let (b_code, b_report) = crowd_result(on_b, Duration::from_secs(300));
    assert_eq!(
        b_code,
        Some(0),
        "the crowd on the surviving instance failed: {b_report:?}\n{}",
        servers[1].log_text()
    );
    eprintln!("crowd on the killed instance: {a_report:?}");

    // The killed instance's leases run out (10 s); fresh crowds on the survivor finish the items
    // once they have.
    let mut round = 0;
    let short = |store: &std::sync::Arc<dyn wozkit_store::Store>| {
        rt.block_on(store.item_counts(STUDY, now_ms()))
            .expect("item counts")
            .iter()
            .filter(|c| c.pool == ItemPool::Item && c.done < c.needed)
            .count()
    };
    while short(&store) > 0 {
        round += 1;
        assert!(
            round <= MAX_ROUNDS,
            "items still need judgments after {MAX_ROUNDS} more crowds"
        );
        until_no_lease_runs(&rt, store.as_ref());
        let r = crowd(&url(&servers[1]), 60, 0.0, 30 + round);
        assert_eq!(num(&r, "failed"), 0, "{r}");
    }
    assert!(
        servers[1].stop(),
        "the surviving instance did not stop cleanly"
    );

    let (all, counts) = rt.block_on(async {
        (
            store.leases(STUDY).await.expect("leases"),
            store.item_counts(STUDY, now_ms()).await.expect("counts"),
        )
    });
    exactly_n(&all, &counts, FAILOVER_PAIRS);
    // Some leases the killed instance granted were never submitted: they ran out and their items
    // were judged by others (a lease left open is never counted).
    let orphaned = all.iter().filter(|l| l.state == LeaseState::Leased).count();
    eprintln!(
        "claims failover: {} leases, {orphaned} left open by the kill or the dead crowd, {round} \
         more crowds",
        all.len()
    );
    rt.block_on(store.close());
    rt.block_on(pg.drop_database());
}
