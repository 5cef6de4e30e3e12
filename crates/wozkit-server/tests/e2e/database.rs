//! End to end: the wizard's database panel in real headless Chromium. The wizard searches the
//! restaurants by a text filter (contains), then narrows with a second text filter and a price
//! range, gets the results table, uses a row, and says the option whose slots read the selected
//! row. The user's page never has the panel, the results or the selection; it only gets what
//! was said. Then the log is checked: the query with its filters and result keys, and the
//! selection with the row as it was.
//!
//! Then the same in the built-in `crosswoz-demo`: the wizard searches CrossWOZ's restaurants by
//! a dish (`推荐菜` contains `烤鸭`) and a rating range, uses a row, and says the option that
//! informs about it; the user gets only that. In both, the wizard's room fits 1366×768: no
//! sideways scrolling of the page, the options column keeps its width, each filter on one line,
//! the results table shows the study's `show` columns (all without it) and cuts long cells.
//! The CrossWOZ user's goal panel is headed with the study's `goals.text.title` and marks a
//! constraint the user states with its `done` word.
//!
//! Needs both browsers and their drivers (see `main.rs`); fails when one is missing unless
//! `WOZKIT_SKIP_E2E=1`. With `WOZKIT_UPDATE_SCREENSHOTS=1` (or when the file is missing) it
//! writes the wizard's room to `docs/screenshots/wizard-database.png` and
//! `docs/screenshots/wizard-database-crosswoz.png`, and the CrossWOZ guest's room to
//! `docs/screenshots/user-crosswoz.png`, at 1366×768.

use crate::browser;
use crate::server;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use serde_json::json;
use wozkit_core::database::{Filter, FilterOp};
use wozkit_core::event::EventKind;
use wozkit_core::goals::GoalText;
use wozkit_core::load::load_path;
use wozkit_store::Platform;

use browser::{Browser, Driver, close_all, into_room, shoot, shoot_settled, use_row};
use server::TestServer;

/// The whole test must end within this time, whatever happens.
const LIMIT: Duration = Duration::from_secs(120);
const STUDY_ID: &str = "dbpanel";
const USER_LAB: &str = "e2e-db-guest";
const WIZARD_LAB: &str = "e2e-db-assistant";

const STUDY: &str = r#"
id: dbpanel
title: Dinner
roles:
  user: {label: Guest}
  wizard: {label: Assistant, name: Tavi}
database:
  tables:
    restaurant:
      file: restaurants.csv
      key: id
      label: Restaurants
      labels: {price: Price per person}
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
r4,Harbour Noodle Bar,chinese,harbour,15
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wizard_searches_the_database_in_the_browser() {
    browser::run_in_both_browsers(
        "end-to-end database panel test",
        LIMIT,
        |chromium, chromedriver| async move { run(&chromium, &chromedriver).await },
    )
    .await;
}

async fn run(chromium: &Path, chromedriver: &Path) -> Result<()> {
    let driver = Driver::start(chromium, chromedriver).await?;
    let restaurants = restaurants(&driver).await;
    let crosswoz = match &restaurants {
        Ok(()) => crosswoz(&driver).await,
        Err(_) => Ok(()),
    };
    drop(driver);
    restaurants?;
    crosswoz
}

/// The small restaurant table of the test study.
async fn restaurants(driver: &Driver) -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("study.yaml"), STUDY)?;
    std::fs::write(dir.path().join("restaurants.csv"), RESTAURANTS)?;
    let study = load_path(dir.path()).map_err(|e| anyhow!("the test study does not load:\n{e}"))?;
    let mut server = TestServer::start(study).await?;
    let u = driver.browser("the user").await?;
    let w = driver.browser("the wizard").await?;
    let played = play(&server, &u, &w).await;
    let checked = match &played {
        Ok(()) => check_log(&server).await,
        Err(_) => Ok(()),
    };
    let closed = close_all([u, w]).await;
    let stopped = server.stop().await;
    played?;
    checked?;
    closed?;
    stopped
}

/// The built-in `crosswoz-demo`: CrossWOZ's tables and Chinese column names in the panel.
async fn crosswoz(driver: &Driver) -> Result<()> {
    let study = wozkit_core::load::load_builtin("crosswoz-demo")
        .map_err(|e| anyhow!("crosswoz-demo does not load:\n{e}"))?;
    let shown = study_show(&study, "餐馆");
    let words = study
        .study
        .goals
        .as_ref()
        .and_then(|g| g.text.clone())
        .context("crosswoz-demo has goals.text")?;
    let mut server = TestServer::start(study).await?;
    let u = driver.browser("the CrossWOZ user").await?;
    let w = driver.browser("the CrossWOZ wizard").await?;
    let played = play_crosswoz(&server, &u, &w, &shown, &words).await;
    let closed = close_all([u, w]).await;
    let stopped = server.stop().await;
    played?;
    closed?;
    stopped
}

async fn play_crosswoz(
    server: &TestServer,
    u: &Browser,
    w: &Browser,
    shown: &[String],
    words: &GoalText,
) -> Result<()> {
    let user_url = server.url("/join?participant=e2e-cw-user&study=crosswoz-demo&role=user");
    let wizard_url = server.url("/join?participant=e2e-cw-wizard&study=crosswoz-demo&role=wizard");
    let (ur, wr) = tokio::join!(into_room(u, &user_url), into_room(w, &wizard_url));
    ur?;
    wr?;
    // Restaurants serving roast duck, rated 4.5 or more.
    w.select("db-table", "餐馆").await?;
    w.type_into("db-value-推荐菜", "烤鸭").await?;
    w.type_into("db-min-评分", "4.5").await?;
    w.click("db-search").await?;
    let rows = w
        .wait_js(
            "the restaurants found",
            "const t = document.getElementById('db-results'); \
             if (!t || t.dataset.table !== '餐馆' || !t.querySelector('tr[data-key]')) return null; \
             const cols = [...t.querySelectorAll('th')].map(th => th.textContent); \
             const at = (c) => cols.indexOf(c); \
             return [...t.querySelectorAll('tr[data-key]')].map(tr => { \
               const td = tr.querySelectorAll('td'); \
               const whole = (c) => td[at(c)].getAttribute('title') || td[at(c)].textContent; \
               return {key: tr.dataset.key, name: whole('名称'), \
                       dishes: whole('推荐菜'), rating: Number(whole('评分'))}; })",
            vec![],
        )
        .await?;
    let rows = rows.as_array().context("rows")?.clone();
    for r in &rows {
        ensure!(
            r["dishes"].as_str().is_some_and(|d| d.contains("烤鸭"))
                && r["rating"].as_f64().is_some_and(|x| x >= 4.5),
            "a row that does not match the filters: {r}"
        );
    }
    let key = rows[0]["key"].as_str().context("key")?.to_string();
    let name = rows[0]["name"].as_str().context("name")?.to_string();
    use_row(w, &key).await?;
    // The selection reads as the row's name (the key column 名称, shown first), not another
    // column's value.
    let selected = w.text("db-selected").await?;
    ensure!(
        selected.contains(&name),
        "the selection reads `{selected}`, not the restaurant {name}"
    );
    w.click("option-greet").await?;
    option_reads(w, "inform_restaurant", &name).await?;
    let headers = fits(w).await?;
    ensure!(
        !shown.is_empty() && headers == json!(shown),
        "the results table shows {headers}, the study's `show` is {shown:?}"
    );
    shoot(w, "wizard-database-crosswoz.png").await?;
    ensure!(
        !user_page_has(u, &name).await?,
        "the user's page shows {name} before the wizard said it"
    );
    w.click("option-inform_restaurant").await?;
    u.wait_chat("the restaurant at the user", |l| l.text.contains(&name))
        .await?;
    goal_words(server, u, words).await
}

/// The user's goal panel speaks the study's words (`goals.text.title` and `done`): the heading,
/// and the mark after a constraint the user states.
async fn goal_words(server: &TestServer, u: &Browser, words: &GoalText) -> Result<()> {
    let title = u
        .wait_js(
            "the goal panel's heading",
            "const h = document.getElementById('goal-title'); return h ? h.textContent : null",
            vec![],
        )
        .await?;
    ensure!(
        title == json!(words.title),
        "the goal panel is headed {title}, the study says {:?}",
        words.title
    );
    let events = server
        .session_events("crosswoz-demo", Platform::Lab, "e2e-cw-user")
        .await?;
    let goal = events
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::GoalGenerated { goal, .. } => Some(goal),
            _ => None,
        })
        .context("no goal_generated in the CrossWOZ log")?;
    // The first constraint that is a plain value (not a reference to another sub-goal's place),
    // and its place among the panel's entries (constraints, then requests, sub-goal by sub-goal).
    let mut index = 0;
    let mut found = None;
    for sg in &goal.subgoals {
        for c in &sg.constraints {
            if found.is_none() && c.reference.is_none() && !c.value.trim().is_empty() {
                found = Some((index, c.value.clone()));
            }
            index += 1;
        }
        index += sg.requests.len();
    }
    let (index, value) = found.context("the goal has no plain constraint")?;
    u.type_into("text-input", &format!("我想要{value}的。\u{e007}"))
        .await?;
    let text = u
        .wait_js(
            "the stated constraint ticked",
            "const li = document.querySelector('#goal-panel li[data-index=\"' + arguments[0] + '\"]'); \
             return li && li.dataset.satisfied === 'true' ? li.querySelector('.goal-text').textContent : null",
            vec![json!(index)],
        )
        .await?;
    let text = text.as_str().context("the entry's text")?;
    ensure!(
        text.ends_with(&format!(" {}", words.done)) && !text.contains("(done)"),
        "a satisfied entry reads `{text}`, the study's mark is {:?}",
        words.done
    );
    // The guest's room in Chinese, the goal panel with the stated constraint ticked.
    shoot_settled(u, "user-crosswoz.png").await
}

/// The columns `table` of a study shows in the results table (`database.tables.T.show`).
fn study_show(study: &wozkit_core::load::LoadedStudy, table: &str) -> Vec<String> {
    study
        .study
        .database
        .as_ref()
        .and_then(|d| d.tables.get(table))
        .map(|t| t.show.clone())
        .unwrap_or_default()
}

/// The wizard's room fits the window (1366×768): the page does not scroll sideways, the database
/// and options panels end inside the window, the options column keeps a readable width, every
/// filter row holds its name and boxes on one line inside the row, the Use buttons are one line
/// high, and the results table has no cell longer than 40 characters (a longer value is cut with
/// `…` and whole in the title).
/// Returns the results table's column headers.
async fn fits(w: &Browser) -> Result<serde_json::Value> {
    let v = w
        .js(
            "const vw = window.innerWidth, out = [];              const de = document.documentElement;              if (de.scrollWidth > vw) out.push(`the page is ${de.scrollWidth}px wide in a ${vw}px window`);              for (const id of ['db-panel', 'options-panel']) {                const r = document.getElementById(id).getBoundingClientRect();                if (r.right > vw + 0.5) out.push(`#${id} ends at ${r.right}px, past ${vw}px`); }              const ow = document.getElementById('options-panel').getBoundingClientRect().width;              if (ow < 180) out.push(`the options column is squeezed to ${ow}px`);              for (const row of document.querySelectorAll('.db-filter')) {                const rr = row.getBoundingClientRect();                const first = row.children[0].getBoundingClientRect();                for (const c of row.children) {                  const r = c.getBoundingClientRect();                  if (r.top >= first.bottom - 1) out.push(`filter ${row.dataset.column}: a box wraps to a new line`);                  if (r.right > rr.right + 0.5) out.push(`filter ${row.dataset.column}: a box sticks out of its row`);                  if (c.tagName === 'INPUT' && r.width < 40) out.push(`filter ${row.dataset.column}: a box is ${r.width}px wide`); } }              const panel = document.getElementById('db-panel').getBoundingClientRect();              const scroll = document.querySelector('#db-panel .db-scroll');              if (!scroll || scroll.getBoundingClientRect().right > panel.right + 0.5) out.push('the results box is wider than its panel');              for (const td of document.querySelectorAll('#db-results td')) {                const t = [...td.textContent];                if (t.length > 40) out.push(`a cell of ${t.length} characters`);                if (td.classList.contains('db-cut')) {                  const whole = td.getAttribute('title') || '';                  if (t[t.length - 1] !== '…' || !whole.startsWith(t.slice(0, -1).join('')) || [...whole].length <= 40)                    out.push(`a cut cell whose title is not its whole text: ${td.textContent} / ${whole}`); } }              const sh = document.getElementById('db-search').getBoundingClientRect().height; \
             for (const b of document.querySelectorAll('#db-results button')) { \
               const h = b.getBoundingClientRect().height; \
               if (h > sh + 2) out.push(`a Use button wraps: ${h}px high, Search is ${sh}px`); } \
             const headers = [...document.querySelectorAll('#db-results th[scope=col]')].map(th => th.textContent);              return {problems: out, headers};",
            vec![],
        )
        .await?;
    let problems = v["problems"].as_array().context("problems")?;
    ensure!(
        problems.is_empty(),
        "the wizard's room does not fit 1366×768: {}",
        serde_json::to_string_pretty(problems)?
    );
    Ok(v["headers"].clone())
}

/// Waits until the wizard's option for `state` reads `text` (filled from the selected row).
async fn option_reads(w: &Browser, state: &str, text: &str) -> Result<()> {
    w.wait_js(
        &format!("the option {state} filled from the selected row"),
        "const b = document.querySelector('[data-testid=option-' + arguments[0] + ']'); \
         return !!b && b.textContent.includes(arguments[1])",
        vec![json!(state), json!(text)],
    )
    .await
    .map(drop)
}

/// The names in the results table, in order.
async fn result_names(w: &Browser) -> Result<serde_json::Value> {
    w.js(
        "return [...document.querySelectorAll('#db-results tr[data-key] td:nth-child(2)')].map(td => td.textContent)",
        vec![],
    )
    .await
}

/// Clicks Search and waits for a results table of `count` rows that differs from `before`.
async fn search(w: &Browser, count: usize) -> Result<()> {
    w.click("db-search").await?;
    w.wait_js(
        &format!("a results table of {count} rows"),
        "const t = document.getElementById('db-results'); \
         return !!t && t.dataset.count === arguments[0] \
           && t.querySelectorAll('tr[data-key]').length === Number(arguments[0])",
        vec![json!(count.to_string())],
    )
    .await
    .map(drop)
}

/// Whether any text of the user's page contains `text`.
async fn user_page_has(u: &Browser, text: &str) -> Result<bool> {
    let v = u
        .js(
            "return document.body.innerText.includes(arguments[0])",
            vec![json!(text)],
        )
        .await?;
    Ok(v == json!(true))
}

async fn play(server: &TestServer, u: &Browser, w: &Browser) -> Result<()> {
    let user_url = server.url(&format!("/join?participant={USER_LAB}&role=user"));
    let wizard_url = server.url(&format!("/join?participant={WIZARD_LAB}&role=wizard"));
    let (ur, wr) = tokio::join!(into_room(u, &user_url), into_room(w, &wizard_url));
    ur?;
    wr?;
    w.wait_js(
        "the database panel",
        "return !!document.getElementById('db-panel')",
        vec![],
    )
    .await?;

    // A text column: contains, without regard to case.
    w.type_into("db-value-area", "OLD").await?;
    search(w, 2).await?;
    let names = result_names(w).await?;
    ensure!(
        names == json!(["Trattoria Lanterna", "The Green Fig"]),
        "restaurants in the old town: {names}"
    );

    // Another text filter and a range on a number column.
    w.type_into("db-value-cuisine", "ital").await?;
    w.type_into("db-max-price", "30").await?;
    search(w, 1).await?;
    let names = result_names(w).await?;
    ensure!(
        names == json!(["Trattoria Lanterna"]),
        "Italian in the old town up to 30: {names}"
    );

    use_row(w, "r1").await?;
    let said = "How about Trattoria Lanterna in the old town?";
    option_reads(w, "offer", said).await?;
    let headers = fits(w).await?;
    ensure!(
        headers == json!(["id", "name", "cuisine", "area", "Price per person"]),
        "a table without `show` shows every column, each by its label if it has one: {headers}"
    );
    // The study's words for the table and the row, never the key the program uses ("r1").
    let words = w
        .js(
            "return [document.getElementById('db-selected').textContent, \
                     document.querySelector('#db-table option').textContent, \
                     document.querySelector('.db-filter[data-column=price] .db-column').textContent]",
            vec![],
        )
        .await?;
    ensure!(
        words
            == json!([
                "Selected in Restaurants: Trattoria Lanterna",
                "Restaurants",
                "Price per person"
            ]),
        "the panel's words for the table, the selected row and a column: {words}"
    );
    shoot(w, "wizard-database.png").await?;

    // Until the wizard says it, the user has seen nothing of the search.
    let panel = u
        .js("return !!document.getElementById('db-panel')", vec![])
        .await?;
    ensure!(
        panel == json!(false),
        "the user's page has a database panel"
    );
    for text in ["Trattoria Lanterna", "The Green Fig", "Selected in"] {
        ensure!(
            !user_page_has(u, text).await?,
            "the user's page shows `{text}` before the wizard said anything"
        );
    }

    w.click("option-offer").await?;
    u.wait_chat("the option filled from the row, at the user", |l| {
        l.text == said
    })
    .await?;
    let panel = u
        .js("return !!document.getElementById('db-panel')", vec![])
        .await?;
    ensure!(
        panel == json!(false),
        "the user's page has a database panel"
    );
    ensure!(
        !user_page_has(u, "The Green Fig").await?,
        "the user's page shows a result the wizard never said"
    );
    Ok(())
}

/// The session's log holds both queries with their filters and result keys, and the selection
/// with the row as it was.
async fn check_log(server: &TestServer) -> Result<()> {
    let events = server
        .session_events(STUDY_ID, Platform::Lab, WIZARD_LAB)
        .await?;
    let queries: Vec<(&String, &Vec<Filter>, &Vec<String>, usize)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::DbQueried {
                table,
                filters,
                result_keys,
                rows,
            } => Some((table, filters, result_keys, rows.len())),
            _ => None,
        })
        .collect();
    ensure!(queries.len() == 2, "two queries logged: {queries:?}");
    let contains = |column: &str, value: &str| Filter {
        column: column.into(),
        op: FilterOp::Contains {
            value: value.into(),
        },
    };
    let (table, filters, keys, rows) = queries[0];
    ensure!(table == "restaurant", "first query on {table}");
    ensure!(
        filters == &vec![contains("area", "OLD")],
        "first query's filters: {filters:?}"
    );
    ensure!(
        keys == &vec!["r1".to_string(), "r3".to_string()] && rows == 2,
        "first query's results: {keys:?}, {rows} rows"
    );
    let (_, filters, keys, rows) = queries[1];
    let range = Filter {
        column: "price".into(),
        op: FilterOp::Range {
            min: None,
            max: Some(30.0),
        },
    };
    for f in [contains("area", "OLD"), contains("cuisine", "ital"), range] {
        ensure!(
            filters.contains(&f),
            "second query lacks {f:?}: {filters:?}"
        );
    }
    ensure!(
        keys == &vec!["r1".to_string()] && rows == 1,
        "second query's results: {keys:?}, {rows} rows"
    );
    let selected: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::DbSelected { table, key, row } => Some((table, key, row)),
            _ => None,
        })
        .collect();
    ensure!(selected.len() == 1, "one selection logged: {selected:?}");
    let (table, key, row) = selected[0];
    ensure!(
        table == "restaurant" && key == "r1",
        "selected {table} {key}"
    );
    ensure!(
        row.get("name") == Some(&json!("Trattoria Lanterna"))
            && row.get("price") == Some(&json!(25)),
        "the selected row as logged: {row:?}"
    );
    let said = events.iter().any(|e| {
        matches!(&e.kind, EventKind::Message { text, .. }
            if text == "How about Trattoria Lanterna in the old town?")
    });
    ensure!(said, "the message filled from the row is not in the log");
    Ok(())
}
