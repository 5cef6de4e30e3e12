//! Dialogue-act annotation of turns over HTTP (`task: turn_acts`): the guest turns of stored
//! sessions are the items, each shown after the turns before it; a label with an act outside the
//! act set or a bad slot-value row is refused (422) with what and which row, the choices kept; a
//! restart keeps the worker's turn; each turn gets exactly `judgments_per_item` counted labels,
//! though one lease was abandoned (expired) and one given back; the report gives agreement per
//! act; the stored sessions export to MultiWOZ, ConvLab-3 and CrossWOZ with the majority acts
//! and import back with them.

use serde_json::{Value, json};
use wozkit_core::event::{Actor, EndReason, EventKind, ItemPool, Judgment, MessageSource, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};
use wozkit_core::model::ActType;
use wozkit_data::acts::TurnActs;
use wozkit_data::report::{Filter, ReportOptions, build_report};
use wozkit_data::stored::{
    ExportFormat, ExportOptions, NoProgress, export_store_annotated, span_judgments,
};
use wozkit_data::{
    Format, ImportedSession, Input, SpanSegments, import_convlab3, import_crosswoz,
    import_multiwoz21, read_sidecar, sidecar_path,
};
use wozkit_store::{ClaimRequest, LeaseState, NewEvent, NewSession, SessionFilter, Store};

use crate::helpers::{Client, TestApp, hidden, join_worker, judgments, page_kind, spawn_app_in};

const ACTS: &str = r#"id: ta-mini
title: Label turns
flow:
  user:
    - {kind: consent}
    - {kind: rate}
    - {kind: completion}
evaluation:
  task: turn_acts
  judgments_per_item: 2
  items_per_worker: 10
  acts:
    which: user
    acts: [Restaurant-Inform, Restaurant-Request, general-greet]
    slots: [food, area]
    max_pairs: 2
  from_store: {study: wizard-pilot}
"#;

fn study(text: &str) -> LoadedStudy {
    load_text("s.yaml", text, StudySource::Dir(".".into())).unwrap_or_else(|d| panic!("{d}"))
}

/// Writes one ended session of `wizard-pilot` with these messages.
async fn put_session(store: &dyn Store, id: &str, messages: &[(Role, &str, MessageSource)]) {
    store
        .create_session(NewSession {
            id: id.into(),
            study_id: "wizard-pilot".into(),
            study_version: "1".into(),
            seed: 1,
            created_at_ms: 1000,
        })
        .await
        .expect("session created");
    // As a room starts it (a dataset mapping is found by the study it names).
    let started = NewEvent {
        actor: Actor::System,
        kind: EventKind::SessionStarted {
            study: "wizard-pilot".into(),
            study_version: "1".into(),
            seed: 1,
            initial_state: "start".into(),
        },
        at_ms: 1000,
    };
    let events: Vec<NewEvent> = std::iter::once(started)
        .chain(messages.iter().map(|(role, text, source)| NewEvent {
            actor: Actor::Participant {
                role: *role,
                participant: None,
            },
            kind: EventKind::Message {
                role: *role,
                text: (*text).into(),
                source: source.clone(),
            },
            at_ms: 1000,
        }))
        .collect();
    store.append(id, events).await.expect("events appended");
    store
        .end_session(id, EndReason::Finished, 2000)
        .await
        .expect("session ended");
}

/// Two collected sessions: `pilot-1` with guest turns 0 and 2 (a chosen wizard option between
/// them), `pilot-2` with guest turn 0.
async fn seeded_dir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    let store = wozkit_store::open(tmp.path().to_str().expect("utf-8 path"))
        .await
        .expect("store opens");
    let which_area = MessageSource::Fixed {
        id: "ask-area".into(),
        label: "ask_area".into(),
        act_type: ActType::Request,
    };
    put_session(
        store.as_ref(),
        "pilot-1",
        &[
            (
                Role::User,
                "Hi! Cheap italian food, please.",
                MessageSource::Free,
            ),
            (Role::Wizard, "Which area?", which_area),
            (Role::User, "The centre.", MessageSource::Free),
        ],
    )
    .await;
    put_session(
        store.as_ref(),
        "pilot-2",
        &[
            (Role::User, "What area is it in?", MessageSource::Free),
            (Role::Wizard, "The north.", MessageSource::Free),
        ],
    )
    .await;
    store.close().await;
    tmp
}

/// The item shown (`data-item`).
fn item_of(body: &str) -> String {
    crate::helpers::attr_after(body, "data-item=\"")
}

/// What each worker answers for each turn: acts, then (act, slot, value) rows.
fn answer(
    worker: &str,
    item: &str,
) -> (
    Vec<&'static str>,
    Vec<(&'static str, &'static str, &'static str)>,
) {
    match (worker, item) {
        ("w0", "pilot-1#0") => (
            vec!["Restaurant-Inform", "general-greet"],
            vec![("Restaurant-Inform", "food", "italian")],
        ),
        ("w1", "pilot-1#0") => (
            vec!["Restaurant-Inform"],
            vec![("Restaurant-Inform", "food", "italian")],
        ),
        (_, "pilot-1#2") => (
            vec!["Restaurant-Inform"],
            vec![("Restaurant-Inform", "area", "centre")],
        ),
        ("w0", "pilot-2#0") => (
            vec!["Restaurant-Request"],
            vec![("Restaurant-Request", "area", "?")],
        ),
        (_, "pilot-2#0") => (vec!["Restaurant-Request"], vec![]),
        other => panic!("unexpected item {other:?}"),
    }
}

fn form(lease: &str, acts: &[&str], rows: &[(&str, &str, &str)]) -> String {
    let mut parts = vec![format!("lease={lease}")];
    parts.extend(acts.iter().map(|a| format!("act={a}")));
    for (n, (act, slot, value)) in rows.iter().enumerate() {
        let n = n + 1;
        parts.push(format!(
            "pair_act_{n}={act}&pair_slot_{n}={slot}&pair_value_{n}={value}"
        ));
    }
    parts.join("&")
}

/// Labels the worker's current turn as [`answer`] says; returns its item id.
async fn label(c: &Client, worker: &str) -> String {
    let body = c.page().await.body;
    assert_eq!(page_kind(&body), "turn-acts", "{body}");
    let item = item_of(&body);
    let (acts, rows) = answer(worker, &item);
    let res = c
        .post(
            "/p/acts/submit",
            &form(&hidden(&body, "lease"), &acts, &rows),
        )
        .await;
    assert_eq!(res.status, 303, "{}", res.body);
    item
}

async fn all_events(app: &TestApp) -> Vec<wozkit_core::event::Event> {
    let filter = SessionFilter {
        study_id: Some("ta-mini".into()),
        kind: wozkit_store::SessionKind::Participant,
        ..SessionFilter::default()
    };
    let mut out = vec![];
    for s in app.store.list_sessions(&filter).await.expect("sessions") {
        out.extend(app.events(&s.id).await);
    }
    out
}

async fn all_judgments(app: &TestApp) -> Vec<Judgment> {
    judgments(&all_events(app).await)
}

#[tokio::test]
async fn each_guest_turn_is_labelled_by_exactly_two_annotators_and_exports_its_majority_acts() {
    let tmp = seeded_dir().await;
    let dir = tmp.path().to_path_buf();
    let mut app = spawn_app_in(dir.clone(), study(ACTS)).await;

    // The first request waits for the start (the items are registered by then).
    let w0 = join_worker(&app, "ta-mini", "w0").await;
    // The items: the guest turns, named by session and turn.
    let mut items: Vec<String> = app
        .store
        .item_counts("ta-mini", 0)
        .await
        .expect("items")
        .into_iter()
        .filter(|c| c.pool == ItemPool::Item)
        .map(|c| c.item_id)
        .collect();
    items.sort();
    assert_eq!(items, ["pilot-1#0", "pilot-1#2", "pilot-2#0"]);

    // An abandoned lease: claimed an hour ago for 10 minutes, never submitted.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    let ghost = app
        .store
        .claim(ClaimRequest {
            study_id: "ta-mini".into(),
            worker: "ghost".into(),
            pool: ItemPool::Item,
            lease_id: "ghost-lease".into(),
            now_ms: now - 3_600_000,
            lease_ms: 600_000,
            max_per_worker: None,
            prefer: vec!["pilot-1#2".into()],
        })
        .await
        .expect("claim")
        .expect("an item for the ghost");
    assert_eq!(ghost.item_id, "pilot-1#2");

    // The first worker's first turn: shown with no context before it; a bad label is refused
    // with what and where, the choices kept.
    let body = w0.page().await.body;
    assert_eq!(page_kind(&body), "turn-acts");
    let item = item_of(&body);
    let lease = hidden(&body, "lease");
    let bad = form(
        &lease,
        &["Restaurant-Inform", "thank"],
        &[
            ("Restaurant-Inform", "price", "cheap"),
            ("Restaurant-Request", "food", ""),
        ],
    );
    let res = w0.post("/p/acts/submit", &bad).await;
    assert_eq!(res.status, 422, "{}", res.body);
    for expected in [
        "The label was not saved: “thank” is not one of this task&#39;s acts",
        "pair 1: the slot “price” is not one of this task&#39;s slots (food, area)",
        "pair 2: its act “Restaurant-Request” is not one of the ticked acts (Restaurant-Inform)",
        "pair 2: give the value of the slot “food”",
    ] {
        let plain = expected.replace("&#39;", "'");
        assert!(
            res.body.contains(expected) || res.body.contains(&plain),
            "{expected:?} not in:\n{}",
            res.body
        );
    }
    assert!(
        res.body
            .contains("value=\"Restaurant-Inform\" data-testid=\"act-Restaurant-Inform\" checked"),
        "the ticked act stays ticked"
    );
    assert!(
        res.body.contains("value=\"cheap\""),
        "the typed value is kept"
    );
    let res = w0.post("/p/acts/submit", &form(&lease, &[], &[])).await;
    assert_eq!(res.status, 422);
    assert!(
        res.body.contains("tick at least one dialogue act"),
        "{}",
        res.body
    );
    assert!(all_judgments(&app).await.is_empty(), "nothing was saved");

    // The turn and what comes before it.
    let (d, i) = wozkit_core::evaluation::parse_turn_item(&item).expect("turn item");
    let context = body.matches("data-testid=\"acts-context\"").count();
    assert_eq!(context, i, "every turn before {item} is shown, none after");
    let texts = [
        "Hi! Cheap italian food, please.",
        "The centre.",
        "What area is it in?",
    ];
    let shown_turn = body
        .split("data-testid=\"acts-turn\"")
        .nth(1)
        .expect("the highlighted turn");
    let expected_text = match (d, i) {
        ("pilot-1", 0) => texts[0],
        ("pilot-1", 2) => texts[1],
        _ => texts[2],
    };
    assert!(shown_turn.contains(expected_text), "{item}: {shown_turn}");
    if i == 2 {
        assert!(
            body.contains("Which area?"),
            "the wizard's turn before it is shown"
        );
    }
    // The words of the turn are offered as values.
    assert!(body.contains("<datalist id=\"ta-words\">"), "{body}");

    // w0 labels one turn; a restart keeps the next one on their page (the same lease).
    label(&w0, "w0").await;
    let before = w0.page().await.body;
    let held = (item_of(&before), hidden(&before, "lease"));
    app.stop().await;
    let mut app = spawn_app_in(dir.clone(), study(ACTS)).await;
    let w0 = Client {
        addr: app.addr,
        ..w0
    };
    let after = w0.page().await.body;
    assert_eq!(
        (item_of(&after), hidden(&after, "lease")),
        held,
        "the same turn after a restart"
    );
    label(&w0, "w0").await;
    label(&w0, "w0").await;
    assert_ne!(
        page_kind(&w0.page().await.body),
        "turn-acts",
        "no turn twice"
    );

    // A worker who gives a turn back, then another who labels everything left.
    // The skip button is part of the label's form, and the skip keeps what was ticked.
    let quitter = join_worker(&app, "ta-mini", "w-skip").await;
    let body = quitter.page().await.body;
    let form = body
        .split("data-testid=\"acts-form\"")
        .nth(1)
        .and_then(|f| f.split("</form>").next())
        .unwrap_or_default();
    assert!(
        form.contains("formaction=\"/p/skip\"") && form.contains("data-testid=\"judge-skip\""),
        "the skip button is outside the label's form: {body}"
    );
    let res = quitter
        .post(
            "/p/skip",
            &format!(
                "lease={}&act=general-greet&pair_act_1=&pair_slot_1=&pair_value_1=",
                hidden(&body, "lease")
            ),
        )
        .await;
    assert_eq!(res.status, 303);
    let given: Vec<Vec<(String, String)>> = all_events(&app)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ItemReturned { given, .. } => Some(given),
            _ => None,
        })
        .collect();
    assert_eq!(
        given,
        [vec![("act".to_string(), "general-greet".to_string())]],
        "the skip keeps the ticked act and leaves the empty rows out"
    );
    let w1 = join_worker(&app, "ta-mini", "w1").await;
    let mut labelled = vec![];
    while page_kind(&w1.page().await.body) == "turn-acts" {
        labelled.push(label(&w1, "w1").await);
    }
    labelled.sort();
    assert_eq!(
        labelled, items,
        "w1 labels each turn once, the abandoned one too"
    );
    let late = join_worker(&app, "ta-mini", "w9").await;
    assert_eq!(page_kind(&late.page().await.body), "no-items");

    // Exactly two counted labels per turn; the ghost's lease is still open and counted nowhere.
    let all = all_judgments(&app).await;
    for item in &items {
        let counted = all.iter().filter(|j| &j.item == item && j.counted).count();
        assert_eq!(counted, 2, "{item}");
    }
    assert_eq!(all.len(), 6);
    let leases = app.store.leases("ta-mini").await.expect("leases");
    let ghost_now = leases
        .iter()
        .find(|l| l.id == "ghost-lease")
        .expect("ghost");
    assert_eq!(ghost_now.state, LeaseState::Leased);
    let j = all
        .iter()
        .find(|j| {
            j.item == "pilot-1#0" && j.answers["acts"].as_array().is_some_and(|a| a.len() == 2)
        })
        .expect("w0's label of pilot-1#0");
    assert_eq!(
        j.answers["acts"],
        json!(["Restaurant-Inform", "general-greet"])
    );
    assert_eq!(
        j.answers["pairs"],
        json!([{"act": "Restaurant-Inform", "slot": "food", "value": "italian"}])
    );

    app.stop().await;

    // The report: agreement per act over the three turns, two annotators each.
    let store = wozkit_store::open(dir.to_str().expect("utf-8"))
        .await
        .expect("store");
    let options = ReportOptions {
        filters: vec![Filter {
            key: "study".into(),
            value: "ta-mini".into(),
        }],
        ..ReportOptions::default()
    };
    let report = build_report(store.as_ref(), &options)
        .await
        .expect("report");
    let acts_agreement = report
        .judgments
        .as_ref()
        .and_then(|j| j.act_agreement.as_ref())
        .expect("agreement on acts");
    assert_eq!(acts_agreement.sets.units, 3, "three turns");
    assert_eq!(
        (
            acts_agreement.sets.raters_min,
            acts_agreement.sets.raters_max
        ),
        (2, 2)
    );
    let greet = &acts_agreement.labels["general-greet"];
    assert_eq!(
        (greet.given, greet.units),
        (1, 1),
        "one annotator of one turn"
    );
    let inform = &acts_agreement.labels["Restaurant-Inform"];
    assert_eq!((inform.given, inform.units), (4, 2));
    // Inform and Request split the turns the same way for both annotators: perfect agreement.
    assert_eq!(inform.krippendorff_alpha, Some(1.0));
    assert_eq!(
        acts_agreement.labels["Restaurant-Request"].fleiss_kappa,
        Some(1.0)
    );
    let html = wozkit_data::report::html::render_html(&report);
    assert!(
        html.contains("dialogue acts of turns"),
        "the HTML report has the section"
    );

    // The export of the source study with the majority acts, and its re-import.
    let judged = span_judgments(store.as_ref(), &["ta-mini".to_string()])
        .await
        .expect("judgments");
    let acts = TurnActs::from_judgments(&judged);
    let tied = &acts.sessions["pilot-1"][&0].tied;
    assert_eq!(tied, &["general-greet"], "greet: one of two annotators");
    let out = tempfile::tempdir().expect("out dir");
    // Exports the source study with the majority acts in `format` to `name`: the file's path
    // and its JSON.
    let export = async |format: Format, name: &str| -> (std::path::PathBuf, Value) {
        let path = out.path().join(name);
        let options = ExportOptions {
            format: ExportFormat::Dataset(format),
            out: path.clone(),
            split: None,
            study: Some("wizard-pilot".into()),
            include_test: false,
        };
        export_store_annotated(
            store.as_ref(),
            &options,
            &SpanSegments::default(),
            &acts,
            &NoProgress,
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: the export failed: {e}"));
        let file = serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
        (path, file)
    };

    let (path, file) = export(Format::MultiWoz21, "multiwoz.json").await;
    let log = file["pilot-1"]["log"].as_array().expect("log");
    assert_eq!(log[0]["text"], "Hi! Cheap italian food, please.");
    assert_eq!(
        log[0]["dialog_act"],
        json!({"Restaurant-Inform": [["food", "italian"]]})
    );
    assert_eq!(
        log[0]["metadata"],
        json!({}),
        "the turn's other fields stay"
    );
    // The wizard's state label `ask_area` is no MultiWOZ act: the turn has none, and the
    // sidecar keeps the message with its label.
    assert_eq!(log[1]["text"], "Which area?");
    assert_eq!(log[1]["dialog_act"], json!({}), "no act from a state label");
    let sidecar = read_sidecar(&Input::read(sidecar_path(&path)).expect("the sidecar"))
        .expect("sidecar lines");
    let kept = sidecar
        .iter()
        .filter(|l| l.format == Format::MultiWoz21.name() && l.session == "pilot-1")
        .flat_map(|l| &l.events)
        .any(|e| match &e.kind {
            EventKind::Message { text, source, .. } => {
                text == "Which area?" && source.act().is_some_and(|(label, _)| label == "ask_area")
            }
            _ => false,
        });
    assert!(kept, "the sidecar keeps the labelled message: {sidecar:?}");
    assert_eq!(
        log[2]["dialog_act"],
        json!({"Restaurant-Inform": [["area", "centre"]]})
    );
    let log2 = file["pilot-2"]["log"].as_array().expect("log");
    assert_eq!(
        log2[0]["dialog_act"],
        json!({"Restaurant-Request": [["none", "none"]]}),
        "the pair only one annotator gave is left out"
    );
    let back = import_multiwoz21(&Input::read(&path).expect("input")).expect("re-import");
    assert_eq!(
        turn_note(&back, "pilot-1", 0, "multiwoz21.turn")["dialog_act"],
        log[0]["dialog_act"]
    );

    let (path, file) = export(Format::ConvLab3, "convlab3.json").await;
    let dialogue = file
        .as_array()
        .expect("list")
        .iter()
        .find(|d| d["original_id"] == "pilot-1")
        .expect("pilot-1");
    let turn = &dialogue["turns"][0];
    assert_eq!(turn["utterance"], "Hi! Cheap italian food, please.");
    assert_eq!(
        turn["dialogue_acts"],
        json!({"categorical": [], "non-categorical": [
            {"intent": "Inform", "domain": "Restaurant", "slot": "food", "value": "italian",
             "start": 10, "end": 17}
        ], "binary": []}),
        "the value's span in the utterance, as the format's checker asks"
    );
    assert_eq!(turn["utt_idx"], 0);
    let back = import_convlab3(&Input::read(&path).expect("input")).expect("re-import");
    let id = back
        .iter()
        .find(|s| {
            s.messages()
                .next()
                .is_some_and(|(_, t)| t.starts_with("Hi!"))
        })
        .expect("pilot-1 back")
        .id
        .clone();
    assert_eq!(
        turn_note(&back, &id, 0, "convlab3.turn")["dialogue_acts"],
        turn["dialogue_acts"]
    );

    let (path, file) = export(Format::CrossWoz, "crosswoz.json").await;
    let messages = file["pilot-2"]["messages"].as_array().expect("messages");
    assert_eq!(
        messages[0]["dialog_act"],
        json!([["Request", "Restaurant", "none", "none"]])
    );
    let first = &file["pilot-1"]["messages"][0];
    assert_eq!(
        first["dialog_act"],
        json!([["Inform", "Restaurant", "food", "italian"]])
    );
    let back = import_crosswoz(&Input::read(&path).expect("input")).expect("re-import");
    assert_eq!(
        turn_note(&back, "pilot-1", 0, "crosswoz.turn")["dialog_act"],
        first["dialog_act"]
    );
    store.close().await;

    // The console's downloads of the source study with `?acts=ta-mini` are the files the
    // export above wrote (the same function); without it they carry no adjudicated acts.
    let mut app = spawn_app_in(dir.clone(), study(SOURCE)).await;
    let path = "/researcher/study/wizard-pilot/download/multiwoz?acts=ta-mini";
    let res = app.http("GET", path, &[], "").await;
    assert_eq!(res.status, 303, "a visitor is sent to the login page");
    let cookie = crate::helpers::login(&app).await;
    for (what, format, file) in [
        ("multiwoz", Format::MultiWoz21, "multiwoz.json"),
        ("convlab3", Format::ConvLab3, "convlab3.json"),
        ("crosswoz", Format::CrossWoz, "crosswoz.json"),
    ] {
        let (status, files) = download(
            app.addr,
            &format!("/researcher/study/wizard-pilot/download/{what}?acts=ta-mini"),
            &cookie,
        )
        .await;
        assert_eq!(status, 200, "{what}: {files:?}");
        // The export's file (and its sidecar, if any) under the download's name.
        let named = format!("wizard-pilot.{}.json", format.name());
        assert!(
            files.iter().any(|(n, _)| *n == named),
            "{what}: {named} downloaded"
        );
        for (name, bytes) in &files {
            let suffix = name
                .strip_prefix(&named)
                .unwrap_or_else(|| panic!("{what}: unexpected file {name}"));
            let written = std::fs::read(out.path().join(format!("{file}{suffix}")))
                .unwrap_or_else(|e| panic!("{what}: {file}{suffix}: {e}"));
            assert!(
                *bytes == written,
                "{what}: {name} is the export's file:\n{}\n---\n{}",
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(&written)
            );
        }
    }
    let (status, files) = download(
        app.addr,
        "/researcher/study/wizard-pilot/download/multiwoz",
        &cookie,
    )
    .await;
    assert_eq!(status, 200, "{files:?}");
    let plain: Value = files
        .iter()
        .find(|(n, _)| n == "wizard-pilot.multiwoz21.json")
        .and_then(|(_, b)| serde_json::from_slice(b).ok())
        .expect("the MultiWOZ file");
    // Without adjudicated acts no turn has any: the guest turns are the labelled ones, and the
    // wizard's state label is no act.
    for turn in plain["pilot-1"]["log"].as_array().expect("log") {
        assert_eq!(
            turn["dialog_act"],
            json!({}),
            "no acts without ?acts: {turn}"
        );
    }
    // A served study's own `datasets:` mapping writes the acts of its wizard's options (the
    // study is not built in, so only the server can know it).
    app.stop().await;
    let mut app = spawn_app_in(dir.clone(), study(MAPPED_SOURCE)).await;
    let cookie = crate::helpers::login(&app).await;
    let (status, files) = download(
        app.addr,
        "/researcher/study/wizard-pilot/download/multiwoz",
        &cookie,
    )
    .await;
    assert_eq!(status, 200, "{files:?}");
    let mapped: Value = files
        .iter()
        .find(|(n, _)| n == "wizard-pilot.multiwoz21.json")
        .and_then(|(_, b)| serde_json::from_slice(b).ok())
        .expect("the MultiWOZ file");
    let log = mapped["pilot-1"]["log"].as_array().expect("log");
    assert_eq!(
        log[1]["dialog_act"],
        json!({"Restaurant-Request": [["Area", "?"]]}),
        "the wizard's mapped option: {}",
        log[1]
    );
    assert_eq!(log[0]["dialog_act"], json!({}), "{}", log[0]);
    let get = async |path: &str| app.http("GET", path, &[("Cookie", &cookie)], "").await;
    // A served study that is not an act-annotation study, a study neither served nor holding
    // act labels, and a format without dialogue acts: 400, saying which.
    for (path, expected) in [
        (
            "/researcher/study/wizard-pilot/download/crosswoz?acts=wizard-pilot",
            "study `wizard-pilot` is not an act-annotation study",
        ),
        (
            "/researcher/study/wizard-pilot/download/convlab3?acts=ta-mini&acts=nope",
            "study `nope` is not served and the store holds no act labels of it",
        ),
        (
            "/researcher/study/wizard-pilot/download/taskmaster1?acts=ta-mini",
            "is for the formats with dialogue acts (multiwoz, convlab3, crosswoz), not taskmaster1",
        ),
    ] {
        let res = get(path).await;
        assert_eq!(res.status, 400, "{path}: {}", res.body);
        assert!(res.body.contains(expected), "{path}: {}", res.body);
    }
    app.stop().await;
}

/// A console download's files: the file, or the files of the zip archive; with the status
/// (no files unless 200).
async fn download(
    addr: std::net::SocketAddr,
    path: &str,
    cookie: &str,
) -> (u16, Vec<(String, Vec<u8>)>) {
    let (status, head, body) = crate::helpers::get_raw(addr, path, cookie).await;
    let head = head.to_ascii_lowercase();
    if status != 200 {
        return (status, vec![]);
    }
    if head.contains("content-type: application/zip") {
        (
            status,
            wozkit_data::download::unzip_files(&body).expect("a zip archive"),
        )
    } else {
        let name = head
            .split("filename=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("a file name")
            .to_string();
        (status, vec![(name, body)])
    }
}

/// The source study of the stored sessions, served for its downloads.
const SOURCE: &str = r#"id: wizard-pilot
title: Wizard pilot
roles:
  user: {label: Guest}
  wizard: {label: Clerk}
states:
  - {id: start, type: interaction, initial: true, transitions: [bye]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
"#;

/// [`SOURCE`] with its wizard's option mapped onto MultiWOZ.
const MAPPED_SOURCE: &str = r#"id: wizard-pilot
title: Wizard pilot
roles:
  user: {label: Guest}
  wizard: {label: Clerk}
states:
  - {id: start, type: interaction, initial: true, transitions: [bye]}
  - {id: bye, type: interaction, templates: ["Goodbye."], terminal: true}
fixed_options:
  - {id: ask-area, text: Which area?}
datasets:
  multiwoz:
    acts:
      ask-area: {act: Restaurant-Request, slot: Area}
"#;

/// The turn annotation `key` after message `n` of session `id`.
fn turn_note(sessions: &[ImportedSession], id: &str, n: usize, key: &str) -> Value {
    let s = sessions
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("{id} re-imported"));
    let mut seen: Option<usize> = None;
    for e in &s.events {
        match &e.kind {
            EventKind::Message { .. } => seen = Some(seen.map_or(0, |m| m + 1)),
            EventKind::Annotation { key: k, value } if k == key && seen == Some(n) => {
                return value.clone();
            }
            _ => {}
        }
    }
    panic!("no {key} after message {n} of {id}")
}
