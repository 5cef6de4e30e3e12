//! The room page's skeleton. `assets/room.js` fills it from the WebSocket; every element the
//! end-to-end tests drive has an id and a `data-testid` (listed in docs/protocol.md).

use wozkit_core::event::Role;
use wozkit_core::load::LoadedStudy;

use super::html::{esc, layout};

pub fn render(study: &LoadedStudy, role: Role, seat: Option<&str>) -> String {
    let st = &study.study;
    let (me, partner) = match role {
        Role::User => (&st.roles.user, &st.roles.wizard),
        Role::Wizard => (&st.roles.wizard, &st.roles.user),
    };
    let partner_name = partner.name.as_deref().unwrap_or(&partner.label);
    // Robots and their actions are shown only in a study that has them (a plain chat study
    // has neither); `assets/room.js` copes with the panels missing.
    let has_robots = !st.world.robots.is_empty();
    let has_actions = !st.actions.is_empty();
    let options_panel = if role == Role::Wizard {
        "<section id=\"options-panel\" class=\"panel\" aria-labelledby=\"options-title\">\
           <div class=\"panel-head\"><h2 id=\"options-title\">What to say</h2>\
           <button type=\"button\" id=\"hint\" data-testid=\"hint\" disabled>Hint</button></div>\
           <p id=\"lock-status\" data-testid=\"lock-status\" class=\"lock\" hidden></p>\
           <div id=\"options\" data-testid=\"options\"></div>\
           <h3>Always available</h3><div id=\"fixed\" data-testid=\"fixed\" class=\"fixed\"></div>\
         </section>"
    } else {
        ""
    };
    let action_panel = if role == Role::Wizard && has_actions {
        "<section id=\"action-panel\" class=\"panel\" data-testid=\"action-panel\" aria-labelledby=\"action-title\">\
           <h2 id=\"action-title\">Robot actions</h2>\
           <div class=\"action-row\">\
             <label>Action <select id=\"action-select\" data-testid=\"action-select\"></select></label>\
             <label>Robot <select id=\"robot-select\" data-testid=\"robot-select\"></select></label>\
             <label id=\"target-label\">Where <select id=\"target-select\" data-testid=\"target-select\"></select></label>\
             <button type=\"button\" id=\"action-send\" data-testid=\"action-send\" disabled>Start</button>\
           </div>\
           <p id=\"action-reason\" data-testid=\"action-reason\" class=\"muted\"></p>\
         </section>"
    } else {
        ""
    };
    let approval = if role == Role::User {
        "<div id=\"approval\" data-testid=\"approval\" class=\"approval\" hidden role=\"alertdialog\" aria-labelledby=\"approval-prompt\">\
           <p id=\"approval-prompt\"></p>\
           <button type=\"button\" id=\"approve\" data-testid=\"approve\" class=\"primary\">Approve</button>\
           <button type=\"button\" id=\"deny\" data-testid=\"deny\">Deny</button>\
         </div>"
    } else {
        ""
    };
    let robots_panel = if has_robots {
        "<section id=\"robots-panel\" class=\"panel\"><h2>Robots</h2><ul id=\"robots\" data-testid=\"robots\"></ul></section>"
    } else {
        ""
    };
    let body = format!(
        "<main id=\"room\" class=\"room role-{role}\" data-page=\"room\" data-role=\"{role}\" data-seat=\"{seat}\">\
         <header class=\"topbar\">\
           <h1 id=\"study-title\">{title}</h1>\
           <span class=\"who\">You are <strong>{me}</strong></span>\
           <span id=\"subtask\" data-testid=\"subtask\"></span>\
           <div class=\"progress\" title=\"Progress\"><div id=\"progress-bar\" data-testid=\"progress\" role=\"progressbar\" aria-valuemin=\"0\" aria-valuemax=\"100\" aria-valuenow=\"0\"></div></div>\
           <span id=\"timer\" data-testid=\"timer\" aria-label=\"Time left\">--:--</span>\
           <span id=\"conn-status\" data-testid=\"conn-status\" role=\"status\">connecting…</span>\
           <button type=\"button\" id=\"finish\" data-testid=\"finish\" disabled>Finish</button>\
         </header>\
         <div id=\"partner-status\" data-testid=\"partner-status\" class=\"banner\" role=\"status\" hidden></div>\
         <div id=\"end-banner\" data-testid=\"end-banner\" class=\"banner\" role=\"status\" hidden>\
           <strong>The conversation has ended.</strong> Take your time to read the chat, then continue. \
           <button type=\"button\" id=\"continue-after-end\" data-testid=\"continue-after-end\" class=\"primary\">Continue</button>\
         </div>\
         <div class=\"columns\">\
           <section class=\"chat-col\" aria-label=\"Chat with {partner}\">\
             <ol id=\"chat\" data-testid=\"chat\" aria-live=\"polite\"></ol>\
             <div id=\"typing\" data-testid=\"typing\" class=\"muted\" hidden>{partner} is typing…</div>\
             {approval}\
             <form id=\"composer\" autocomplete=\"off\">\
               <label for=\"text-input\" class=\"sr-only\">Message</label>\
               <textarea id=\"text-input\" data-testid=\"text-input\" rows=\"2\" maxlength=\"2000\" placeholder=\"Type a message and press Enter\"></textarea>\
               <button type=\"submit\" id=\"send\" data-testid=\"send\">Send</button>\
             </form>\
             <p id=\"notice\" data-testid=\"notice\" role=\"alert\"></p>\
           </section>\
           <aside class=\"side-col\">\
             {options_panel}{action_panel}\
             <section id=\"media-panel\" class=\"panel\" hidden><img id=\"media\" data-testid=\"media\" alt=\"\"></section>\
             {robots_panel}\
             <section id=\"map-panel\" class=\"panel\" hidden><h2>Map</h2><img id=\"map\" data-testid=\"map\" alt=\"\"></section>\
           </aside>\
         </div></main>",
        role = role.as_str(),
        seat = esc(seat.unwrap_or("")),
        title = esc(&st.title),
        me = esc(me.name.as_deref().unwrap_or(&me.label)),
        partner = esc(partner_name),
    );
    layout(&st.title, &body, &["room.js"])
}
