//! The vocabularies of the released datasets that exports must stay within: MultiWOZ 2.1's seven
//! domains with their belief-state slots (`metadata`), its act domains, intents and slots, and
//! CrossWOZ's five domains with their system-state slots and its intents. A study's act, domain
//! or slot outside these is never written as if it were the format's; the sidecar keeps the
//! event it came from (see `docs/datasets.md`).

use serde_json::{Value, json};

use super::record::Fields;

/// MultiWOZ 2.1's domains in the order of a system turn's `metadata`, each with its `book`
/// slots (after `booked`) and its `semi` slots, in the released files' order.
pub(crate) const MULTIWOZ_DOMAINS: [(&str, &[&str], &[&str]); 7] = [
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
pub(crate) const MULTIWOZ_ACT_DOMAINS: [&str; 9] = [
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
pub(crate) const MULTIWOZ_INTENTS: [&str; 9] = [
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
pub(crate) const MULTIWOZ_GENERAL: [&str; 5] = ["greet", "bye", "thank", "welcome", "reqmore"];

/// The slots of MultiWOZ 2.1's acts (`none` for an act without one).
pub(crate) const MULTIWOZ_ACT_SLOTS: &[&str] = &[
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
pub(crate) fn is_multiwoz_act(name: &str, slot: &str) -> bool {
    let Some((domain, intent)) = name.split_once('-') else {
        return false;
    };
    let intent_ok = if domain == "general" {
        MULTIWOZ_GENERAL.contains(&intent)
    } else {
        MULTIWOZ_INTENTS.contains(&intent)
    };
    MULTIWOZ_ACT_DOMAINS.contains(&domain) && intent_ok && MULTIWOZ_ACT_SLOTS.contains(&slot)
}

/// A system turn's `metadata` with every domain and slot of the released files, each value
/// `""` (untouched), then `set(domain, part, slot)` giving a value where the session has one.
pub(crate) fn multiwoz_metadata(set: impl Fn(&str, &str, &str) -> Option<String>) -> Value {
    let mut meta = Fields::new();
    for (domain, book, semi) in MULTIWOZ_DOMAINS {
        let mut b = Fields::new();
        b.insert("booked".into(), json!([]));
        for slot in book {
            let v = set(domain, "book", slot).unwrap_or_default();
            b.insert((*slot).into(), json!(v));
        }
        let mut s = Fields::new();
        for slot in semi {
            let v = set(domain, "semi", slot).unwrap_or_default();
            s.insert((*slot).into(), json!(v));
        }
        meta.insert(domain.into(), json!({"book": b, "semi": s}));
    }
    Value::Object(meta)
}

/// CrossWOZ's five domains with their system-state slots, in the released files' order
/// (`selectedResults` follows them).
pub(crate) const CROSSWOZ_DOMAINS: [(&str, &[&str]); 5] = [
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

/// CrossWOZ's act intents (users and system together); `General` acts name their act in the
/// domain position.
pub(crate) const CROSSWOZ_INTENTS: &[&str] = &[
    "Inform",
    "Request",
    "General",
    "Select",
    "Recommend",
    "NoOffer",
];

/// CrossWOZ's general acts.
pub(crate) const CROSSWOZ_GENERAL: [&str; 5] = ["greet", "thank", "bye", "welcome", "reqmore"];

/// Whether `[intent, domain, slot, value]` is within CrossWOZ's vocabulary: a known intent, and
/// a general act or one of the five domains.
pub(crate) fn is_crosswoz_act(intent: &str, domain: &str) -> bool {
    if intent == "General" {
        return CROSSWOZ_GENERAL.contains(&domain);
    }
    CROSSWOZ_INTENTS.contains(&intent) && CROSSWOZ_DOMAINS.iter().any(|(d, _)| *d == domain)
}

/// The slots of a CrossWOZ domain's system state; `None` for a domain CrossWOZ lacks.
pub(crate) fn crosswoz_slots(domain: &str) -> Option<&'static [&'static str]> {
    CROSSWOZ_DOMAINS
        .iter()
        .find(|(d, _)| *d == domain)
        .map(|(_, s)| *s)
}

#[cfg(test)]
mod tests {
    use super::is_multiwoz_act;

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
}
