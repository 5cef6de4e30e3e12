//! The wizard's database over the sockets: the wizard searches and selects, the events are
//! logged, the selected row fills the wizard's option, and the user never receives a search,
//! its results or the selection (not live, not on reconnecting) and may not search.

use serde_json::{Value, json};
use wozkit_core::engine::replay;
use wozkit_core::event::EventKind;
use wozkit_core::load::load_path;

use crate::helpers::{enter, paired, spawn_app_in};

const STUDY: &str = r#"
id: dbroom
title: Dinner
roles:
  user: {label: Guest}
  wizard: {label: Assistant}
database:
  tables:
    restaurant: {file: restaurants.csv, key: id}
states:
  - {id: start, type: interaction, initial: true, transitions: [offer]}
  - id: offer
    type: update
    templates: ["How about {db.restaurant.name} in the {db.restaurant.area}?"]
    transitions: [bye]
  - {id: bye, type: interaction, terminal: true, templates: ["Bye."]}
"#;

const RESTAURANTS: &str = "\
id,name,cuisine,area,price
r1,Trattoria Lanterna,italian,old town,25
r2,Osteria del Ponte,italian,river district,40
r3,The Green Fig,vegetarian,old town,18
";

fn is_db_frame(v: &Value) -> bool {
    let kind = v["event"]["kind"].as_str().unwrap_or_default();
    kind.starts_with("db_")
}

#[tokio::test]
async fn the_wizard_searches_and_selects_and_the_user_sees_only_what_is_said() {
    let study_dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(study_dir.path().join("study.yaml"), STUDY).unwrap();
    std::fs::write(study_dir.path().join("restaurants.csv"), RESTAURANTS).unwrap();
    let study = load_path(study_dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let data = tempfile::tempdir().expect("temp dir");
    let mut app = spawn_app_in(data.path().to_path_buf(), study.clone()).await;
    let (user, wizard, session) = paired(&app).await;
    let mut ww = enter(&wizard, 0).await;
    let mut wu = enter(&user, 0).await;

    // The wizard's welcome lists the tables and their columns; the user's does not.
    let welcome = ww.seen.iter().find(|v| v["type"] == "welcome").unwrap();
    let table = &welcome["study"]["database"][0];
    assert_eq!(table["name"], "restaurant");
    // Without `label` and `labels` the panel's words are the table's and the columns' names.
    assert_eq!(table["label"], "restaurant");
    assert_eq!(table["key"], "id");
    assert_eq!(
        table["columns"][4],
        json!({"name": "price", "label": "price", "type": "integer"})
    );
    let uwelcome = wu.seen.iter().find(|v| v["type"] == "welcome").unwrap();
    assert_eq!(uwelcome["study"]["database"], Value::Null);

    // The user may not search or select.
    wu.cmd(
        "u1",
        json!({"cmd": "query", "table": "restaurant", "filters": []}),
    )
    .await;
    let e = wu.answer("u1").await;
    assert_eq!(
        (e["type"].as_str(), e["code"].as_str()),
        (Some("error"), Some("wrong_role"))
    );
    wu.cmd(
        "u2",
        json!({"cmd": "select", "table": "restaurant", "key": "r1"}),
    )
    .await;
    assert_eq!(wu.answer("u2").await["code"], "wrong_role");

    // A hostile value finds nothing; an unknown column is refused.
    ww.cmd(
        "w0",
        json!({"cmd": "query", "table": "restaurant",
        "filters": [{"column": "name", "op": "equals", "value": "' OR 1=1 --"}]}),
    )
    .await;
    assert_eq!(ww.answer("w0").await["type"], "ack");
    let ev = ww.event("db_queried").await;
    assert_eq!(ev["result_keys"], json!([]));
    ww.cmd(
        "w1",
        json!({"cmd": "query", "table": "restaurant",
        "filters": [{"column": "name\" OR 1=1 --", "op": "equals", "value": "x"}]}),
    )
    .await;
    let e = ww.answer("w1").await;
    assert_eq!(e["code"], "refused", "{e}");
    assert_eq!(e["detail"]["refusal"], "database");

    // The wizard's search: the rows come with the event.
    ww.cmd(
        "w2",
        json!({"cmd": "query", "table": "restaurant",
        "filters": [{"column": "cuisine", "op": "equals", "value": "italian"}]}),
    )
    .await;
    assert_eq!(ww.answer("w2").await["type"], "ack");
    let ev = ww.event("db_queried").await;
    assert_eq!(ev["result_keys"], json!(["r1", "r2"]));
    assert_eq!(ev["rows"][1]["name"], "Osteria del Ponte");

    ww.cmd(
        "w3",
        json!({"cmd": "select", "table": "restaurant", "key": "r1"}),
    )
    .await;
    assert_eq!(ww.answer("w3").await["type"], "ack");
    let ev = ww.event("db_selected").await;
    assert_eq!(ev["row"]["name"], "Trattoria Lanterna");
    // The next view offers the option with the selected row's values in its slots.
    let offered = |v: &Value| -> Option<String> {
        v["view"]["options"]
            .as_array()?
            .iter()
            .find(|o| o["state"] == "offer")
            .and_then(|o| o["text"].as_str().map(str::to_string))
    };
    let view = ww
        .until(|v| v["type"] == "view" && offered(v).is_some_and(|t| t.contains("Trattoria")))
        .await;
    assert_eq!(
        offered(&view).unwrap(),
        "How about Trattoria Lanterna in the old town?"
    );

    ww.cmd("w4", json!({"cmd": "say", "state": "offer"})).await;
    assert_eq!(ww.answer("w4").await["type"], "ack");
    let said = wu.event("message").await;
    assert_eq!(
        said["text"],
        "How about Trattoria Lanterna in the old town?"
    );

    // Nothing of the search reached the user, live or on reconnecting from the start.
    let mut again = enter(&user, 0).await;
    again.event("message").await;
    for frames in [&wu.seen, &again.seen] {
        assert!(!frames.iter().any(is_db_frame), "{frames:#?}");
        let text = serde_json::to_string(frames).unwrap();
        assert!(
            !text.contains("Osteria"),
            "a result reached the user: {text}"
        );
        assert!(!text.contains("' OR 1=1"), "a search reached the user");
    }

    // The log holds both kinds, and replays to the selected row.
    let events = app.events(&session).await;
    let queried = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::DbQueried { .. }))
        .count();
    assert_eq!(queried, 2);
    let s = replay(&study, &session, &events);
    assert_eq!(
        s.db_selected["restaurant"]["name"],
        json!("Trattoria Lanterna")
    );
    app.stop().await;
}
