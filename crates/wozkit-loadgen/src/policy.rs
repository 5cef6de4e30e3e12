//! What a simulated participant does next, from the latest `view` it was sent. Pure, so it is
//! tested without a server. The wizard plays like a hurried person: mostly an offered option,
//! sometimes a robot action the panel allows, a fixed phrase or free text; the user chats, and
//! answers approval prompts. Only commands the view says are possible are chosen, so refusals
//! in a run point at the server (or at a view that changed in flight), not at the bench.

use serde::Deserialize;
use serde_json::{Value, json};

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
    #[serde(default)]
    pub actions: Vec<ActionHead>,
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

/// The `cmd` object to send next (the part inside `{"type":"cmd","id":…,"cmd":…}`), or `None`
/// when this role has nothing it may do now (the user before the wizard spoke, a finished
/// session).
pub fn next_command(role: Role, view: &ViewHead, dice: &mut Dice) -> Option<Value> {
    if view.ended.is_some() {
        return None;
    }
    match role {
        Role::User => user(view, dice),
        Role::Wizard => Some(wizard(view, dice)),
    }
}

fn user(view: &ViewHead, dice: &mut Dice) -> Option<Value> {
    if view.lock.as_ref().is_some_and(|l| l.kind == "approval") {
        let answer = if dice.unit() < 0.8 { "approve" } else { "deny" };
        return Some(json!({ "cmd": answer }));
    }
    if view.muted {
        return None;
    }
    let line = USER_LINES[dice.below(USER_LINES.len())];
    Some(json!({ "cmd": "text", "text": line }))
}

fn wizard(view: &ViewHead, dice: &mut Dice) -> Value {
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
