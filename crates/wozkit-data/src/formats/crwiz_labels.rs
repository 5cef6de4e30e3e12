//! The CRWIZ wizard labels (offshore emergency scenario) and their dialogue-act types, as grouped
//! by `action_types_dict` of the LvC repository: `request` → Request, `interaction` →
//! Interaction, `actions` → Action, `robot_updates` and `situation_updates` → Update. `UNK` is
//! typed free text; labels in no group have no type.

use wozkit_core::event::MessageSource;
use wozkit_core::model::ActType;

/// The label CRWIZ writes for a message the wizard typed.
pub const FREE_TEXT_LABEL: &str = "UNK";

/// The options a CRWIZ wizard could always choose, whatever the dialogue state.
const FIXED: [&str; 7] = [
    "okay",
    "yes",
    "no",
    "holdon2seconds",
    "actionperformed",
    "sorrycanyourepeatthat",
    "idonthavethatinformationatthemoment",
];

const REQUEST: [&str; 5] = [
    "request_pa_announcement",
    "request_robot_inspect_damage",
    "request_robot_emergency",
    "request_robot_type",
    "request_grounding_location",
];

const INTERACTION: [&str; 19] = [
    "okay",
    "holdon2seconds",
    "BC",
    "intro_hello",
    "gesture_emotion_neutral",
    "sorrycanyourepeatthat",
    "yes",
    "no",
    "idonthavethatinformationatthemoment",
    "request_attention",
    "actionperformed",
    "info_not_available",
    "db_query",
    "inform_emergency_robot",
    "inform_damage_inspection_robot",
    "request_repeat",
    "start",
    "confirm_availability",
    "ack_misunderstood",
];

const ACTION: [&str; 10] = [
    "inform_moving",
    "inform_arrival",
    "inform_inspection",
    "inform_returning_to_base",
    "inform_activate_emergency_shutdown",
    "inform_emergency_action",
    "inform_damage_inspection",
    "inform_deactivate_emergency_shutdown",
    "activate.robot",
    "deactivate.robot",
];

const UPDATE: [&str; 27] = [
    // robot_updates
    "inform_robot_crash",
    "inform_robot_wait",
    "inform_robot_eta",
    "inform_robot_progress",
    "inform_robot_status",
    "inform_robot_available",
    "inform_robot_battery",
    "inform_robot_not_available",
    "inform_robot_velocity",
    "inform_robot_capabilities",
    "inform_robot_location",
    // situation_updates
    "inform_time_left",
    "inform_alert_emergency",
    "inform_emergency_status",
    "inform_risk_spreading",
    "inform_emergency_solved",
    "inform_risk",
    "inform_mission_completed",
    "inform_plan_selected",
    "mission_timeout",
    "inform_wind",
    "inform_no_risk_spreading",
    "inform_symptom",
    "inform_action",
    "inform_error",
    "inform_battery_loss",
    "inform_abort_mission",
];

/// The dialogue-act type of a CRWIZ wizard label; `None` for `UNK` and ungrouped labels.
pub fn crwiz_act_type(label: &str) -> Option<ActType> {
    let groups: [(&[&str], ActType); 4] = [
        (&REQUEST, ActType::Request),
        (&INTERACTION, ActType::Interaction),
        (&ACTION, ActType::Action),
        (&UPDATE, ActType::Update),
    ];
    groups
        .into_iter()
        .find(|(labels, _)| labels.contains(&label))
        .map(|(_, act_type)| act_type)
}

/// How a wizard message with this label was produced: a fixed option, a dialogue state, or free
/// text (`UNK`, and labels without a type, which stay readable in the `crwiz.turn` annotation).
pub(crate) fn source_for(label: &str) -> MessageSource {
    match crwiz_act_type(label) {
        Some(act_type) if FIXED.contains(&label) => MessageSource::Fixed {
            id: label.to_string(),
            label: label.to_string(),
            act_type,
        },
        Some(act_type) => MessageSource::State {
            state: label.to_string(),
            label: label.to_string(),
            act_type,
            template: 0,
        },
        None => MessageSource::Free,
    }
}

/// The label written for a message: its act label, or `UNK` for free text.
pub(crate) fn label_of(source: &MessageSource) -> &str {
    source.act().map_or(FREE_TEXT_LABEL, |(label, _)| label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_is_disjoint_and_fixed_options_are_interactions() {
        let all: Vec<&str> = [&REQUEST[..], &INTERACTION, &ACTION, &UPDATE].concat();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len());
        for label in FIXED {
            assert_eq!(crwiz_act_type(label), Some(ActType::Interaction));
        }
        assert_eq!(crwiz_act_type("UNK"), None);
        assert_eq!(crwiz_act_type("confirm_plan"), None);
        assert_eq!(crwiz_act_type("inform_wind"), Some(ActType::Update));
    }
}
