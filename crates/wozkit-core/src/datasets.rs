//! How a study's sessions map onto the public datasets' vocabularies (`datasets:` in a study
//! file), and those vocabularies: MultiWOZ 2.1's seven domains with their belief-state slots and
//! its `Domain-Intent` acts, CrossWOZ's five domains with their state and act slots and its
//! intents, Taskmaster-1's scenario domains and ontology, and the intents of ConvLab-3's unified
//! format. The exports (`wozkit-data`) write a mapped wizard state as the format's acts and stay
//! within these vocabularies; the loader checks every mapping against them ([`check`]).
//!
//! ```yaml
//! datasets:
//!   multiwoz:
//!     domains: { restaurant: restaurant }       # the study's table / goal domain → MultiWOZ's
//!     slots: { cuisine: food, price_range: pricerange }  # its columns → MultiWOZ state slots
//!     acts:                                     # wizard states, labels, fixed options → acts
//!       greet: general-greet
//!       request_area: { act: Restaurant-Request, slot: Area }
//!       inform_results:
//!         - { act: Restaurant-Inform, slot: Name, column: name }
//!         - { act: Restaurant-Inform, slot: Food, column: cuisine }
//!   taskmaster1: { domain: restaurant-table, scenario: 1 }
//! ```

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::database::Database;
use crate::load::pointer_escape;
use crate::model::Study;

// ------------------------------------------------------------------------------------ model

/// A study's mappings onto the datasets' vocabularies, one per export format. A format without
/// a mapping gets only what the study already says in its names (acts, domains and slots that
/// are the format's); what maps onto nothing stays in the sidecar.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Datasets {
    /// MultiWOZ 2.1: `Domain-Intent` acts (`Restaurant-Inform`, `general-greet`) with its act
    /// slots (`Food`, `Area`, `none`); domains and slots of the `metadata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiwoz: Option<ActMapping>,
    /// CrossWOZ: acts `Domain-Intent` over its five domains (`餐馆-Inform`, `景点-Recommend`)
    /// or `general-<act>` for its general acts (written `["General", act, "none", "none"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crosswoz: Option<ActMapping>,
    /// The ConvLab-3 unified format: acts `domain-intent` with the unified format's intents
    /// (`restaurant-inform`, `general-greet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convlab3: Option<ActMapping>,
    /// Taskmaster-1: the scenario domain that names the `instruction_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taskmaster1: Option<Taskmaster1Mapping>,
}

impl Datasets {
    pub fn is_empty(&self) -> bool {
        self == &Datasets::default()
    }
}

/// How a study's domains, slots and wizard states map onto one format's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActMapping {
    /// The study's domains (database tables, `goals` domain labels) → the format's domains
    /// (MultiWOZ `restaurant`, CrossWOZ `餐馆`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub domains: IndexMap<String, String>,
    /// The study's slots (table columns) → the format's state slots (MultiWOZ `food`,
    /// `pricerange`; CrossWOZ `人均消费`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub slots: IndexMap<String, String>,
    /// Wizard states (by id or label) and fixed options (by id) → the acts a message said with
    /// them is written with: one act or a list.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub acts: IndexMap<String, MappedActs>,
}

/// One act or a list of acts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum MappedActs {
    One(MappedAct),
    Many(Vec<MappedAct>),
}

impl MappedActs {
    /// The acts, each with its place under the mapping's key (`""` for one act, `/N` in a
    /// list).
    pub fn iter(&self) -> Vec<(String, &MappedAct)> {
        match self {
            MappedActs::One(a) => vec![(String::new(), a)],
            MappedActs::Many(list) => list
                .iter()
                .enumerate()
                .map(|(i, a)| (format!("/{i}"), a))
                .collect(),
        }
    }
}

/// An act: its name alone (`general-greet`), or with a slot and where its value comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum MappedAct {
    Name(String),
    Full(ActSpec),
}

impl MappedAct {
    /// The act as a full spec (a bare name has no slot and no value).
    pub fn spec(&self) -> ActSpec {
        match self {
            MappedAct::Name(act) => ActSpec {
                act: act.clone(),
                slot: None,
                column: None,
                table: None,
                value: None,
            },
            MappedAct::Full(spec) => spec.clone(),
        }
    }
}

/// An act with its slot and value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActSpec {
    /// `Domain-Intent` in the format's spelling (`Restaurant-Inform`, `餐馆-Inform`,
    /// `general-greet`).
    pub act: String,
    /// The act's slot in the format (MultiWOZ `Food`, CrossWOZ `名称`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// The value is this column of the row the wizard selected last before the message (of
    /// `table`, or of any table). Without a selected row the act is not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    /// The table whose selected row `column` reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// A fixed value (MultiWOZ's requests are `?`, which is the default there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The Taskmaster-1 scenario of a study's sessions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Taskmaster1Mapping {
    /// One of Taskmaster-1's scenario domains (see [`TM1_DOMAINS`]): `restaurant-table`,
    /// `pizza-ordering`, `auto-repair-appt`, `uber-lyft`, `movie-tickets`, `coffee-ordering`.
    pub domain: String,
    /// The number of the scenario: `instruction_id` is `<domain>-<scenario>`
    /// (`restaurant-table-1`).
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub scenario: u32,
    /// A span-annotation study's slot names → Taskmaster-1 annotation names
    /// (`<api id>.<argument>`, e.g. `restaurant_reservation.num.guests`, optionally with
    /// `.accept` or `.reject`): the names its segments get in a Taskmaster-1 export. Slot names
    /// without an entry are written as they are.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub segments: IndexMap<String, String>,
}

fn one() -> u32 {
    1
}

impl Taskmaster1Mapping {
    /// The `instruction_id` of the study's conversations.
    pub fn instruction_id(&self) -> String {
        format!("{}-{}", self.domain, self.scenario)
    }
}

/// The domain and intent of an act name: `Domain-Intent` split at its first `-`.
pub fn split_act(act: &str) -> Option<(&str, &str)> {
    act.split_once('-')
        .filter(|(d, i)| !d.is_empty() && !i.is_empty())
}

// ------------------------------------------------------------------------------- MultiWOZ

/// MultiWOZ 2.1's domains in the order of a system turn's `metadata`, each with its `book`
/// slots (after `booked`) and its `semi` slots, in the released files' order.
pub const MULTIWOZ_DOMAINS: [(&str, &[&str], &[&str]); 7] = [
    (
        "taxi",
        &[],
        &["leaveAt", "destination", "departure", "arriveBy"],
    ),
    ("police", &[], &[]),
    (
        "restaurant",
        &["time", "day", "people"],
        &["food", "pricerange", "name", "area"],
    ),
    ("hospital", &[], &["department"]),
    (
        "hotel",
        &["stay", "day", "people"],
        &[
            "name",
            "area",
            "parking",
            "pricerange",
            "stars",
            "internet",
            "type",
        ],
    ),
    ("attraction", &[], &["type", "name", "area"]),
    (
        "train",
        &["people"],
        &["leaveAt", "destination", "day", "arriveBy", "departure"],
    ),
];

/// The domains of MultiWOZ 2.1's `Domain-Intent` acts (`general` and `Booking` besides the
/// seven).
pub const MULTIWOZ_ACT_DOMAINS: [&str; 9] = [
    "Attraction",
    "Booking",
    "Hospital",
    "Hotel",
    "Police",
    "Restaurant",
    "Taxi",
    "Train",
    "general",
];

/// The intents of MultiWOZ 2.1's acts of the domains other than `general`.
pub const MULTIWOZ_INTENTS: [&str; 9] = [
    "Inform",
    "Request",
    "Recommend",
    "NoOffer",
    "Select",
    "Book",
    "NoBook",
    "OfferBook",
    "OfferBooked",
];

/// The intents of MultiWOZ 2.1's `general-…` acts.
pub const MULTIWOZ_GENERAL: [&str; 5] = ["greet", "bye", "thank", "welcome", "reqmore"];

/// The slots of MultiWOZ 2.1's acts (`none` for an act without one).
pub const MULTIWOZ_ACT_SLOTS: &[&str] = &[
    "Addr",
    "Area",
    "Arrive",
    "Car",
    "Choice",
    "Day",
    "Department",
    "Depart",
    "Dest",
    "Fee",
    "Food",
    "Id",
    "Internet",
    "Leave",
    "Name",
    "Open",
    "Parking",
    "People",
    "Phone",
    "Post",
    "Price",
    "Ref",
    "Stars",
    "Stay",
    "Ticket",
    "Time",
    "Type",
    "none",
];

/// Whether `name` (`Domain-Intent`) is an act of MultiWOZ 2.1 and `slot` one of its act slots.
pub fn is_multiwoz_act(name: &str, slot: &str) -> bool {
    is_multiwoz_act_name(name) && MULTIWOZ_ACT_SLOTS.contains(&slot)
}

/// Whether `name` (`Domain-Intent`) is an act of MultiWOZ 2.1.
pub fn is_multiwoz_act_name(name: &str) -> bool {
    let Some((domain, intent)) = name.split_once('-') else {
        return false;
    };
    let intent_ok = if domain == "general" {
        MULTIWOZ_GENERAL.contains(&intent)
    } else {
        MULTIWOZ_INTENTS.contains(&intent)
    };
    MULTIWOZ_ACT_DOMAINS.contains(&domain) && intent_ok
}

/// Whether `slot` is a `book` or `semi` slot of the MultiWOZ domain `domain` (of any domain
/// when `domain` is `None`).
pub fn is_multiwoz_slot(domain: Option<&str>, slot: &str) -> bool {
    MULTIWOZ_DOMAINS
        .iter()
        .filter(|(d, _, _)| domain.is_none_or(|x| x == *d))
        .any(|(_, book, semi)| book.contains(&slot) || semi.contains(&slot))
}

// -------------------------------------------------------------------------------- CrossWOZ

/// CrossWOZ's five domains with their system-state slots, in the released files' order
/// (`selectedResults` follows them).
pub const CROSSWOZ_DOMAINS: [(&str, &[&str]); 5] = [
    (
        "景点",
        &[
            "名称",
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
            "名称",
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
            "酒店设施",
            "价格",
            "评分",
            "周边景点",
            "周边餐馆",
            "周边酒店",
        ],
    ),
    ("地铁", &["出发地", "目的地"]),
    ("出租", &["出发地", "目的地"]),
];

/// The act slots of each CrossWOZ domain besides its state slots (from the released
/// `sys_da_voc.json` and `usr_da_voc.json`); a hotel's facility is `酒店设施-<facility>` too.
pub const CROSSWOZ_ACT_SLOTS: [(&str, &[&str]); 5] = [
    ("景点", &["地址", "电话"]),
    ("餐馆", &["地址", "电话", "营业时间"]),
    ("酒店", &["地址", "电话"]),
    ("地铁", &["出发地附近地铁站", "目的地附近地铁站"]),
    ("出租", &["车型", "车牌"]),
];

/// CrossWOZ's act intents (users and system together); `General` acts name their act in the
/// domain position.
pub const CROSSWOZ_INTENTS: &[&str] = &[
    "Inform",
    "Request",
    "General",
    "Select",
    "Recommend",
    "NoOffer",
];

/// CrossWOZ's general acts.
pub const CROSSWOZ_GENERAL: [&str; 5] = ["greet", "thank", "bye", "welcome", "reqmore"];

/// Whether `[intent, domain, slot, value]` is within CrossWOZ's vocabulary: a known intent, and
/// a general act or one of the five domains.
pub fn is_crosswoz_act(intent: &str, domain: &str) -> bool {
    if intent == "General" {
        return CROSSWOZ_GENERAL.contains(&domain);
    }
    CROSSWOZ_INTENTS.contains(&intent) && CROSSWOZ_DOMAINS.iter().any(|(d, _)| *d == domain)
}

/// The slots of a CrossWOZ domain's system state; `None` for a domain CrossWOZ lacks.
pub fn crosswoz_slots(domain: &str) -> Option<&'static [&'static str]> {
    CROSSWOZ_DOMAINS
        .iter()
        .find(|(d, _)| *d == domain)
        .map(|(_, s)| *s)
}

/// Whether `slot` is an act slot of the CrossWOZ domain `domain` (`none` for an act without
/// one, `源领域` for `Select`).
pub fn is_crosswoz_act_slot(domain: &str, slot: &str) -> bool {
    if slot == "none" || slot == "源领域" {
        return true;
    }
    let state = crosswoz_slots(domain).is_some_and(|s| s.contains(&slot));
    let acts = CROSSWOZ_ACT_SLOTS
        .iter()
        .any(|(d, s)| *d == domain && s.contains(&slot));
    let facility = domain == "酒店" && slot.starts_with("酒店设施-");
    state || acts || facility
}

// ----------------------------------------------------------------------------- ConvLab-3

/// The intents of the ConvLab-3 unified format's dialogue acts (those of its MultiWOZ 2.1 and
/// Taskmaster-1 conversions, in lower case; `general` takes the general ones).
pub const CONVLAB3_INTENTS: &[&str] = &[
    "inform",
    "request",
    "recommend",
    "nooffer",
    "select",
    "book",
    "nobook",
    "offerbook",
    "offerbooked",
    "accept",
    "reject",
];

/// The intents of ConvLab-3's acts of the `general` domain.
pub const CONVLAB3_GENERAL: [&str; 6] = ["greet", "bye", "thank", "welcome", "reqmore", "reqalts"];

/// Whether `domain-intent` is an act the unified format's checker and models know: a general
/// act of `general`, or one of [`CONVLAB3_INTENTS`] of another domain.
pub fn is_convlab3_act(domain: &str, intent: &str) -> bool {
    if domain == "general" {
        CONVLAB3_GENERAL.contains(&intent)
    } else {
        !domain.trim().is_empty() && CONVLAB3_INTENTS.contains(&intent)
    }
}

// --------------------------------------------------------------------------- Taskmaster-1

/// Taskmaster-1's scenario domains, the prefix of its `instruction_id`s
/// (`restaurant-table-2`), each with the api id of its ontology (`restaurant_reservation`).
pub const TM1_DOMAINS: [(&str, &str); 6] = [
    ("restaurant-table", "restaurant_reservation"),
    ("pizza-ordering", "pizza_ordering"),
    ("auto-repair-appt", "auto_repair"),
    ("uber-lyft", "uber_lyft"),
    ("movie-tickets", "movie_ticket"),
    ("coffee-ordering", "coffee_ordering"),
];

/// Taskmaster-1's ontology (`ontology.json`): each api id with its arguments, required and
/// optional.
pub const TM1_ARGUMENTS: [(&str, &[&str]); 6] = [
    (
        "uber_lyft",
        &[
            "location.from",
            "location.to",
            "type.ride",
            "num.people",
            "price.estimate",
            "duration.estimate",
            "time.pickup",
            "time.dropoff",
        ],
    ),
    (
        "movie_ticket",
        &[
            "name.movie",
            "name.theater",
            "num.tickets",
            "time.start",
            "location.theater",
            "price.ticket",
            "type.screening",
            "time.end",
            "time.duration",
        ],
    ),
    (
        "restaurant_reservation",
        &[
            "name.restaurant",
            "name.reservation",
            "num.guests",
            "time.reservation",
            "type.seating",
            "location.restaurant",
        ],
    ),
    (
        "coffee_ordering",
        &[
            "location.store",
            "name.drink",
            "size.drink",
            "num.drink",
            "type.milk",
            "preference",
        ],
    ),
    (
        "pizza_ordering",
        &[
            "name.store",
            "name.pizza",
            "size.pizza",
            "type.topping",
            "type.crust",
            "preference",
            "location.store",
        ],
    ),
    (
        "auto_repair",
        &[
            "name.store",
            "name.customer",
            "date.appt",
            "time.appt",
            "reason.appt",
            "name.vehicle",
            "year.vehicle",
            "location.store",
        ],
    ),
];

/// Whether `name` is a Taskmaster-1 annotation name: `<api id>.<argument>` of its ontology,
/// optionally followed by `.accept` or `.reject`.
pub fn is_tm1_annotation(name: &str) -> bool {
    let name = name
        .strip_suffix(".accept")
        .or_else(|| name.strip_suffix(".reject"))
        .unwrap_or(name);
    let Some((api, argument)) = name.split_once('.') else {
        return false;
    };
    TM1_ARGUMENTS
        .iter()
        .any(|(id, args)| *id == api && args.contains(&argument))
}

/// Every Taskmaster-1 annotation name without `.accept`/`.reject`.
fn tm1_annotations() -> Vec<String> {
    TM1_ARGUMENTS
        .iter()
        .flat_map(|(api, args)| args.iter().map(move |a| format!("{api}.{a}")))
        .collect()
}

// ------------------------------------------------------------------------------- checking

/// The problems of `study.datasets` as `(pointer, message, hint)`: every mapped source (a
/// wizard state or label, a fixed option, a table or goal domain, a column) must be the
/// study's, and every target (domain, slot, act) the format's. `db` is the study's loaded
/// database (tables and columns are looked up in it).
pub fn check(study: &Study, db: Option<&Database>) -> Vec<(String, String, Option<String>)> {
    let mut out = vec![];
    let d = &study.datasets;
    let ctx = Sources::of(study, db);
    if let Some(m) = &d.multiwoz {
        check_mapping(&ctx, Format::MultiWoz, m, &mut out);
    }
    if let Some(m) = &d.crosswoz {
        check_mapping(&ctx, Format::CrossWoz, m, &mut out);
    }
    if let Some(m) = &d.convlab3 {
        check_mapping(&ctx, Format::ConvLab3, m, &mut out);
    }
    if let Some(tm) = &d.taskmaster1 {
        check_segments(study, tm, &mut out);
    }
    if let Some(tm) = &d.taskmaster1
        && !TM1_DOMAINS.iter().any(|(name, _)| *name == tm.domain)
    {
        out.push((
            "/datasets/taskmaster1/domain".into(),
            format!("`{}` is not a Taskmaster-1 scenario domain", tm.domain),
            Some(one_of(&tm.domain, TM1_DOMAINS.iter().map(|(n, _)| *n))),
        ));
    }
    out
}

/// Every mapped segment name is a span slot of the study and maps onto a Taskmaster-1
/// annotation name.
fn check_segments(
    study: &Study,
    tm: &Taskmaster1Mapping,
    out: &mut Vec<(String, String, Option<String>)>,
) {
    let slots: Vec<&str> = study
        .evaluation
        .as_ref()
        .and_then(|e| e.spans.as_ref())
        .map(|s| s.slots.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let known = tm1_annotations();
    for (slot, name) in &tm.segments {
        let at = format!("/datasets/taskmaster1/segments/{}", pointer_escape(slot));
        if !slots.contains(&slot.as_str()) {
            out.push((
                at.clone(),
                format!("`{slot}` is not a span slot of this study"),
                Some(if slots.is_empty() {
                    "segments map the slot names of a span-annotation study (evaluation.spans.slots)"
                        .into()
                } else {
                    one_of(slot, slots.iter().copied())
                }),
            ));
        }
        if !is_tm1_annotation(name) {
            out.push((
                at,
                format!("`{name}` is not a Taskmaster-1 annotation name (`<api id>.<argument>`)"),
                Some(format!(
                    "an argument of Taskmaster-1's ontology, e.g. `restaurant_reservation.num.guests`{}",
                    did_you_mean(name, known.iter().map(String::as_str))
                )),
            ));
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    MultiWoz,
    CrossWoz,
    ConvLab3,
}

impl Format {
    fn key(self) -> &'static str {
        match self {
            Format::MultiWoz => "multiwoz",
            Format::CrossWoz => "crosswoz",
            Format::ConvLab3 => "convlab3",
        }
    }
}

/// What a mapping may name on the study's side.
struct Sources<'a> {
    /// State ids, state labels and fixed option ids.
    said: Vec<&'a str>,
    /// Tables and goal domain labels.
    domains: Vec<String>,
    /// Columns by table.
    columns: Vec<(String, Vec<String>)>,
    has_db: bool,
}

impl<'a> Sources<'a> {
    fn of(study: &'a Study, db: Option<&Database>) -> Sources<'a> {
        let mut said: Vec<&str> = vec![];
        for s in &study.states {
            for name in [s.id.as_str(), s.label()] {
                if !said.contains(&name) {
                    said.push(name);
                }
            }
        }
        said.extend(study.fixed_options.iter().map(|o| o.id.as_str()));
        let columns: Vec<(String, Vec<String>)> = db
            .map(|db| {
                db.tables()
                    .iter()
                    .map(|(name, t)| {
                        let cols = t.columns.iter().map(|(c, _)| c.clone()).collect();
                        (name.clone(), cols)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut domains: Vec<String> = columns.iter().map(|(t, _)| t.clone()).collect();
        if let Some(goals) = &study.goals {
            domains.extend(goals.domains.iter().filter_map(|d| d.label.clone()));
        }
        Sources {
            said,
            domains,
            columns,
            has_db: db.is_some(),
        }
    }

    fn column_names(&self, table: Option<&str>) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .columns
            .iter()
            .filter(|(t, _)| table.is_none_or(|x| x == t))
            .flat_map(|(_, c)| c.iter().map(String::as_str))
            .collect();
        out.dedup();
        out
    }
}

fn names<'a>(list: impl IntoIterator<Item = &'a str>) -> String {
    list.into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A hint listing `candidates`, with the loader's suggestion for `word` when it has one.
fn one_of<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str> + Clone) -> String {
    format!(
        "one of {}{}",
        names(candidates.clone()),
        did_you_mean(word, candidates)
    )
}

/// The loader's suggestion as the end of a hint (`; did you mean …?`), or nothing.
fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    crate::load::did_you_mean(word, candidates)
        .map(|h| format!("; {h}"))
        .unwrap_or_default()
}

/// Problems of one format's act mapping: its domains, its slots and its acts.
fn check_mapping(
    ctx: &Sources<'_>,
    format: Format,
    m: &ActMapping,
    out: &mut Vec<(String, String, Option<String>)>,
) {
    let base = format!("/datasets/{}", format.key());
    // Domains: the study's → the format's.
    let format_domains: Vec<&str> = match format {
        Format::MultiWoz => MULTIWOZ_DOMAINS.iter().map(|(d, _, _)| *d).collect(),
        Format::CrossWoz => CROSSWOZ_DOMAINS.iter().map(|(d, _)| *d).collect(),
        Format::ConvLab3 => vec![],
    };
    for (ours, theirs) in &m.domains {
        let ptr = format!("{base}/domains/{}", pointer_escape(ours));
        check_mapped_domain(ctx, format, &format_domains, ptr, ours, theirs, out);
    }
    // Slots: the study's columns → the format's state slots.
    // Slots are looked up in the mapped domains that are the format's (in all when none is).
    let mapped: Vec<&str> = m
        .domains
        .values()
        .map(String::as_str)
        .filter(|d| format_domains.contains(d))
        .collect();
    for (ours, theirs) in &m.slots {
        let ptr = format!("{base}/slots/{}", pointer_escape(ours));
        check_mapped_slot(ctx, format, &mapped, ptr, ours, theirs, out);
    }
    // Acts: the study's states and options → the format's acts.
    for (said, acts) in &m.acts {
        let key_ptr = format!("{base}/acts/{}", pointer_escape(said));
        if !ctx.said.contains(&said.as_str()) {
            out.push((
                key_ptr.clone(),
                format!("`{said}` is not a wizard state, state label or fixed option of the study"),
                Some(format!(
                    "map what the wizard says: {}{}",
                    names(ctx.said.iter().copied().take(12)),
                    did_you_mean(said, ctx.said.iter().copied())
                )),
            ));
        }
        for (place, act) in acts.iter() {
            let ptr = format!("{key_ptr}{place}");
            let spec = act.spec();
            let field = |f: &str| match act {
                MappedAct::Name(_) => ptr.clone(),
                MappedAct::Full(_) => format!("{ptr}/{f}"),
            };
            check_act(ctx, format, &spec, &field, out);
        }
    }
}

/// Problems of a mapping from the study's domain `ours` to the format's domain `theirs`.
fn check_mapped_domain(
    ctx: &Sources<'_>,
    format: Format,
    format_domains: &[&str],
    ptr: String,
    ours: &str,
    theirs: &str,
    out: &mut Vec<(String, String, Option<String>)>,
) {
    if !ctx.domains.iter().any(|d| d == ours) {
        out.push((
            ptr.clone(),
            format!("`{ours}` is not a domain of the study (a database table or a goal domain)"),
            Some(if ctx.domains.is_empty() {
                "the study has no database tables or goal domains to map".into()
            } else {
                format!(
                    "the study's domains: {}",
                    names(ctx.domains.iter().map(String::as_str))
                )
            }),
        ));
    }
    if format != Format::ConvLab3 && !format_domains.contains(&theirs) {
        out.push((
            ptr,
            format!("`{theirs}` is not a {} domain", format_name(format)),
            Some(one_of(theirs, format_domains.iter().copied())),
        ));
    }
}

/// Problems of a mapping from the study's column `ours` to the format's state slot `theirs`,
/// looked up in the `mapped` domains (in all when there are none).
fn check_mapped_slot(
    ctx: &Sources<'_>,
    format: Format,
    mapped: &[&str],
    ptr: String,
    ours: &str,
    theirs: &str,
    out: &mut Vec<(String, String, Option<String>)>,
) {
    let columns = ctx.column_names(None);
    if !columns.contains(&ours) {
        out.push((
            ptr.clone(),
            format!("`{ours}` is not a column of the study's database"),
            Some(if ctx.has_db {
                format!(
                    "the columns: {}{}",
                    names(columns.iter().copied()),
                    did_you_mean(ours, columns.iter().copied())
                )
            } else {
                "slots map the columns of the study's `database:` tables, and the study has none"
                    .into()
            }),
        ));
    }
    if !is_state_slot(format, mapped, theirs) {
        let all = state_slots(format, mapped);
        out.push((
            ptr,
            format!(
                "`{theirs}` is not a state slot of {}{}",
                format_name(format),
                if mapped.is_empty() {
                    String::new()
                } else {
                    format!(" in {}", names(mapped.iter().copied()))
                }
            ),
            Some(one_of(theirs, all.iter().copied())),
        ));
    }
}

/// Whether `slot` is a state slot of the format in the `mapped` domains (in any when there are
/// none); for ConvLab-3, any slot that is not blank.
fn is_state_slot(format: Format, mapped: &[&str], slot: &str) -> bool {
    match format {
        Format::MultiWoz => {
            if mapped.is_empty() {
                is_multiwoz_slot(None, slot)
            } else {
                mapped.iter().any(|d| is_multiwoz_slot(Some(d), slot))
            }
        }
        Format::CrossWoz => CROSSWOZ_DOMAINS
            .iter()
            .filter(|(d, _)| mapped.is_empty() || mapped.contains(d))
            .any(|(_, s)| s.contains(&slot)),
        Format::ConvLab3 => !slot.trim().is_empty(),
    }
}

/// The format's state slots in the `mapped` domains (in all when there are none), for a hint.
fn state_slots(format: Format, mapped: &[&str]) -> Vec<&'static str> {
    match format {
        Format::MultiWoz => {
            let mut v: Vec<&str> = MULTIWOZ_DOMAINS
                .iter()
                .filter(|(d, _, _)| mapped.is_empty() || mapped.contains(d))
                .flat_map(|(_, b, s)| b.iter().chain(s.iter()).copied())
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        }
        Format::CrossWoz => {
            let mut v: Vec<&str> = CROSSWOZ_DOMAINS
                .iter()
                .filter(|(d, _)| mapped.is_empty() || mapped.contains(d))
                .flat_map(|(_, s)| s.iter().copied())
                .collect();
            v.dedup();
            v
        }
        Format::ConvLab3 => vec![],
    }
}

fn format_name(format: Format) -> &'static str {
    match format {
        Format::MultiWoz => "MultiWOZ 2.1",
        Format::CrossWoz => "CrossWOZ",
        Format::ConvLab3 => "ConvLab-3",
    }
}

/// Problems of one mapped act: its name and slot against the format, then the table, column and
/// value it reads.
fn check_act(
    ctx: &Sources<'_>,
    format: Format,
    spec: &ActSpec,
    field: &dyn Fn(&str) -> String,
    out: &mut Vec<(String, String, Option<String>)>,
) {
    let name = spec.act.as_str();
    let Some((domain, intent)) = split_act(name) else {
        out.push((
            field("act"),
            format!("act `{name}` is not `Domain-Intent`"),
            Some(match format {
                Format::MultiWoz => "e.g. `Restaurant-Inform` or `general-greet`".into(),
                Format::CrossWoz => "e.g. `餐馆-Inform` or `general-greet`".into(),
                Format::ConvLab3 => "e.g. `restaurant-inform` or `general-greet`".into(),
            }),
        ));
        return;
    };
    let act = NamedAct {
        name,
        domain,
        intent,
        slot: spec.slot.as_deref(),
    };
    match format {
        Format::MultiWoz => check_multiwoz_act(&act, field, out),
        Format::CrossWoz => check_crosswoz_act(&act, field, out),
        Format::ConvLab3 => check_convlab3_act(&act, field, out),
    }
    check_act_source(ctx, spec, field, out);
}

/// A mapped act's name, its halves and its slot.
struct NamedAct<'a> {
    name: &'a str,
    domain: &'a str,
    intent: &'a str,
    slot: Option<&'a str>,
}

/// Problems of a mapped act's name and slot against MultiWOZ 2.1's acts.
fn check_multiwoz_act(
    act: &NamedAct<'_>,
    field: &dyn Fn(&str) -> String,
    out: &mut Vec<(String, String, Option<String>)>,
) {
    let NamedAct {
        name,
        domain,
        intent,
        slot,
    } = *act;
    if !is_multiwoz_act_name(name) {
        let hint = if MULTIWOZ_ACT_DOMAINS.contains(&domain) {
            let intents: &[&str] = if domain == "general" {
                &MULTIWOZ_GENERAL
            } else {
                &MULTIWOZ_INTENTS
            };
            format!(
                "MultiWOZ's intents of `{domain}`: {}{}",
                names(intents.iter().copied()),
                did_you_mean(intent, intents.iter().copied())
            )
        } else {
            format!(
                "MultiWOZ's act domains: {}{}",
                names(MULTIWOZ_ACT_DOMAINS.iter().copied()),
                did_you_mean(domain, MULTIWOZ_ACT_DOMAINS.iter().copied())
            )
        };
        out.push((
            field("act"),
            format!("`{name}` is not a MultiWOZ 2.1 act"),
            Some(hint),
        ));
    }
    if let Some(slot) = slot
        && !MULTIWOZ_ACT_SLOTS.contains(&slot)
    {
        out.push((
            field("slot"),
            format!("`{slot}` is not a slot of MultiWOZ 2.1's acts"),
            Some(one_of(slot, MULTIWOZ_ACT_SLOTS.iter().copied())),
        ));
    }
}

/// Problems of a mapped act's name and slot against CrossWOZ's acts.
fn check_crosswoz_act(
    act: &NamedAct<'_>,
    field: &dyn Fn(&str) -> String,
    out: &mut Vec<(String, String, Option<String>)>,
) {
    let NamedAct {
        name,
        domain,
        intent,
        slot,
    } = *act;
    let domains: Vec<&str> = CROSSWOZ_DOMAINS.iter().map(|(d, _)| *d).collect();
    let ok = if domain == "general" {
        CROSSWOZ_GENERAL.contains(&intent)
    } else {
        domains.contains(&domain) && CROSSWOZ_INTENTS.contains(&intent) && intent != "General"
    };
    if !ok {
        let hint = if domain == "general" {
            format!(
                "CrossWOZ's general acts: {}",
                names(CROSSWOZ_GENERAL.iter().copied())
            )
        } else if !domains.contains(&domain) {
            format!(
                "CrossWOZ's domains: {}, or `general`",
                names(domains.iter().copied())
            )
        } else {
            format!(
                "CrossWOZ's intents: {}{}",
                names(CROSSWOZ_INTENTS.iter().copied().filter(|i| *i != "General")),
                did_you_mean(intent, CROSSWOZ_INTENTS.iter().copied())
            )
        };
        out.push((
            field("act"),
            format!("`{name}` is not a CrossWOZ act"),
            Some(hint),
        ));
    } else if let Some(slot) = slot
        && domain != "general"
        && !is_crosswoz_act_slot(domain, slot)
    {
        let slots = crosswoz_slots(domain).unwrap_or_default().iter().chain(
            CROSSWOZ_ACT_SLOTS
                .iter()
                .filter(|(d, _)| *d == domain)
                .flat_map(|(_, s)| s.iter()),
        );
        out.push((
            field("slot"),
            format!("`{slot}` is not a slot of CrossWOZ's {domain} acts"),
            Some(format!("the slots of {domain}: {}", names(slots.copied()))),
        ));
    }
}

/// Problems of a mapped act's name against the ConvLab-3 unified format's acts.
fn check_convlab3_act(
    act: &NamedAct<'_>,
    field: &dyn Fn(&str) -> String,
    out: &mut Vec<(String, String, Option<String>)>,
) {
    let NamedAct {
        name,
        domain,
        intent,
        ..
    } = *act;
    if !is_convlab3_act(domain, intent) {
        let list: Vec<&str> = if domain == "general" {
            CONVLAB3_GENERAL.to_vec()
        } else {
            CONVLAB3_INTENTS.to_vec()
        };
        out.push((
            field("act"),
            format!("`{name}` is not an act of the ConvLab-3 unified format"),
            Some(format!(
                "the intents{}: {}{}",
                if domain == "general" {
                    " of `general`"
                } else {
                    ""
                },
                names(list.iter().copied()),
                did_you_mean(intent, list.iter().copied())
            )),
        ));
    }
}

/// Problems of where a mapped act reads its value: its table, its column, and a value given
/// beside a column.
fn check_act_source(
    ctx: &Sources<'_>,
    spec: &ActSpec,
    field: &dyn Fn(&str) -> String,
    out: &mut Vec<(String, String, Option<String>)>,
) {
    if let Some(table) = &spec.table
        && !ctx.columns.iter().any(|(t, _)| t == table)
    {
        out.push((
            field("table"),
            format!("`{table}` is not a table of the study's database"),
            Some(format!(
                "the tables: {}",
                names(ctx.columns.iter().map(|(t, _)| t.as_str()))
            )),
        ));
    }
    if let Some(column) = &spec.column {
        let columns = ctx.column_names(spec.table.as_deref());
        if !columns.contains(&column.as_str()) {
            out.push((
                field("column"),
                format!(
                    "`{column}` is not a column of {}",
                    spec.table
                        .as_deref()
                        .map_or("the study's database".to_string(), |t| format!(
                            "table `{t}`"
                        ))
                ),
                Some(if ctx.has_db {
                    format!(
                        "the columns: {}{}",
                        names(columns.iter().copied()),
                        did_you_mean(column, columns.iter().copied())
                    )
                } else {
                    "`column` reads the row the wizard selected, and the study has no `database:`"
                        .into()
                }),
            ));
        }
        if spec.value.is_some() {
            out.push((
                field("value"),
                "an act takes its value from `column` or `value`, not both".into(),
                None,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiwoz_acts_are_those_of_the_released_files() {
        // `Restaurant-Inform` with `Food` is among the commonest acts of MultiWOZ 2.1.
        assert!(is_multiwoz_act("Restaurant-Inform", "Food"));
        assert!(is_multiwoz_act("Attraction-Request", "Fee"));
        assert!(is_multiwoz_act("general-greet", "none"));
        assert!(!is_multiwoz_act("general-ask_area", "none"));
        assert!(!is_multiwoz_act("景点-Inform", "Fee"));
        assert!(!is_multiwoz_act("Hotel-Inform", "Address"));
    }

    #[test]
    fn crosswoz_act_slots_include_the_released_ones() {
        assert!(is_crosswoz_act_slot("餐馆", "营业时间"));
        assert!(is_crosswoz_act_slot("酒店", "酒店设施-SPA"));
        assert!(is_crosswoz_act_slot("出租", "车型"));
        assert!(!is_crosswoz_act_slot("景点", "营业时间"));
        assert!(!is_crosswoz_act_slot("餐馆", "领域"));
    }

    #[test]
    fn tm1_instruction_ids_carry_the_scenario_domain() {
        let m = Taskmaster1Mapping {
            domain: "restaurant-table".into(),
            scenario: 2,
            segments: IndexMap::new(),
        };
        assert_eq!(m.instruction_id(), "restaurant-table-2");
    }
}
