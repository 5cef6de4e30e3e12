//! The room page's skeleton. `assets/room.js` fills it from the WebSocket; every element the
//! end-to-end tests drive has an id and a `data-testid` (listed in docs/protocol.md).

use wozkit_core::event::Role;
use wozkit_core::load::LoadedStudy;

use super::html::{esc, layout_in, paragraphs};
use crate::i18n::{Words, words};

pub fn render(study: &LoadedStudy, role: Role, seat: Option<&str>) -> String {
    let st = &study.study;
    let w = words(st.language);
    let (me, partner) = match role {
        Role::User => (&st.roles.user, &st.roles.wizard),
        Role::Wizard => (&st.roles.wizard, &st.roles.user),
    };
    let partner_name = partner.name.as_deref().unwrap_or(&partner.label);
    let body = format!(
        "<main id=\"room\" class=\"room role-{role}\" data-page=\"room\" data-role=\"{role}\" data-seat=\"{seat}\">\
         {header}<div class=\"columns\">{chat}{side}</div></main>{strings}",
        role = role.as_str(),
        seat = esc(seat.unwrap_or("")),
        header = header(w, study, me.name.as_deref().unwrap_or(&me.label)),
        chat = chat_column(w, study, role, partner_name),
        side = side_column(w, study, role),
        strings = w.script_block("room-js-"),
    );
    layout_in(w.lang(), &st.title, "", &body, &["room.js"])
}

/// The top bar (title, who the participant is, subtask, progress, timer, connection, finish)
/// and the banners under it: the partner's status and the session's end.
fn header(w: &Words, study: &LoadedStudy, me: &str) -> String {
    let t = |key: &str| esc(&w.get(key));
    format!(
        "<header class=\"topbar\">\
           <h1 id=\"study-title\">{title}</h1>\
           <span class=\"who\">{you_are} <strong>{me}</strong></span>\
           <span id=\"subtask\" data-testid=\"subtask\"></span>\
           <div class=\"progress\" title=\"{progress}\"><div id=\"progress-bar\" data-testid=\"progress\" role=\"progressbar\" aria-label=\"{progress}\" aria-valuemin=\"0\" aria-valuemax=\"100\" aria-valuenow=\"0\"></div></div>\
           <span id=\"timer\" data-testid=\"timer\" aria-label=\"{time_left}\">--:--</span>\
           <span id=\"conn-status\" data-testid=\"conn-status\" role=\"status\">{connecting}</span>\
           <button type=\"button\" id=\"finish\" data-testid=\"finish\" disabled>{finish}</button>\
         </header>\
         <div id=\"partner-status\" data-testid=\"partner-status\" class=\"banner\" role=\"status\" hidden></div>\
         <div id=\"end-banner\" data-testid=\"end-banner\" class=\"banner\" role=\"status\" hidden>\
           <strong>{ended}</strong> {ended_read} \
           <button type=\"button\" id=\"continue-after-end\" data-testid=\"continue-after-end\" class=\"primary\">{continue_}</button>\
         </div>",
        title = esc(&study.study.title),
        me = esc(me),
        you_are = t("room-you-are"),
        progress = t("room-progress"),
        time_left = t("room-time-left"),
        connecting = t("room-js-connecting"),
        finish = t("room-finish"),
        ended = t("room-ended"),
        ended_read = t("room-ended-read"),
        continue_ = t("room-continue"),
    )
}

/// The chat column: the conversation, the typing line, the user's approval prompt or the
/// wizard's copilot, the message box and the notice line.
fn chat_column(w: &Words, study: &LoadedStudy, role: Role, partner_name: &str) -> String {
    let t = |key: &str| esc(&w.get(key));
    let approval = if role == Role::User {
        approval(w)
    } else {
        String::new()
    };
    // The copilot's suggestion, over the message box where the wizard would send or edit it.
    let copilot = if role == Role::Wizard && study.study.copilot.is_some() {
        copilot_panel(w)
    } else {
        String::new()
    };
    format!(
        "<section class=\"chat-col\" aria-label=\"{chat_with}\">\
             <ol id=\"chat\" data-testid=\"chat\" aria-live=\"polite\"></ol>\
             <div id=\"typing\" data-testid=\"typing\" class=\"muted\" hidden>{typing}</div>\
             {approval}{copilot}\
             <form id=\"composer\" autocomplete=\"off\">\
               <label for=\"text-input\" class=\"sr-only\">{message}</label>\
               <textarea id=\"text-input\" data-testid=\"text-input\" rows=\"2\" maxlength=\"2000\" placeholder=\"{placeholder}\"></textarea>\
               <button type=\"submit\" id=\"send\" data-testid=\"send\">{send}</button>\
             </form>\
             <p id=\"notice\" data-testid=\"notice\" role=\"alert\"></p>\
           </section>",
        chat_with = esc(&w.with("room-chat-with", &[("partner", partner_name)])),
        typing = esc(&w.with("room-js-typing", &[("partner", partner_name)])),
        message = t("room-message"),
        placeholder = t("room-js-placeholder"),
        send = t("room-send"),
    )
}

/// The side column: the role's task, the wizard's options and robot actions, the media, the
/// robots and the map.
fn side_column(w: &Words, study: &LoadedStudy, role: Role) -> String {
    let st = &study.study;
    let t = |key: &str| esc(&w.get(key));
    // Robots and their actions are shown only in a study that has them (a plain chat study
    // has neither); `assets/room.js` copes with the panels missing.
    let has_robots = !st.world.robots.is_empty();
    let has_actions = !st.actions.is_empty();
    let options_panel = if role == Role::Wizard {
        options_panel(w)
    } else {
        String::new()
    };
    let action_panel = if role == Role::Wizard && has_actions {
        action_panel(w)
    } else {
        String::new()
    };
    let task_panel = task_panel(w, study, role);
    // The user's task first; the wizard's after their options, which they use all the time.
    let (user_task, wizard_task) = match role {
        Role::User => (task_panel.as_str(), ""),
        Role::Wizard => ("", task_panel.as_str()),
    };
    let robots_panel = if has_robots {
        format!(
            "<section id=\"robots-panel\" class=\"panel\"><h2>{}</h2><ul id=\"robots\" data-testid=\"robots\"></ul></section>",
            t("room-robots")
        )
    } else {
        String::new()
    };
    format!(
        "<aside class=\"side-col\">\
             {user_task}{options_panel}{action_panel}{wizard_task}\
             <section id=\"media-panel\" class=\"panel\" hidden><img id=\"media\" data-testid=\"media\" alt=\"\"></section>\
             {robots_panel}\
             <section id=\"map-panel\" class=\"panel\" tabindex=\"0\" aria-labelledby=\"map-heading\" hidden><h2 id=\"map-heading\">{map}</h2><img id=\"map\" data-testid=\"map\" alt=\"\"></section>\
           </aside>",
        map = t("room-map"),
    )
}

/// The wizard's options: what to say (with the hint button and the lock) and what can always
/// be said.
fn options_panel(w: &Words) -> String {
    let t = |key: &str| esc(&w.get(key));
    format!(
        "<section id=\"options-panel\" class=\"panel\" aria-labelledby=\"options-title\">\
           <div class=\"panel-head\"><h2 id=\"options-title\">{}</h2>\
           <button type=\"button\" id=\"hint\" data-testid=\"hint\" disabled>{}</button></div>\
           <p id=\"lock-status\" data-testid=\"lock-status\" class=\"lock\" hidden></p>\
           <div id=\"options\" data-testid=\"options\"></div>\
           <h3>{}</h3><div id=\"fixed\" data-testid=\"fixed\" class=\"fixed\"></div>\
         </section>",
        t("room-what-to-say"),
        t("room-hint"),
        t("room-always")
    )
}

/// The wizard's robot actions: the action, robot and target to choose, and the start button.
fn action_panel(w: &Words) -> String {
    let t = |key: &str| esc(&w.get(key));
    format!(
        "<section id=\"action-panel\" class=\"panel\" data-testid=\"action-panel\" aria-labelledby=\"action-title\">\
           <h2 id=\"action-title\">{}</h2>\
           <div class=\"action-row\">\
             <label>{} <select id=\"action-select\" data-testid=\"action-select\"></select></label>\
             <label>{} <select id=\"robot-select\" data-testid=\"robot-select\"></select></label>\
             <label id=\"target-label\">{} <select id=\"target-select\" data-testid=\"target-select\"></select></label>\
             <button type=\"button\" id=\"action-send\" data-testid=\"action-send\" disabled>{}</button>\
           </div>\
           <p id=\"action-reason\" data-testid=\"action-reason\" class=\"muted\"></p>\
         </section>",
        t("room-robot-actions"),
        t("room-action"),
        t("room-robot"),
        t("room-where"),
        t("room-start")
    )
}

/// The user's prompt to approve or deny what the wizard asks.
fn approval(w: &Words) -> String {
    let t = |key: &str| esc(&w.get(key));
    format!(
        "<div id=\"approval\" data-testid=\"approval\" class=\"approval\" hidden role=\"alertdialog\" aria-labelledby=\"approval-prompt\">\
           <p id=\"approval-prompt\"></p>\
           <button type=\"button\" id=\"approve\" data-testid=\"approve\" class=\"primary\">{}</button>\
           <button type=\"button\" id=\"deny\" data-testid=\"deny\">{}</button>\
         </div>",
        t("room-approve"),
        t("room-deny")
    )
}

/// The role's task, which stays on screen after pairing (the instructions page is gone by
/// then): open for the user, whose wishes it lists, folded for the wizard. A user whose goal
/// the study draws gets the goal panel instead (room.js builds it from `goal_generated`).
fn task_panel(w: &Words, study: &LoadedStudy, role: Role) -> String {
    let st = &study.study;
    let me = match role {
        Role::User => &st.roles.user,
        Role::Wizard => &st.roles.wizard,
    };
    if me.instructions.trim().is_empty() || (role == Role::User && st.goals.is_some()) {
        return String::new();
    }
    format!(
        "<details id=\"task-panel\" class=\"panel\" data-testid=\"task-panel\"{open}>\
         <summary>{}</summary>{}</details>",
        esc(&w.get("room-your-task")),
        paragraphs(&me.instructions),
        open = if role == Role::User { " open" } else { "" },
    )
}

/// The wizard's copilot: its suggestion and the buttons to send, edit or dismiss it.
fn copilot_panel(w: &Words) -> String {
    let t = |key: &str| esc(&w.get(key));
    format!(
        "<section id=\"copilot-panel\" data-testid=\"copilot\" class=\"copilot\" aria-labelledby=\"copilot-heading\" hidden>\
           <h2 id=\"copilot-heading\">{}</h2>\
           <p id=\"copilot-text\" data-testid=\"copilot-text\" role=\"status\"></p>\
           <button type=\"button\" id=\"copilot-send\" data-testid=\"copilot-send\" class=\"primary\">{}</button>\
           <button type=\"button\" id=\"copilot-edit\" data-testid=\"copilot-edit\">{}</button>\
           <button type=\"button\" id=\"copilot-dismiss\" data-testid=\"copilot-dismiss\">{}</button>\
         </section>",
        t("room-copilot"),
        t("room-copilot-send"),
        t("room-copilot-edit"),
        t("room-copilot-dismiss")
    )
}
