//! What a simulated participant does next, from the latest `view` it was sent. Pure, so it is
//! tested without a server. The wizard plays like a hurried person: mostly an offered option,
//! sometimes a robot action the panel allows, a fixed phrase or free text; the user chats, and
//! answers approval prompts. Only commands the view says are possible are chosen, so refusals
//! in a run point at the server (or at a view that changed in flight), not at the bench.
//!
//! In a study with a database ([`Known`], learned from the frames): the wizard sometimes searches
//! a table (no filters, or a filter on a value of a row an earlier search returned) and selects a
//! row of its latest search, so options that read a selected row become offered; the user with a
//! goal mostly writes its open constraints' values and asks for its requested slots. Without
//! tables and goals the moves, and the dice they take, are those of the plain workload.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The side a simulated participant plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Wizard,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Wizard => "wizard",
        }
    }

    pub fn other(self) -> Role {
        match self {
            Role::User => Role::Wizard,
            Role::Wizard => Role::User,
        }
    }
}

/// The parts of a `view` (docs/protocol.md) the policy reads; the rest is skipped unparsed.
#[derive(Debug, Default, Deserialize)]
pub struct ViewHead {
    #[serde(default)]
    pub muted: bool,
    #[serde(default)]
    pub lock: Option<LockHead>,
    #[serde(default)]
    pub ended: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub options: Vec<OptionHead>,
    #[serde(default)]
    pub fixed: Vec<FixedHead>,
    /// `None` when the view left the panel out: it is the one of the last view that had it.
    #[serde(default)]
    pub actions: Option<Vec<ActionHead>>,
}

#[derive(Debug, Deserialize)]
pub struct LockHead {
    pub kind: String,
}

#[derive(Debug, Deserialize)]
pub struct OptionHead {
    pub state: String,
}

#[derive(Debug, Deserialize)]
pub struct FixedHead {
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub struct ActionHead {
    pub id: String,
    #[serde(default)]
    pub combos: Vec<ComboHead>,
}

#[derive(Debug, Deserialize)]
pub struct ComboHead {
    pub robot: String,
    #[serde(default)]
    pub target: Option<String>,
    pub ok: bool,
}

const USER_LINES: &[&str] = &[
    "What is going on at the alarm?",
    "Can you send a robot to have a look?",
    "Okay, go ahead.",
    "How long will that take?",
    "Which robot is closest?",
    "Keep me posted, please.",
    "Is the crew safe?",
];

const WIZARD_LINES: &[&str] = &[
    "One moment, I am checking that for you.",
    "I am on it.",
    "The robot is moving now.",
    "Could you say that again, please?",
];

/// A small deterministic random source (splitmix64): each participant has its own, so runs
/// are reproducible and nothing random is shared between tasks.
#[derive(Clone, Debug)]
pub struct Dice(u64);

impl Dice {
    pub fn new(seed: u64) -> Dice {
        Dice(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An index below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// A table of the study's database as the wizard's `welcome` lists it.
#[derive(Clone, Debug, Deserialize)]
pub struct TableHead {
    pub name: String,
    #[serde(default)]
    pub columns: Vec<ColumnHead>,
}

/// A column of a table: its name and type (`integer`, `real` or `text`).
#[derive(Clone, Debug, Deserialize)]
pub struct ColumnHead {
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
}

/// An entry of the user's goal: a constraint (`value` the wanted value) or a requested slot.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct GoalHead {
    #[serde(default)]
    pub domain: String,
    pub slot: String,
    #[serde(default)]
    pub value: String,
    /// `constraint` or `request`.
    pub kind: String,
    #[serde(default)]
    pub satisfied: bool,
}

/// Rows of one table kept from searches, for the filters of later ones.
const KEEP_ROWS: usize = 40;

/// What a participant learned from its frames besides the view: the wizard, the study's tables
/// (from `welcome`) and the rows its searches returned (`db_queried`); the user, its goal's
/// entries not yet satisfied (`goal_generated`, then each `turn_state`).
#[derive(Debug, Default)]
pub struct Known {
    pub tables: Vec<TableHead>,
    /// Rows each table's searches returned, the latest last.
    pub seen: HashMap<String, Vec<Map<String, Value>>>,
    /// The latest search's table and result keys, until a row is selected.
    pub found: Option<(String, Vec<String>)>,
    /// The goal's open entries.
    pub open: Vec<GoalHead>,
}

#[derive(Deserialize)]
struct WelcomeHead {
    study: StudyHead,
}

#[derive(Deserialize)]
struct StudyHead {
    #[serde(default)]
    database: Option<Vec<TableHead>>,
}

#[derive(Deserialize)]
struct LearnFrame {
    event: Learned,
}

#[derive(Deserialize)]
struct GoalBody {
    #[serde(default)]
    subgoals: Vec<SubGoalHead>,
}

#[derive(Deserialize)]
struct SubGoalHead {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    constraints: Vec<SlotHead>,
    #[serde(default)]
    requests: Vec<SlotHead>,
}

#[derive(Deserialize)]
struct SlotHead {
    slot: String,
    #[serde(default)]
    value: String,
}

/// The events a participant learns from (docs/protocol.md); the rest are skipped.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Learned {
    DbQueried {
        table: String,
        #[serde(default)]
        result_keys: Vec<String>,
        #[serde(default)]
        rows: Vec<Map<String, Value>>,
    },
    DbSelected {
        table: String,
    },
    GoalGenerated {
        goal: GoalBody,
    },
    TurnState {
        #[serde(default)]
        user_state: Vec<GoalHead>,
    },
    #[serde(other)]
    Other,
}

impl Known {
    /// Reads the tables of a `welcome` frame (the wizard's; the user's lists none).
    pub fn welcome(&mut self, text: &str) {
        if let Ok(w) = serde_json::from_str::<WelcomeHead>(text) {
            self.tables = w.study.database.unwrap_or_default();
        }
    }

    /// Learns from an `event` frame. Frames of other events are skipped by a substring test,
    /// so the plain workload parses nothing more than before.
    pub fn event(&mut self, text: &str) {
        let wanted = [
            "\"db_queried\"",
            "\"db_selected\"",
            "\"goal_generated\"",
            "\"turn_state\"",
        ];
        if !wanted.iter().any(|w| text.contains(w)) {
            return;
        }
        let Ok(f) = serde_json::from_str::<LearnFrame>(text) else {
            return;
        };
        match f.event {
            Learned::DbQueried {
                table,
                result_keys,
                rows,
            } => {
                let seen = self.seen.entry(table.clone()).or_default();
                seen.extend(rows);
                let extra = seen.len().saturating_sub(KEEP_ROWS);
                seen.drain(..extra);
                self.found = Some((table, result_keys)).filter(|(_, k)| !k.is_empty());
            }
            Learned::DbSelected { table } => {
                if self.found.as_ref().is_some_and(|(t, _)| *t == table) {
                    self.found = None;
                }
            }
            Learned::GoalGenerated { goal } => {
                self.open = goal
                    .subgoals
                    .into_iter()
                    .flat_map(|sg| {
                        let domain = sg.domain;
                        let c = sg.constraints.into_iter().map(|s| (s, "constraint"));
                        let r = sg.requests.into_iter().map(|s| (s, "request"));
                        c.chain(r)
                            .map(|(s, kind)| GoalHead {
                                domain: domain.clone(),
                                slot: s.slot,
                                value: s.value,
                                kind: kind.into(),
                                satisfied: false,
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect();
            }
            Learned::TurnState { user_state } => {
                self.open = user_state.into_iter().filter(|e| !e.satisfied).collect();
            }
            Learned::Other => {}
        }
    }
}

/// The `cmd` object to send next (the part inside `{"type":"cmd","id":…,"cmd":…}`), or `None`
/// when this role has nothing it may do now (the user before the wizard spoke, a finished
/// session).
pub fn next_command(role: Role, view: &ViewHead, dice: &mut Dice) -> Option<Value> {
    next_move(role, view, &Known::default(), dice)
}

/// [`next_command`] with what the participant learned: the database's tables and rows for the
/// wizard, the goal for the user.
pub fn next_move(role: Role, view: &ViewHead, known: &Known, dice: &mut Dice) -> Option<Value> {
    if view.ended.is_some() {
        return None;
    }
    match role {
        Role::User => user(view, known, dice),
        Role::Wizard => Some(wizard(view, known, dice)),
    }
}

fn user(view: &ViewHead, known: &Known, dice: &mut Dice) -> Option<Value> {
    if view.lock.as_ref().is_some_and(|l| l.kind == "approval") {
        let answer = if dice.unit() < 0.8 { "approve" } else { "deny" };
        return Some(json!({ "cmd": answer }));
    }
    if view.muted {
        return None;
    }
    if !known.open.is_empty() && dice.unit() < 0.7 {
        let e = &known.open[dice.below(known.open.len())];
        let text = match (e.kind.as_str(), dice.unit() < 0.5) {
            ("constraint", true) => e.value.clone(),
            ("constraint", false) => format!("{} {}: {}", e.domain, e.slot, e.value),
            _ => format!("{} {}?", e.domain, e.slot),
        };
        if !text.trim().is_empty() {
            return Some(json!({ "cmd": "text", "text": text }));
        }
    }
    let line = USER_LINES[dice.below(USER_LINES.len())];
    Some(json!({ "cmd": "text", "text": line }))
}

/// A search of the study's database, or a selection from the latest search; `None` to play
/// another move. Only with tables, so the plain workload takes no dice here.
fn database_move(known: &Known, dice: &mut Dice) -> Option<Value> {
    if known.tables.is_empty() {
        return None;
    }
    // A search on 15% of the moves, a selection on 35% while the latest search has rows.
    let roll = dice.unit();
    if let Some((table, keys)) = &known.found
        && roll < 0.35
    {
        let key = &keys[dice.below(keys.len())];
        return Some(json!({ "cmd": "select", "table": table, "key": key }));
    }
    if !(0.35..0.5).contains(&roll) {
        return None;
    }
    let t = &known.tables[dice.below(known.tables.len())];
    let filters = match known.seen.get(&t.name).filter(|r| !r.is_empty()) {
        Some(rows) if dice.unit() < 0.7 => {
            let row = &rows[dice.below(rows.len())];
            filter_from(t, row, dice).into_iter().collect()
        }
        _ => vec![],
    };
    Some(json!({ "cmd": "query", "table": t.name, "filters": filters }))
}

/// A filter that `row` meets, on one of the table's columns: a number's range around it, a
/// text's equality.
fn filter_from(t: &TableHead, row: &Map<String, Value>, dice: &mut Dice) -> Option<Value> {
    let c = t.columns.get(dice.below(t.columns.len()))?;
    match row.get(&c.name)? {
        Value::Number(n) if c.kind != "text" => {
            let x = n.as_f64()?;
            Some(
                json!({ "column": c.name, "op": "range", "min": x.floor(), "max": x.ceil() + 1.0 }),
            )
        }
        Value::String(s) if !s.is_empty() => {
            Some(json!({ "column": c.name, "op": "equals", "value": s }))
        }
        _ => None,
    }
}

fn wizard(view: &ViewHead, known: &Known, dice: &mut Dice) -> Value {
    // The database can be searched at any time, also while waiting for the user.
    if let Some(cmd) = database_move(known, dice) {
        return cmd;
    }
    let roll = dice.unit();
    // While the wizard waits for the user (a lock), only phrases and free text make sense.
    let locked = view.lock.is_some();
    if !locked && roll < 0.45 && !view.options.is_empty() {
        let o = &view.options[dice.below(view.options.len())];
        return json!({ "cmd": "say", "state": o.state });
    }
    let allowed: Vec<(&str, &ComboHead)> = view
        .actions
        .iter()
        .flatten()
        .flat_map(|a| a.combos.iter().map(move |c| (a.id.as_str(), c)))
        .filter(|(_, c)| c.ok)
        .collect();
    if !locked && roll < 0.65 && !allowed.is_empty() {
        let (action, c) = allowed[dice.below(allowed.len())];
        let mut cmd = json!({ "cmd": "act", "action": action, "robot": c.robot });
        if let (Some(t), Some(obj)) = (&c.target, cmd.as_object_mut()) {
            obj.insert("target".into(), json!(t));
        }
        return cmd;
    }
    if roll < 0.85 && !view.fixed.is_empty() {
        let f = &view.fixed[dice.below(view.fixed.len())];
        return json!({ "cmd": "fixed", "id": f.id });
    }
    let line = WIZARD_LINES[dice.below(WIZARD_LINES.len())];
    json!({ "cmd": "text", "text": line })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(json: &str) -> ViewHead {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    #[test]
    fn the_user_waits_until_the_wizard_spoke_and_answers_approvals() {
        let mut dice = Dice::new(1);
        assert_eq!(
            next_command(
                Role::User,
                &view(r#"{"muted":true,"lock":null}"#),
                &mut dice
            ),
            None
        );
        let v = view(r#"{"muted":false,"lock":null,"robots":[1,2]}"#);
        assert_eq!(
            next_command(Role::User, &v, &mut dice).map(|c| c["cmd"].clone()),
            Some(json!("text"))
        );
        let v = view(r#"{"muted":true,"lock":{"kind":"approval","prompt":"Go?"}}"#);
        let cmd = next_command(Role::User, &v, &mut dice).map(|c| c["cmd"].clone());
        assert!(cmd == Some(json!("approve")) || cmd == Some(json!("deny")));
        let v = view(r#"{"muted":false,"ended":{"reason":"terminal"}}"#);
        assert_eq!(next_command(Role::User, &v, &mut dice), None);
    }

    #[test]
    fn the_wizard_only_picks_what_the_view_offers() {
        let v = view(
            r#"{"options":[{"state":"greet","label":"x"}],"fixed":[{"id":"ok","text":"Okay"}],
                "actions":[{"id":"send","combos":[
                    {"robot":"r1","target":"tower","ok":true},
                    {"robot":"r2","target":"tower","ok":false,"reason":"busy"}]}],
                "lock":null}"#,
        );
        let mut dice = Dice::new(7);
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..400 {
            let Some(c) = next_command(Role::Wizard, &v, &mut dice) else {
                panic!("the wizard always has something to do")
            };
            match c["cmd"].as_str() {
                Some("say") => assert_eq!(c["state"], "greet"),
                Some("act") => {
                    assert_eq!((&c["robot"], &c["target"]), (&json!("r1"), &json!("tower")));
                }
                Some("fixed") => assert_eq!(c["id"], "ok"),
                Some("text") => assert!(c["text"].as_str().is_some_and(|t| !t.is_empty())),
                other => panic!("unexpected command {other:?}"),
            }
            kinds.insert(c["cmd"].as_str().unwrap_or_default().to_string());
        }
        assert_eq!(kinds.len(), 4, "every kind of move is played: {kinds:?}");
    }

    #[test]
    fn a_locked_wizard_neither_says_nor_acts() {
        let v = view(
            r#"{"options":[{"state":"greet"}],"fixed":[],"lock":{"kind":"approval"},
                "actions":[{"id":"send","combos":[{"robot":"r1","target":null,"ok":true}]}]}"#,
        );
        let mut dice = Dice::new(3);
        for _ in 0..100 {
            let cmd = next_command(Role::Wizard, &v, &mut dice).map(|c| c["cmd"].clone());
            assert_eq!(cmd, Some(json!("text")));
        }
    }

    const WELCOME: &str = r#"{"type":"welcome","role":"wizard","session":"s","participant":"p",
        "study":{"id":"x","database":[{"name":"hotel","key":"name","show":[],"columns":[
            {"name":"name","type":"text"},{"name":"price","type":"integer"}]}]}}"#;

    const QUERIED: &str = r#"{"type":"event","event":{"seq":5,"actor":{"type":"participant",
        "role":"wizard","participant":"p"},"kind":"db_queried","table":"hotel","filters":[],
        "result_keys":["Ritz","Inn"],"rows":[{"name":"Ritz","price":900},{"name":"Inn","price":80}]}}"#;

    #[test]
    fn the_wizard_searches_and_selects_only_rows_its_searches_returned() {
        let mut known = Known::default();
        known.welcome(WELCOME);
        assert_eq!(known.tables.len(), 1);
        let v = view(r#"{"options":[{"state":"greet"}],"fixed":[],"lock":null}"#);
        let mut dice = Dice::new(11);
        let mut queries = 0;
        for _ in 0..200 {
            let c = next_move(Role::Wizard, &v, &known, &mut dice).unwrap();
            assert_ne!(c["cmd"], "select", "nothing was found yet: {c}");
            if c["cmd"] == "query" {
                assert_eq!((&c["table"], &c["filters"]), (&json!("hotel"), &json!([])));
                queries += 1;
            }
        }
        assert!(queries > 0, "the wizard searches");

        known.event(QUERIED);
        assert_eq!(known.seen["hotel"].len(), 2);
        let (mut selects, mut filtered) = (0, 0);
        for _ in 0..400 {
            let c = next_move(Role::Wizard, &v, &known, &mut dice).unwrap();
            match c["cmd"].as_str() {
                Some("select") => {
                    assert_eq!(c["table"], "hotel");
                    assert!(c["key"] == "Ritz" || c["key"] == "Inn", "{c}");
                    selects += 1;
                }
                Some("query") => {
                    for f in c["filters"].as_array().unwrap() {
                        filtered += 1;
                        match f["op"].as_str() {
                            Some("equals") => assert!(f["value"] == "Ritz" || f["value"] == "Inn"),
                            Some("range") => {
                                let (lo, hi) =
                                    (f["min"].as_f64().unwrap(), f["max"].as_f64().unwrap());
                                assert!([900.0, 80.0].iter().any(|x| (lo..=hi).contains(x)), "{f}");
                            }
                            _ => panic!("unexpected filter {f}"),
                        }
                    }
                }
                _ => {}
            }
        }
        assert!(
            selects > 0 && filtered > 0,
            "{selects} selections, {filtered} filters"
        );

        // A selection closes the search: nothing more to select until the next one.
        known.event(
            r#"{"type":"event","event":{"seq":6,"actor":{"type":"participant","role":"wizard"},
            "kind":"db_selected","table":"hotel","key":"Inn","row":{"name":"Inn"}}}"#,
        );
        assert!(known.found.is_none());
        for _ in 0..100 {
            let c = next_move(Role::Wizard, &v, &known, &mut dice).unwrap();
            assert_ne!(c["cmd"], "select");
        }
    }

    #[test]
    fn without_tables_or_goal_the_moves_are_the_plain_ones() {
        let v = view(
            r#"{"options":[{"state":"greet"}],"fixed":[{"id":"ok"}],"lock":null,"muted":false}"#,
        );
        for role in [Role::User, Role::Wizard] {
            let (mut a, mut b) = (Dice::new(5), Dice::new(5));
            for _ in 0..200 {
                let plain = next_command(role, &v, &mut a);
                assert_eq!(plain, next_move(role, &v, &Known::default(), &mut b));
                assert!(plain.is_some_and(|c| c["cmd"] != "query" && c["cmd"] != "select"));
            }
        }
    }

    #[test]
    fn the_user_writes_its_open_constraints_and_asks_for_its_requests() {
        let mut known = Known::default();
        known.event(
            r#"{"type":"event","event":{"seq":2,"actor":{"type":"system"},"kind":"goal_generated",
            "seed":1,"goal":{"subgoals":[{"id":1,"domain":"hotel","table":"hotel","row":"Inn",
            "constraints":[{"slot":"price","value":"80"}],"requests":[{"slot":"phone","value":""}]}]},
            "description":["..."]}}"#,
        );
        assert_eq!(known.open.len(), 2);
        let v = view(r#"{"muted":false,"lock":null}"#);
        let mut dice = Dice::new(9);
        let (mut values, mut asks) = (0, 0);
        for _ in 0..200 {
            let c = next_move(Role::User, &v, &known, &mut dice).unwrap();
            let text = c["text"].as_str().unwrap();
            values += usize::from(text.contains("80"));
            asks += usize::from(text.contains("phone"));
        }
        assert!(values > 0 && asks > 0, "{values} {asks}");

        // The turn state says the constraint was expressed: only the request stays open.
        known.event(
            r#"{"type":"event","event":{"seq":9,"actor":{"type":"system"},"kind":"turn_state",
            "turn":1,"role":"user","user_state":[
              {"subgoal":1,"domain":"hotel","slot":"price","value":"80","kind":"constraint","satisfied":true},
              {"subgoal":1,"domain":"hotel","slot":"phone","value":"","kind":"request","satisfied":false}]}}"#,
        );
        assert_eq!(known.open.len(), 1);
        assert_eq!(known.open[0].slot, "phone");
    }

    #[test]
    fn dice_stay_in_range() {
        let mut d = Dice::new(42);
        for _ in 0..1000 {
            let u = d.unit();
            assert!((0.0..1.0).contains(&u));
            assert!(d.below(3) < 3);
        }
        assert_eq!(d.below(0), 0);
    }
}
