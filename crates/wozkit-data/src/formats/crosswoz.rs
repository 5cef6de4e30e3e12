//! CrossWOZ: one JSON object keyed by dialogue id (`test.json`, usually inside `test.json.zip`).
//! Goals, task descriptions and the goal type ride in `crosswoz.dialogue`; each message's
//! `dialog_act`, `user_state` or `sys_state`/`sys_state_init` in `crosswoz.turn`.
//!
//! Sessions from elsewhere are keyed by session id, with `sys-usr` `[0, 0]` (no integer worker
//! aliases are known), empty goals, a labelled wizard message as the general act
//! `["General", label, "none", "none"]`, and the empty five-domain state on wizard turns. Speakers
//! are written as they come, not forced to alternate. A session that drew a scenario gets one
//! `task description` line per drawn or computed world variable and the extra key `scenario`
//! after `type` (see [`super::scenario`]). A session with a user goal gets its goal, final goal,
//! goal type, per-turn user and system states and the derived `Inform`, `Recommend`, `NoOffer`
//! and `Request` acts (see `goal_state.rs`).
//! Timestamps, act types and every other event go to the sidecar.

use std::io::Write;

use serde_json::{Value, json};
use wozkit_core::event::Role;

use super::goal_state;
use super::record::{
    Defaults, Fields, Layout, export_keyed, export_record, import_keyed, wizard_label,
};
use super::scenario::{self, SCENARIO_KEY};
use crate::error::{ExportError, ImportError};
use crate::input::Input;
use crate::session::{Format, ImportedSession, Turn};

const LAYOUT: Layout = Layout {
    format: Format::CrossWoz,
    turns_key: "messages",
    speaker: Some(("role", "usr", "sys")),
    text_key: "content",
    head: &["content", "role"],
};

/// Reads CrossWOZ JSON, zipped or not.
pub fn import_crosswoz(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    import_keyed(&LAYOUT, input)
}

/// Writes CrossWOZ JSON (indent 4, the layout of the released files). Wrap it with
/// [`crate::write_zipped`] for the `.json.zip` form.
pub fn export_crosswoz(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    export_keyed(&LAYOUT, sessions, out, 4, &CrossWozDefaults)
}

/// One dialogue's record (the value under its id).
pub(crate) fn record(session: &ImportedSession, index: usize) -> Result<Fields, ExportError> {
    export_record(&LAYOUT, session, index, &CrossWozDefaults)
}

struct CrossWozDefaults;

impl Defaults for CrossWozDefaults {
    fn record(&self, session: &ImportedSession, _index: usize) -> Fields {
        let value = json!({
            "sys-usr": [0, 0],
            "goal": [],
            "messages": null,
            "final_goal": [],
            "task description": [],
            "type": "",
        });
        let mut record = value.as_object().cloned().unwrap_or_default();
        if let Some(drawn) = scenario::logged(session) {
            let lines = drawn.lines(|v| v.to_string());
            record.insert("task description".into(), json!(lines));
            record.insert(SCENARIO_KEY.into(), drawn.to_value());
        }
        goal_state::crosswoz_record(session, &mut record);
        record
    }

    fn turn(
        &self,
        session: &ImportedSession,
        _position: usize,
        role: Role,
        turn: Option<&Turn<'_>>,
    ) -> Fields {
        let acts: Vec<Value> = wizard_label(turn)
            .map(|label| json!(["General", label, "none", "none"]))
            .into_iter()
            .collect();
        let mut fields = Fields::new();
        fields.insert("dialog_act".into(), Value::Array(acts));
        match role {
            Role::User => {
                fields.insert("user_state".into(), json!([]));
            }
            Role::Wizard => {
                fields.insert("sys_state".into(), empty_sys_state());
                fields.insert("sys_state_init".into(), empty_sys_state());
            }
        }
        goal_state::crosswoz_turn(session, role, turn, &mut fields, &empty_sys_state());
        fields
    }
}

/// The wizard's DB state before any query: all five domains, every slot unconstrained.
fn empty_sys_state() -> Value {
    const DOMAINS: [(&str, &[&str]); 5] = [
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
    let mut state = Fields::new();
    for (domain, slots) in DOMAINS {
        let mut fields: Fields = slots.iter().map(|s| (s.to_string(), json!(""))).collect();
        fields.insert("selectedResults".into(), json!([]));
        state.insert(domain.into(), Value::Object(fields));
    }
    Value::Object(state)
}
