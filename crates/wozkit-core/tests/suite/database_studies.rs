//! The built-in studies on real tables: `restaurant-booking` (a small restaurant table) and
//! `crosswoz-demo` (an excerpt of CrossWOZ's database in three domains). Each loads, its options
//! read the selected row, and the simulated wizard (who selects rows as a wizard would in the
//! panel) covers every state and reaches the goal without dead ends.

use std::collections::HashSet;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wozkit_core::engine::{self, Command, Session, step};
use wozkit_core::event::{Actor, EventKind, Role};
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_core::sim::{WizardPolicy, simulate};

fn wizard() -> Actor {
    Actor::Participant {
        role: Role::Wizard,
        participant: None,
    }
}

fn run(study: &LoadedStudy, s: &mut Session, actor: Actor, cmd: Command) -> Vec<EventKind> {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let st = step(study, s, &actor, cmd, 1_000, &mut rng).expect("accepted");
    *s = st.session;
    st.events.into_iter().map(|(_, k)| k).collect()
}

/// Simulates `n` sessions: no dead end, every state reached, the goal reached in some.
fn simulate_covers(study: &LoadedStudy, n: usize) {
    let r = simulate(study, n, 5, WizardPolicy::Priors);
    assert!(r.dead_ends.is_empty(), "dead ends: {:?}", r.dead_ends);
    assert!(
        r.uncovered_states.is_empty(),
        "states never reached: {:?}",
        r.uncovered_states
    );
    assert!(r.goal_reached > 0, "no simulated session reached the goal");
}

#[test]
fn restaurant_booking_reads_the_selected_restaurant() {
    let study = load_builtin("restaurant-booking").expect("restaurant-booking loads");
    let db = study
        .database
        .as_ref()
        .expect("the study has its restaurant table");
    let info = &db.tables()["restaurant"];
    assert!(info.rows >= 5, "{} restaurants", info.rows);
    // The user's wishes (Italian, the old town) have an answer in the table.
    let filters: Vec<wozkit_core::database::Filter> = serde_json::from_value(serde_json::json!([
        {"column": "cuisine", "op": "equals", "value": "italian"},
        {"column": "area", "op": "equals", "value": "old town"}
    ]))
    .unwrap();
    let found = db.query("restaurant", &filters, 20).unwrap();
    assert!(
        !found.keys.is_empty(),
        "no Italian restaurant in the old town"
    );
    let row = &found.rows[0];

    // Before a selection nothing presents a restaurant; after it, the options read the row.
    let mut s = Session::new(&study, "r");
    run(&study, &mut s, Actor::System, Command::Start { seed: 11 });
    let presents = |s: &Session| -> HashSet<String> {
        engine::offered(&study, s)
            .into_iter()
            .filter(|o| o.state == "inform_opening_hours")
            .map(|o| o.text)
            .collect()
    };
    assert!(presents(&s).is_empty());
    let events = run(
        &study,
        &mut s,
        wizard(),
        Command::Select {
            table: "restaurant".into(),
            key: found.keys[0].clone(),
        },
    );
    assert!(matches!(events[0], EventKind::DbSelected { .. }));
    let texts = presents(&s);
    let name = row["name"].as_str().unwrap();
    let hours = row["opening_hours"].as_str().unwrap();
    assert_eq!(texts.len(), 1, "{texts:?}");
    let text = texts.into_iter().next().unwrap();
    assert!(
        text.contains(name) && text.contains(hours),
        "`{text}` does not read {name}, {hours}"
    );
    // No fixed restaurant variables are left in the world.
    assert!(
        study
            .study
            .world
            .variables
            .keys()
            .all(|k| !k.starts_with("restaurant_") && !k.starts_with("alt_") || k == "alt_offered"),
        "{:?}",
        study.study.world.variables.keys().collect::<Vec<_>>()
    );
}

#[test]
fn restaurant_booking_simulates_with_selections() {
    let study = load_builtin("restaurant-booking").unwrap();
    simulate_covers(&study, 300);
}

/// The CrossWOZ columns each domain of the excerpt must keep (`database.md` of the dataset).
const CROSSWOZ_COLUMNS: &[(&str, &[&str])] = &[
    (
        "景点",
        &[
            "领域",
            "名称",
            "地址",
            "地铁",
            "电话",
            "门票",
            "游玩时间",
            "评分",
            "周边景点",
            "周边餐馆",
            "周边酒店",
        ],
    ),
    (
        "餐馆",
        &[
            "领域",
            "名称",
            "地址",
            "地铁",
            "电话",
            "营业时间",
            "推荐菜",
            "人均消费",
            "评分",
            "周边景点",
            "周边餐馆",
            "周边酒店",
        ],
    ),
    (
        "酒店",
        &[
            "名称",
            "酒店类型",
            "地址",
            "地铁",
            "电话",
            "酒店设施",
            "价格",
            "评分",
            "周边景点",
            "周边餐馆",
            "周边酒店",
        ],
    ),
];

#[test]
fn crosswoz_demo_has_three_domains_with_crosswoz_slots() {
    let study = load_builtin("crosswoz-demo").expect("crosswoz-demo loads");
    let db = study.database.as_ref().expect("the study has its database");
    let names: Vec<&str> = db.tables().keys().map(String::as_str).collect();
    assert_eq!(names, ["景点", "餐馆", "酒店"]);
    for (table, want) in CROSSWOZ_COLUMNS {
        let info = &db.tables()[*table];
        assert_eq!(info.rows, 30, "{table}");
        assert_eq!(info.key, "名称");
        for c in *want {
            assert!(info.column(c).is_some(), "{table} lacks {c}");
        }
    }
    // Numbers stay numbers, so the panel offers ranges on them.
    assert!(db.tables()["餐馆"].column("人均消费").unwrap().is_numeric());
    assert!(db.tables()["酒店"].column("价格").unwrap().is_numeric());
    // A dish of a list column is found by `contains`.
    let f: Vec<wozkit_core::database::Filter> = serde_json::from_value(serde_json::json!([
        {"column": "推荐菜", "op": "contains", "value": "烤鸭"}
    ]))
    .unwrap();
    let found = db.query("餐馆", &f, 20).unwrap();
    assert!(!found.keys.is_empty(), "no restaurant serves 烤鸭");
    for row in &found.rows {
        assert!(row["推荐菜"].as_str().unwrap().contains("烤鸭"), "{row:?}");
    }
}

#[test]
fn crosswoz_demo_informs_and_recommends_from_the_selected_row() {
    let study = load_builtin("crosswoz-demo").unwrap();
    let db = study.database.as_ref().unwrap();
    let all = db.query("餐馆", &[], 20).unwrap();
    let rating = |r: &wozkit_core::database::Row| r["评分"].as_f64();
    let good = all
        .rows
        .iter()
        .position(|r| rating(r).is_some_and(|x| x >= 4.5))
        .expect("a restaurant rated 4.5 or more");
    let plain = all
        .rows
        .iter()
        .position(|r| rating(r).is_some_and(|x| x < 4.5))
        .expect("a restaurant rated under 4.5");

    let mut s = Session::new(&study, "c");
    run(&study, &mut s, Actor::System, Command::Start { seed: 11 });
    let offered = |s: &Session| -> Vec<(String, String)> {
        engine::offered(&study, s)
            .into_iter()
            .map(|o| (o.state, o.text))
            .collect()
    };
    let states = |s: &Session| -> HashSet<String> { offered(s).into_iter().map(|o| o.0).collect() };
    // Greet first; then nothing informs before a selection.
    run(
        &study,
        &mut s,
        wizard(),
        Command::Say {
            state: "greet".into(),
        },
    );
    assert!(
        !states(&s).contains("inform_restaurant"),
        "{:?}",
        states(&s)
    );

    let select = |s: &mut Session, i: usize| {
        run(
            &study,
            s,
            wizard(),
            Command::Select {
                table: "餐馆".into(),
                key: all.keys[i].clone(),
            },
        );
    };
    let text_of = |s: &Session, state: &str| {
        offered(s)
            .into_iter()
            .find(|(st, _)| st == state)
            .map(|(_, t)| t)
    };
    let name = |i: usize| all.rows[i]["名称"].as_str().unwrap().to_string();

    // A restaurant rated under 4.5: informed about, not recommended.
    select(&mut s, plain);
    let inform = text_of(&s, "inform_restaurant").expect("inform_restaurant after a selection");
    assert!(
        inform.contains(&name(plain)),
        "`{inform}` does not name {}",
        name(plain)
    );
    run(
        &study,
        &mut s,
        wizard(),
        Command::Say {
            state: "inform_restaurant".into(),
        },
    );
    assert!(
        !states(&s).contains("recommend_restaurant"),
        "recommended {} rated {:?}",
        name(plain),
        rating(&all.rows[plain])
    );
    // Another row selected, rated 4.5 or more: now recommended, by its own name.
    select(&mut s, good);
    let rec = text_of(&s, "recommend_restaurant").expect("recommend_restaurant for a good row");
    assert!(
        rec.contains(&name(good)),
        "`{rec}` does not name {}",
        name(good)
    );
}

#[test]
fn crosswoz_demo_simulates_with_selections() {
    let study = load_builtin("crosswoz-demo").unwrap();
    simulate_covers(&study, 300);
}

/// The documented way to run over the full database: export the study to a folder and copy the
/// released files over `database/`. With `WOZKIT_CROSSWOZ_DATABASE` naming a folder of the
/// released files, the full files are copied in and every excerpt record must equal the released
/// one; without it, the exported folder itself must load as the built-in does.
#[test]
fn crosswoz_demo_runs_from_a_folder_with_the_full_database() {
    let dir = std::env::temp_dir().join(format!("wozkit-crosswoz-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let source = wozkit_core::load::StudySource::Builtin("crosswoz-demo".into());
    for rel in wozkit_core::load::builtin_files("crosswoz-demo") {
        let path = dir.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, source.read(&rel).unwrap()).unwrap();
    }
    let excerpt = load_builtin("crosswoz-demo").unwrap();
    let full = std::env::var_os("WOZKIT_CROSSWOZ_DATABASE").map(std::path::PathBuf::from);
    if let Some(full) = &full {
        for f in ["attraction_db.json", "restaurant_db.json", "hotel_db.json"] {
            std::fs::copy(full.join(f), dir.join("database").join(f))
                .unwrap_or_else(|e| panic!("copying {}: {e}", full.join(f).display()));
        }
    }
    let study = wozkit_core::load::load_path(&dir).expect("the exported study loads");
    let db = study.database.as_ref().unwrap();
    let small = excerpt.database.as_ref().unwrap();
    for (table, _) in CROSSWOZ_COLUMNS {
        let rows = db.tables()[*table].rows;
        if full.is_some() {
            assert!(rows > 30, "{table}: {rows} rows from the full file");
            for key in small.query(table, &[], 20).unwrap().keys {
                assert_eq!(
                    db.select(table, &key).unwrap(),
                    small.select(table, &key).unwrap(),
                    "{table} {key}"
                );
            }
        } else {
            assert_eq!(rows, 30, "{table}");
        }
    }
    simulate_covers(&study, 50);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A machine name the wizard's panel would show (a table or a shown column with `_` and no
/// words) is a warning at its place; `label` and `labels` silence it, and a built-in study with a
/// database has none.
#[test]
fn machine_names_in_the_database_panel_are_warned_about() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("machine-names");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("r.csv"),
        "id,name,price_per_person\nr1,Lanterna,28\n",
    )
    .unwrap();
    let study = |table: &str| {
        format!(
            "id: s\ntitle: S\npreview: Chat with an assistant.\nroles:\n  user: {{label: Guest}}\n  wizard: {{label: Assistant}}\n\
             database:\n  tables:\n{table}\
             states:\n  - {{id: start, type: interaction, initial: true, transitions: [bye]}}\n  - {{id: bye, type: interaction, terminal: true, templates: [\"Bye.\"]}}\n"
        )
    };
    let warnings = |text: &str| -> Vec<String> {
        let s = wozkit_core::load::load_text(
            "s.yaml",
            text,
            wozkit_core::load::StudySource::Dir(dir.clone()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        s.compiled
            .warnings
            .iter()
            .map(|w| format!("{}:{}: {}", w.line, w.col, w.message))
            .collect()
    };
    let bare = study("    dinner_places: {file: r.csv, key: id, show: [name, price_per_person]}\n");
    assert_eq!(
        warnings(&bare),
        [
            "9:5: the wizard's database panel names this table `dinner_places`",
            "9:43: the wizard's results table heads these columns by their names: price_per_person",
        ]
    );
    let worded = study(
        "    dinner_places: {file: r.csv, key: id, show: [name, price_per_person], label: Restaurants, labels: {price_per_person: Price per person}}\n",
    );
    assert_eq!(warnings(&worded), Vec::<String>::new());
    for name in ["restaurant-booking", "crosswoz-demo"] {
        let s = load_builtin(name).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            s.compiled.warnings.is_empty(),
            "{name}: {:?}",
            s.compiled.warnings
        );
    }
}
