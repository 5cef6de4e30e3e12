//! The wizard's database: tables loaded from CSV, JSON or SQLite files, queried only through
//! whitelisted columns and bound values, with load problems named by file, row and column.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::json;
use wozkit_core::database::{Database, Filter, FilterOp, MAX_RESULTS, QueryError};
use wozkit_core::load::{StudySource, load_path};
use wozkit_core::model::{DatabaseSpec, TableSpec};

const RESTAURANTS: &str = "\
id,name,cuisine,area,price,rating
r1,Trattoria Lanterna,italian,old town,25,4.5
r2,Osteria del Ponte,italian,river district,40,4.1
r3,The Green Fig,vegetarian,old town,18,3.9
r4,Saffron House,indian,station quarter,22,4.7
r5,Harbour Grill,seafood,harbour,55,4.3
";

/// A fresh folder holding `files`.
fn folder(files: &[(&str, &str)]) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "wozkit-db-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

fn spec(tables: &[(&str, Option<&str>, &str)], sqlite: Option<&str>) -> DatabaseSpec {
    DatabaseSpec {
        tables: tables
            .iter()
            .map(|(n, f, k)| {
                (
                    n.to_string(),
                    TableSpec {
                        file: f.map(str::to_string),
                        key: k.to_string(),
                        show: vec![],
                        label: None,
                        labels: Default::default(),
                    },
                )
            })
            .collect(),
        sqlite: sqlite.map(str::to_string),
    }
}

fn restaurants() -> Database {
    let dir = folder(&[("restaurants.csv", RESTAURANTS)]);
    Database::load(
        &spec(&[("restaurant", Some("restaurants.csv"), "id")], None),
        &StudySource::Dir(dir),
    )
    .expect("the table loads")
}

fn f(column: &str, op: FilterOp) -> Filter {
    Filter {
        column: column.into(),
        op,
    }
}

fn eq(column: &str, value: serde_json::Value) -> Filter {
    f(column, FilterOp::Equals { value })
}

#[test]
fn csv_table_is_searched_by_equals_contains_and_range() {
    let db = restaurants();
    let info = &db.tables()["restaurant"];
    assert_eq!(info.rows, 5);
    assert!(info.column("price").unwrap().is_numeric());
    assert!(!info.column("name").unwrap().is_numeric());

    let r = db
        .query("restaurant", &[eq("cuisine", json!("Italian"))], 20)
        .unwrap();
    assert_eq!(r.keys, ["r1", "r2"], "equals ignores case");
    assert_eq!(r.rows[0]["name"], json!("Trattoria Lanterna"));
    assert_eq!(r.rows[0]["price"], json!(25));

    let r = db
        .query(
            "restaurant",
            &[f(
                "name",
                FilterOp::Contains {
                    value: "HOUSE".into(),
                },
            )],
            20,
        )
        .unwrap();
    assert_eq!(r.keys, ["r4"]);

    let r = db
        .query(
            "restaurant",
            &[
                eq("area", json!("old town")),
                f(
                    "price",
                    FilterOp::Range {
                        min: Some(20.0),
                        max: Some(30.0),
                    },
                ),
            ],
            20,
        )
        .unwrap();
    assert_eq!(r.keys, ["r1"], "filters combine with AND");

    let r = db
        .query(
            "restaurant",
            &[f(
                "rating",
                FilterOp::Range {
                    min: Some(4.3),
                    max: None,
                },
            )],
            20,
        )
        .unwrap();
    assert_eq!(r.keys, ["r1", "r4", "r5"]);

    let all = db.query("restaurant", &[], 2).unwrap();
    assert_eq!(all.keys, ["r1", "r2"], "the limit holds");
    let all = db.query("restaurant", &[], 1000).unwrap();
    assert_eq!(all.keys.len(), 5.min(MAX_RESULTS));

    let row = db.select("restaurant", "r3").unwrap();
    assert_eq!(row["name"], json!("The Green Fig"));
    assert_eq!(
        row.keys().collect::<Vec<_>>(),
        ["id", "name", "cuisine", "area", "price", "rating"]
    );
    assert!(matches!(
        db.select("restaurant", "r9"),
        Err(QueryError::UnknownRow { .. })
    ));
}

#[test]
fn hostile_values_match_nothing_and_hostile_columns_are_refused() {
    let db = restaurants();
    let hostile = "' OR 1=1 --";
    for filter in [
        eq("name", json!(hostile)),
        eq("price", json!(hostile)),
        f(
            "name",
            FilterOp::Contains {
                value: hostile.into(),
            },
        ),
    ] {
        let r = db
            .query("restaurant", std::slice::from_ref(&filter), 20)
            .unwrap();
        assert!(r.keys.is_empty(), "{filter:?} found {:?}", r.keys);
    }
    assert!(matches!(
        db.select("restaurant", hostile),
        Err(QueryError::UnknownRow { .. })
    ));
    assert!(matches!(
        db.select("restaurant", "r1' OR '1'='1"),
        Err(QueryError::UnknownRow { .. })
    ));
    // A column or table name is never taken from the request: only the table's own columns.
    let bad_col = "name\" = name OR 1=1 --";
    assert_eq!(
        db.query("restaurant", &[eq(bad_col, json!("x"))], 20),
        Err(QueryError::UnknownColumn {
            table: "restaurant".into(),
            column: bad_col.into()
        })
    );
    assert!(matches!(
        db.query("restaurant\"; DROP TABLE restaurant; --", &[], 20),
        Err(QueryError::UnknownTable { .. })
    ));
    assert_eq!(
        db.query(
            "restaurant",
            &[f(
                "name",
                FilterOp::Range {
                    min: Some(1.0),
                    max: None
                }
            )],
            20
        ),
        Err(QueryError::RangeOnText {
            column: "name".into()
        })
    );
    // The table is whole afterwards.
    assert_eq!(db.query("restaurant", &[], 20).unwrap().keys.len(), 5);
}

#[test]
fn json_tables_load_and_their_problems_name_row_and_column() {
    let dir = folder(&[
        (
            "hotels.json",
            r#"[{"code": "h1", "name": "Quay Inn", "stars": 3},
                {"code": "h2", "name": "Old Mill", "stars": 4, "parking": true}]"#,
        ),
        (
            "nested.json",
            r#"[{"code": "h1"}, {"code": "h2", "rooms": {"single": 2}}]"#,
        ),
    ]);
    let db = Database::load(
        &spec(&[("hotel", Some("hotels.json"), "code")], None),
        &StudySource::Dir(dir.clone()),
    )
    .unwrap();
    let r = db
        .query(
            "hotel",
            &[f(
                "stars",
                FilterOp::Range {
                    min: Some(4.0),
                    max: None,
                },
            )],
            20,
        )
        .unwrap();
    assert_eq!(r.keys, ["h2"]);
    assert_eq!(
        db.select("hotel", "h1").unwrap()["parking"],
        json!(null),
        "a key missing from a row is null"
    );

    let e = Database::load(
        &spec(&[("hotel", Some("nested.json"), "code")], None),
        &StudySource::Dir(dir),
    )
    .unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.row, e.column.as_deref()),
        ("nested.json", Some(2), Some("rooms"))
    );
    let shown = e.to_string();
    assert!(
        shown.contains("nested.json") && shown.contains("row 2") && shown.contains("`rooms`"),
        "{shown}"
    );
}

#[test]
fn csv_problems_name_the_file_row_and_column() {
    let cases: &[(&str, &str, Option<usize>, Option<&str>)] = &[
        // A record with a missing field.
        ("id,name\na,A\nb\n", "id", Some(2), None),
        // A key used twice.
        ("id,name\na,A\nb,B\na,C\n", "id", Some(3), Some("id")),
        // An empty key.
        ("id,name\na,A\n,B\n", "id", Some(2), Some("id")),
        // A column name that is not a plain name.
        ("id,full name\na,A\n", "id", Some(0), Some("full name")),
        // A key column the table lacks.
        ("id,name\na,A\n", "code", None, Some("code")),
    ];
    for (text, key, row, column) in cases {
        let dir = folder(&[("t.csv", text)]);
        let e = Database::load(
            &spec(&[("t", Some("t.csv"), key)], None),
            &StudySource::Dir(dir),
        )
        .unwrap_err();
        assert_eq!(e.file, "t.csv", "{text:?}");
        assert_eq!(e.row, *row, "{text:?}: {e}");
        assert_eq!(e.column.as_deref(), *column, "{text:?}: {e}");
    }
    let dir = folder(&[]);
    let e = Database::load(
        &spec(&[("t", Some("missing.csv"), "id")], None),
        &StudySource::Dir(dir),
    )
    .unwrap_err();
    assert!(e.to_string().contains("missing.csv"), "{e}");
}

#[test]
fn sqlite_file_tables_are_copied_in() {
    let dir = folder(&[]);
    {
        let c = rusqlite::Connection::open(dir.join("city.sqlite")).unwrap();
        c.execute_batch(
            "CREATE TABLE attraction (id TEXT, name TEXT, fee INTEGER);
             INSERT INTO attraction VALUES ('a1', 'Castle', 12), ('a2', 'Park', 0);
             CREATE TABLE secret (x TEXT);",
        )
        .unwrap();
    }
    let db = Database::load(
        &spec(&[("attraction", None, "id")], Some("city.sqlite")),
        &StudySource::Dir(dir.clone()),
    )
    .unwrap();
    let r = db
        .query(
            "attraction",
            &[f(
                "fee",
                FilterOp::Range {
                    min: None,
                    max: Some(5.0),
                },
            )],
            20,
        )
        .unwrap();
    assert_eq!(r.keys, ["a2"]);
    assert!(
        matches!(
            db.query("secret", &[], 20),
            Err(QueryError::UnknownTable { .. })
        ),
        "only the declared tables are searchable"
    );
    let e = Database::load(
        &spec(&[("attraction", None, "id")], Some("../city.sqlite")),
        &StudySource::Dir(dir),
    )
    .unwrap_err();
    assert!(e.to_string().contains("inside the study folder"), "{e}");
}

const STUDY: &str = r#"
id: dbmini
title: Db mini
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
    templates: ["{db.restaurant.name} in the {db.restaurant.area}."]
    transitions: [bye]
  - {id: bye, type: interaction, terminal: true, templates: ["Bye."]}
"#;

#[test]
fn a_study_loads_its_tables_and_checks_its_db_slots() {
    let dir = folder(&[("study.yaml", STUDY), ("restaurants.csv", RESTAURANTS)]);
    let study = load_path(&dir).expect("the study loads");
    let db = study.database.as_ref().expect("the database is loaded");
    assert_eq!(db.tables()["restaurant"].rows, 5);

    // A slot naming a column the table lacks, and one naming an undeclared table.
    let text = STUDY.replace("{db.restaurant.area}", "{db.restaurant.street}");
    let dir = folder(&[("study.yaml", &text), ("restaurants.csv", RESTAURANTS)]);
    let e = load_path(&dir).unwrap_err().to_string();
    assert!(
        e.contains("`{db.restaurant.street}`") && e.contains("no column `street`"),
        "{e}"
    );
    let text = STUDY.replace("{db.restaurant.area}", "{db.hotel.area}");
    let dir = folder(&[("study.yaml", &text), ("restaurants.csv", RESTAURANTS)]);
    let e = load_path(&dir).unwrap_err().to_string();
    assert!(e.contains("`{db.hotel.area}` has no source"), "{e}");

    // A data problem is reported at the table's `file` key with the file, row and column.
    let broken = RESTAURANTS.replace("r3,", "r1,");
    let dir = folder(&[("study.yaml", STUDY), ("restaurants.csv", &broken)]);
    let d = load_path(&dir).unwrap_err();
    let line = STUDY
        .lines()
        .position(|l| l.contains("restaurants.csv"))
        .unwrap()
        + 1;
    assert_eq!(d.0.len(), 1, "{d}");
    assert_eq!(d.0[0].line, line, "{d}");
    let m = &d.0[0].message;
    assert!(
        m.contains("restaurants.csv") && m.contains("row 3") && m.contains("`id`"),
        "{m}"
    );
}

mod engine_commands {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use wozkit_core::engine::{self, Command, Refusal, Session, replay, step};
    use wozkit_core::event::{Actor, Event, EventKind, Role};
    use wozkit_core::load::LoadedStudy;

    fn actor(role: Role) -> Actor {
        Actor::Participant {
            role,
            participant: None,
        }
    }

    /// Plays `cmds` from the start; returns the study, the session and its log.
    fn play(cmds: Vec<(Role, Command)>) -> (LoadedStudy, Session, Vec<Event>) {
        let dir = folder(&[("study.yaml", STUDY), ("restaurants.csv", RESTAURANTS)]);
        let study = load_path(&dir).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut s = Session::new(&study, "d");
        let mut log = vec![];
        let mut run = |s: &mut Session, actor: Actor, cmd: Command, log: &mut Vec<Event>| {
            let now = 1_000 + log.len() as u64;
            let st = step(&study, s, &actor, cmd, now, &mut rng).expect("accepted");
            for (a, k) in st.events {
                log.push(Event {
                    v: 1,
                    session: "d".into(),
                    seq: log.len() as u64 + 1,
                    at_ms: now,
                    actor: a,
                    kind: k,
                });
            }
            *s = st.session;
        };
        run(&mut s, Actor::System, Command::Start { seed: 7 }, &mut log);
        for (role, cmd) in cmds {
            run(&mut s, actor(role), cmd, &mut log);
        }
        (study, s, log)
    }

    #[test]
    fn query_and_select_are_logged_fill_slots_and_replay() {
        let filters: Vec<Filter> = serde_json::from_value(json!([
            {"column": "cuisine", "op": "equals", "value": "italian"},
            {"column": "price", "op": "range", "max": 30}
        ]))
        .expect("filters parse from the wire form");
        let (study, s, log) = play(vec![
            (
                Role::Wizard,
                Command::Query {
                    table: "restaurant".into(),
                    filters: filters.clone(),
                },
            ),
            (
                Role::Wizard,
                Command::Select {
                    table: "restaurant".into(),
                    key: "r1".into(),
                },
            ),
        ]);
        let queried = log
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::DbQueried {
                    table,
                    filters: f,
                    result_keys,
                    rows,
                } => Some((table, f, result_keys, rows)),
                _ => None,
            })
            .expect("a db_queried event");
        assert_eq!(queried.0, "restaurant");
        assert_eq!(queried.1, &filters);
        assert_eq!(queried.2, &["r1"]);
        assert_eq!(queried.3[0]["name"], json!("Trattoria Lanterna"));
        let selected = log
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::DbSelected { key, row, .. } => Some((key, row)),
                _ => None,
            })
            .expect("a db_selected event");
        assert_eq!(selected.0, "r1");
        assert_eq!(selected.1["area"], json!("old town"));

        // The offered option reads the selected row.
        let offers = engine::offered(&study, &s);
        let offer = offers.iter().find(|o| o.state == "offer").unwrap();
        assert_eq!(offer.text, "Trattoria Lanterna in the old town.");

        // Replay folds the same state from the log, and the events survive JSON.
        let text = serde_json::to_string(&log).unwrap();
        let back: Vec<Event> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, log);
        assert_eq!(replay(&study, "d", &back), s);
    }

    #[test]
    fn only_the_wizard_may_search_and_bad_requests_are_refused() {
        let (study, s, _) = play(vec![]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let query = Command::Query {
            table: "restaurant".into(),
            filters: vec![],
        };
        assert_eq!(
            step(
                &study,
                &s,
                &actor(Role::User),
                query.clone(),
                2_000,
                &mut rng
            )
            .unwrap_err(),
            Refusal::WrongRole {
                expected: Role::Wizard
            }
        );
        let select = Command::Select {
            table: "restaurant".into(),
            key: "r1".into(),
        };
        assert!(matches!(
            step(&study, &s, &actor(Role::User), select, 2_000, &mut rng),
            Err(Refusal::WrongRole { .. })
        ));
        let bad = Command::Select {
            table: "restaurant".into(),
            key: "' OR 1=1 --".into(),
        };
        assert!(matches!(
            step(&study, &s, &actor(Role::Wizard), bad, 2_000, &mut rng),
            Err(Refusal::Database {
                problem: QueryError::UnknownRow { .. }
            })
        ));
        // Before a selection the slot is empty.
        let offers = engine::offered(&study, &s);
        assert_eq!(
            offers.iter().find(|o| o.state == "offer").unwrap().text,
            " in the ."
        );
        // A study without a database refuses a query.
        let plain = wozkit_core::load::load_builtin("offshore-emergency").unwrap();
        let ps = Session::new(&plain, "p");
        let started = step(
            &plain,
            &ps,
            &Actor::System,
            Command::Start { seed: 1 },
            0,
            &mut rng,
        )
        .unwrap()
        .session;
        assert_eq!(
            step(&plain, &started, &actor(Role::Wizard), query, 1, &mut rng).unwrap_err(),
            Refusal::NoDatabase
        );
    }
}

/// A study that branches on the selected row: `db.TABLE.COLUMN` in conditions.
const BRANCHING: &str = r#"
id: dbbranch
title: Db branch
roles:
  user: {label: Guest}
  wizard: {label: Assistant}
database:
  tables:
    restaurant: {file: restaurants.csv, key: id}
states:
  - {id: start, type: interaction, initial: true, transitions: [nothing_yet, cheap, dear_italian]}
  - id: nothing_yet
    terminal: true
    type: request
    when: "!has(db.restaurant)"
    templates: ["What would you like?"]
  - id: cheap
    terminal: true
    type: update
    when: "has(db.restaurant) && db.restaurant.price < 20"
    templates: ["{db.restaurant.name} is cheap."]
  - id: dear_italian
    terminal: true
    type: update
    when: "db.restaurant.price >= 20 && db.restaurant.cuisine == 'italian' && db.restaurant.rating > 4.0"
    templates: ["{db.restaurant.name} is a treat."]
"#;

mod conditions_on_the_selected_row {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use wozkit_core::engine::{self, Command, Session, replay, step};
    use wozkit_core::event::{Actor, Event, Role};
    use wozkit_core::load::LoadedStudy;

    fn wizard() -> Actor {
        Actor::Participant {
            role: Role::Wizard,
            participant: None,
        }
    }

    /// Runs `cmd` and appends its events to `log`.
    fn run(study: &LoadedStudy, s: &mut Session, actor: Actor, cmd: Command, log: &mut Vec<Event>) {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let now = 1_000 + log.len() as u64;
        let st = step(study, s, &actor, cmd, now, &mut rng).expect("accepted");
        for (a, k) in st.events {
            log.push(Event {
                v: 1,
                session: "b".into(),
                seq: log.len() as u64 + 1,
                at_ms: now,
                actor: a,
                kind: k,
            });
        }
        *s = st.session;
    }

    fn select(key: &str) -> Command {
        Command::Select {
            table: "restaurant".into(),
            key: key.into(),
        }
    }

    fn offered_states(study: &LoadedStudy, s: &Session) -> Vec<String> {
        let mut v: Vec<String> = engine::offered(study, s)
            .into_iter()
            .map(|o| o.state)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn conditions_read_the_selected_row_and_replay_reads_the_logged_one() {
        let dir = folder(&[("study.yaml", BRANCHING), ("restaurants.csv", RESTAURANTS)]);
        let study = load_path(&dir).expect("a study whose conditions read db loads");
        let mut s = Session::new(&study, "b");
        let mut log = vec![];
        run(
            &study,
            &mut s,
            Actor::System,
            Command::Start { seed: 3 },
            &mut log,
        );
        assert_eq!(offered_states(&study, &s), ["nothing_yet"]);

        // r3 costs 18: cheap.
        run(&study, &mut s, wizard(), select("r3"), &mut log);
        assert_eq!(offered_states(&study, &s), ["cheap"]);
        // r1: Italian, 25, rated 4.5 (a float compared with a float).
        run(&study, &mut s, wizard(), select("r1"), &mut log);
        assert_eq!(offered_states(&study, &s), ["dear_italian"]);
        // r4: 22 but Indian: neither.
        run(&study, &mut s, wizard(), select("r4"), &mut log);
        assert!(offered_states(&study, &s).is_empty());
        run(&study, &mut s, wizard(), select("r1"), &mut log);

        // Replay against a database whose r1 has since become cheap: the conditions read the
        // row as it was logged, not the table.
        let changed = RESTAURANTS.replace(
            "r1,Trattoria Lanterna,italian,old town,25,",
            "r1,Trattoria Lanterna,italian,old town,9,",
        );
        assert_ne!(changed, RESTAURANTS);
        let dir = folder(&[("study.yaml", BRANCHING), ("restaurants.csv", &changed)]);
        let later = load_path(&dir).unwrap();
        let replayed = replay(&later, "b", &log);
        assert_eq!(offered_states(&later, &replayed), ["dear_italian"]);
        let o = engine::offered(&later, &replayed);
        assert_eq!(o[0].text, "Trattoria Lanterna is a treat.");
        // Selecting it now reads the changed table.
        let mut now = replayed;
        run(&later, &mut now, wizard(), select("r1"), &mut log);
        assert_eq!(offered_states(&later, &now), ["cheap"]);
    }

    #[test]
    fn db_in_a_condition_needs_a_database() {
        let text = BRANCHING
            .lines()
            .take_while(|l| !l.starts_with("database:"))
            .chain(BRANCHING.lines().skip_while(|l| !l.starts_with("states:")))
            .collect::<Vec<_>>()
            .join("\n")
            .replace("{db.restaurant.name}", "It");
        assert!(!text.contains("database:"));
        let dir = folder(&[("study.yaml", &text)]);
        let e = load_path(&dir).unwrap_err().to_string();
        assert!(e.contains("condition names unknown variable `db`"), "{e}");
    }
}

/// CrossWOZ's database files: rows as `[name, object]` pairs, Chinese column names, lists.
#[test]
fn crosswoz_shaped_json_loads_with_lists_as_text() {
    let dir = folder(&[(
        "restaurant_db.json",
        r#"[["全聚德", {"领域": "餐馆", "名称": "全聚德", "推荐菜": ["烤鸭", "芥末鸭掌"], "人均消费": 150, "评分": 4.5}],
            ["小吊梨汤", {"领域": "餐馆", "名称": "小吊梨汤", "推荐菜": ["梨汤"], "人均消费": 80, "评分": null}]]"#,
    )]);
    let db = Database::load(
        &spec(&[("restaurant", Some("restaurant_db.json"), "名称")], None),
        &StudySource::Dir(dir.clone()),
    )
    .expect("the CrossWOZ shape loads");
    let info = &db.tables()["restaurant"];
    let cols: Vec<&str> = info.columns.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(cols, ["领域", "名称", "推荐菜", "人均消费", "评分"]);
    let row = db.select("restaurant", "全聚德").unwrap();
    assert_eq!(row["推荐菜"], json!("烤鸭, 芥末鸭掌"));
    let r = db
        .query(
            "restaurant",
            &[
                f(
                    "推荐菜",
                    FilterOp::Contains {
                        value: "烤鸭".into(),
                    },
                ),
                f(
                    "人均消费",
                    FilterOp::Range {
                        min: Some(100.0),
                        max: None,
                    },
                ),
            ],
            20,
        )
        .unwrap();
    assert_eq!(r.keys, ["全聚德"]);

    // A pair whose second item is not an object, and a list holding an object, are refused.
    for (text, column) in [
        (r#"[["全聚德", "餐馆"]]"#, None),
        (
            r#"[["全聚德", {"名称": "全聚德", "推荐菜": [{"x": 1}]}]]"#,
            Some("推荐菜"),
        ),
    ] {
        let dir = folder(&[("bad.json", text)]);
        let e = Database::load(
            &spec(&[("restaurant", Some("bad.json"), "名称")], None),
            &StudySource::Dir(dir),
        )
        .unwrap_err();
        assert_eq!((e.row, e.column.as_deref()), (Some(1), column), "{e}");
    }
    // Names still never hold quotes or spaces, in any script.
    for bad in ["名 称", "名\"称", "1名称"] {
        assert!(!wozkit_core::database::is_plain_name(bad), "{bad}");
    }
}

#[test]
fn conditions_naming_missing_tables_or_columns_are_refused() {
    use wozkit_core::database::condition_refs;
    assert_eq!(
        condition_refs("has(db.restaurant) && db.restaurant.price < 20 && 'db.x.y' != ''"),
        [
            ("restaurant".to_string(), None),
            ("restaurant".to_string(), Some("price".to_string()))
        ]
    );
    assert_eq!(
        condition_refs("'餐馆' in db && db['餐馆'][\"评分\"] >= 4.5 && mydb.x == 1"),
        [("餐馆".to_string(), Some("评分".to_string()))]
    );
    let cases = [
        (
            "db.restaurant.price < 20",
            "db.hotel.price < 20",
            "`db.hotel`",
        ),
        (
            "db.restaurant.price < 20",
            "db.restaurant.prize < 20",
            "has no column `prize`",
        ),
        (
            "db.restaurant.price < 20",
            "db['restaurant']['stars'] > 3",
            "has no column `stars`",
        ),
    ];
    for (good, bad, says) in cases {
        let text = BRANCHING.replace(
            "has(db.restaurant) && db.restaurant.price < 20",
            &format!("has(db.restaurant) && {good}"),
        );
        let dir = folder(&[("study.yaml", &text), ("restaurants.csv", RESTAURANTS)]);
        load_path(&dir).expect("the unchanged study loads");
        let text = text.replace(good, bad);
        let dir = folder(&[("study.yaml", &text), ("restaurants.csv", RESTAURANTS)]);
        let e = load_path(&dir).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn show_names_columns_of_the_table() {
    let dir = folder(&[(
        "hotels.json",
        r#"[{"code": "h1", "name": "Quay Inn", "stars": 3}]"#,
    )]);
    let mut ok = spec(&[("hotel", Some("hotels.json"), "code")], None);
    ok.tables["hotel"].show = vec!["name".into(), "stars".into()];
    Database::load(&ok, &StudySource::Dir(dir.clone())).expect("shown columns exist");
    let mut bad = ok.clone();
    bad.tables["hotel"].show = vec!["name".into(), "area".into()];
    let e = Database::load(&bad, &StudySource::Dir(dir)).unwrap_err();
    assert_eq!(
        (e.table.as_str(), e.column.as_deref()),
        ("hotel", Some("area"))
    );
    assert!(
        e.message.contains("code, name, stars"),
        "the message lists the table's columns: {}",
        e.message
    );
}
