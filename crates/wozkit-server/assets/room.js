// The room: a WebSocket client for docs/protocol.md. It sends intents only (say, fixed, text, act,
// approve, deny, hint, finish, query, select) and renders what the server sends: events as chat, the per-role
// view as options, action panel, timer, progress, robots (also drawn on the map) and media. Text
// from anyone is set with textContent, never as HTML. On reconnect it sends the last seq it saw
// and gets what it missed. Interface words come from the page (strings.js), in the study's
// language.

import { has, t } from './strings.js';

const $ = (id) => document.getElementById(id);
const main = $('room');
const role = main.dataset.role;
// Read-only (a researcher observing, `/researcher/session/ID/observe/ROLE`): no socket of its
// own, no input; frames come from the observe page (assets/observe.js) by postMessage.
const observing = main.dataset.observe === 'true';
const seat = main.dataset.seat;
const query = seat ? `?seat=${encodeURIComponent(seat)}` : '';
const ACT_TYPES = ['request', 'interaction', 'action', 'update'];

const st = {
  lastSeq: 0, study: null, view: null, ws: null, n: 0, done: false, retry: 500,
  skew: 0, typingSent: 0, typingTimer: null, noticeTimer: null, partnerAway: false, next: null,
  clocked: [], hidden: false, retryTimer: null,
  // The copilot's open suggestion ({ n, text }) and the one the wizard is editing (its number).
  suggestion: null, editing: null,
};

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

// Nothing on the page acts any more: a researcher observing, or a session that has ended (its
// buttons stay on screen, greyed, with the chat, until the participant moves on).
const inert = () => observing || st.done;

// Greys every control of the room at once; the options and the action panel stay grey when they
// are drawn again (they follow `inert()`).
function greyOut() {
  for (const id of ['text-input', 'send', 'finish', 'hint', 'approve', 'deny', 'action-select', 'robot-select', 'target-select', 'action-send', 'copilot-send', 'copilot-edit', 'copilot-dismiss']) {
    if ($(id)) $(id).disabled = true;
  }
  for (const x of document.querySelectorAll('#options button, #fixed button, #db-panel button, #db-panel input, #db-panel select')) x.disabled = true;
}

const fmt = (s) => `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, '0')}`;
const safeNext = (n) => (typeof n === 'string' && n.startsWith('/') && !n.startsWith('//') ? n : `/p${query}`);

// An error frame's words in the page's language: an engine refusal the catalogue names
// (`room-js-refused-KIND`, its holes filled from the refusal's fields), or another error by its
// code (`room-js-error-CODE`); else the server's message.
function refusalText(f) {
  const kind = f.detail && typeof f.detail.refusal === 'string' ? f.detail.refusal : '';
  // A guard's own reason is the study's sentence, already in the study's words.
  if (kind === 'guard_failed' && typeof f.detail.reason === 'string') return f.detail.reason;
  const key = `room-js-refused-${kind.replace(/_/g, '-')}`;
  if (kind && has(key)) return t(key, f.detail);
  const code = `room-js-error-${String(f.code || '').replace(/_/g, '-')}`;
  return has(code) ? t(code) : f.message;
}

function notice(text) {
  $('notice').textContent = text;
  clearTimeout(st.noticeTimer);
  st.noticeTimer = setTimeout(() => { $('notice').textContent = ''; }, 6000);
}

function send(frame) {
  if (observing) return false;
  if (st.ws && st.ws.readyState === WebSocket.OPEN) {
    st.ws.send(JSON.stringify(frame));
    return true;
  }
  notice(t('room-js-not-connected'));
  return false;
}

function cmd(c) {
  st.n += 1;
  return send({ type: 'cmd', id: `c${st.n}`, cmd: c });
}

// ---------------------------------------------------------------- chat

function nameOf(r) {
  if (!st.study) return r;
  if (observing) return r === role ? st.study.me.name : st.study.partner.name;
  return r === role ? t('room-js-you') : st.study.partner.name;
}

function addLine(e, cls, who, text, label) {
  const li = el('li', { class: cls, 'data-seq': e.seq, 'data-testid': cls.startsWith('msg') ? 'message' : 'system' });
  if (who) li.append(el('span', { class: 'who' }, who));
  li.append(el('span', { class: 'text' }, text));
  if (label) li.append(el('span', { class: 'act' }, label));
  const chat = $('chat');
  const stick = chat.scrollTop + chat.clientHeight >= chat.scrollHeight - 40;
  chat.append(li);
  if (stick) chat.scrollTop = chat.scrollHeight;
}

// A dialogue-act label as the wizard reads it (the same on option buttons and in the chat).
const actName = (label) => label.replace(/[_.]/g, ' ');

// A state's act label when the study names it (`label:`); a state without one has only its
// id, a machine name that no participant reads.
const ownLabel = (label, state) => (label && label !== state ? actName(label) : '');

// The act label shown beside a wizard message: the chosen state's own label, else its act type
// in the page's words, the kind of a fixed option (its id is a machine name), or "free text".
function messageAct(e) {
  if (e.source === 'free') return t('room-js-free-text');
  if (e.source === 'fixed') return t(`room-js-act-${e.act_type}`);
  return ownLabel(e.label, e.state) || t(`room-js-act-${e.act_type}`);
}

// An action by its study label: the wizard's welcome lists them; the user's events carry the
// label already and no action id.
function actionLabel(e) {
  const a = st.study && st.study.actions && st.study.actions.find((x) => x.id === e.action);
  return a ? a.label : e.label;
}

function robotName(id) {
  const r = st.study && st.study.robots.find((x) => x.id === id);
  return r ? r.name : id;
}

function placeName(id) {
  const l = st.study && st.study.locations.find((x) => x.id === id);
  return l ? l.name : id;
}

function renderEvent(e) {
  switch (e.kind) {
    case 'message': {
      const mine = e.role === role;
      const label = role === 'wizard' && e.role === 'wizard' ? messageAct(e) : null;
      addLine(e, `msg ${mine ? 'mine' : 'theirs'} from-${e.role}`, nameOf(e.role), e.text, label);
      $('typing').hidden = true;
      if (e.role === 'wizard') closeSuggestion();
      break;
    }
    case 'suggested':
      showSuggestion(e);
      break;
    case 'action_started':
      addLine(e, 'sys', null, e.target
        ? t('room-js-action-started-to', { robot: robotName(e.robot), action: actionLabel(e), place: placeName(e.target) })
        : t('room-js-action-started', { robot: robotName(e.robot), action: actionLabel(e) }));
      break;
    case 'action_completed':
      addLine(e, 'sys', null, e.target
        ? t('room-js-action-finished-at', { robot: robotName(e.robot), place: placeName(e.target) })
        : t('room-js-action-finished', { robot: robotName(e.robot) }));
      break;
    case 'milestone': {
      const sub = st.study && st.study.subtasks.find((x) => x.id === e.subtask);
      addLine(e, 'sys milestone', null, t('room-js-milestone', { subtask: sub ? sub.label : e.subtask, progress: e.progress }));
      break;
    }
    case 'lock_released':
      if (e.how !== 'reply') addLine(e, 'sys', null, t(e.how === 'approved' ? 'room-js-approved' : 'room-js-denied'));
      break;
    case 'session_ended':
      addLine(e, 'sys', null, t('room-js-ended'));
      break;
    case 'db_queried':
      renderDbResults(e);
      break;
    case 'goal_generated':
      renderGoal(e);
      break;
    case 'turn_state':
      renderTurnState(e);
      break;
    case 'db_selected':
      if ($('db-selected')) {
        const spec = dbTable(e.table);
        $('db-selected').textContent = t('room-js-selected', { table: spec ? spec.label : e.table, key: rowName(spec, e.row, e.key) });
        $('db-selected').dataset.key = e.key;
      }
      break;
    default:
  }
}

// ---------------------------------------------------------------- map

// The robots drawn over the study's map: an SVG laid over the image, one marker per robot at its
// location's x/y (percent of the map's width and height, so percentages in SVG units place them
// on any image size), moving from its location to the target by the running action's percent.
const SVG_NS = 'http://www.w3.org/2000/svg';

function svgEl(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function placeXY(id) {
  const l = st.study && st.study.locations.find((x) => x.id === id);
  return l ? { x: l.x, y: l.y } : null;
}

// Where a robot is now: at its location, or on the way to `moving_to` by the action's percent.
function robotXY(r) {
  const from = placeXY(r.location);
  const to = r.moving_to ? placeXY(r.moving_to) : null;
  if (!from || !to) return from;
  const f = Math.min(100, Math.max(0, r.percent ?? 0)) / 100;
  return { x: from.x + (to.x - from.x) * f, y: from.y + (to.y - from.y) * f };
}

const pct = (n) => `${+n.toFixed(2)}%`;

// One colour per robot kind, in the order the study lists its robots.
function kindClass(study, kind) {
  const kinds = [...new Set(study.robots.map((r) => r.kind))];
  return `kind-${kinds.indexOf(kind) % 4}`;
}

function setupMap(study) {
  const img = $('map');
  let frame = img.parentElement.classList.contains('map-frame') ? img.parentElement : null;
  if (!frame) {
    const body = el('div', { class: 'map-body' });
    frame = el('div', { class: 'map-frame' });
    img.replaceWith(body);
    frame.append(img);
    body.append(frame);
  }
  const old = $('map-overlay');
  if (old) old.remove();
  const oldKey = $('map-key');
  if (oldKey) oldKey.remove();
  frame.append(svgEl('svg', { id: 'map-overlay', 'data-testid': 'map-overlay', 'aria-hidden': 'true' }));
  if (!study.robots.length) return;
  // The key beside the map names each robot; the markers repeat it visually only.
  const key = el('ul', { id: 'map-key', 'data-testid': 'map-key' });
  study.robots.forEach((r, i) => {
    const li = el('li', { 'data-testid': `map-key-${r.id}` });
    li.append(el('span', { class: `swatch ${kindClass(study, r.kind)}` }, String(i + 1)));
    const about = el('div', {});
    about.append(el('strong', {}, r.name), el('span', { class: 'muted' }, ` · ${r.kind_label}`));
    if (r.can && r.can.length) about.append(el('div', { class: 'can' }, r.can.join(' · ')));
    li.append(about);
    key.append(li);
  });
  frame.parentElement.append(key);
}

function renderMap(v) {
  const svg = $('map-overlay');
  if (!svg || !st.study) return;
  const placed = [];
  for (const r of v.robots) {
    const i = st.study.robots.findIndex((x) => x.id === r.id);
    const at = robotXY(r);
    if (i < 0 || !at) continue;
    placed.push({ r, i, at, kind: kindClass(st.study, st.study.robots[i].kind) });
  }
  // Robots on the same spot (all of them at the base, at first) sit side by side, not on top.
  const spots = new Map();
  for (const p of placed) {
    const k = `${Math.round(p.at.x * 2)}:${Math.round(p.at.y * 2)}`;
    if (!spots.has(k)) spots.set(k, []);
    spots.get(k).push(p);
  }
  const routes = [];
  const markers = [];
  for (const group of spots.values()) {
    group.forEach((p, j) => {
      const dx = (j - (group.length - 1) / 2) * 18;
      const to = p.r.moving_to ? placeXY(p.r.moving_to) : null;
      if (to) {
        routes.push(svgEl('line', {
          class: 'route', 'data-testid': `map-route-${p.r.id}`,
          x1: pct(p.at.x), y1: pct(p.at.y), x2: pct(to.x), y2: pct(to.y),
        }));
      }
      const m = svgEl('svg', {
        class: `robot ${p.kind}${p.r.busy ? ' busy' : ''}`, 'data-testid': `map-robot-${p.r.id}`,
        'data-x': +p.at.x.toFixed(2), 'data-y': +p.at.y.toFixed(2), x: pct(p.at.x), y: pct(p.at.y), overflow: 'visible',
      });
      m.append(svgEl('title', {}, p.r.name), svgEl('circle', { cx: dx, cy: 0, r: 8 }),
        svgEl('text', { x: dx, y: 0 }, String(p.i + 1)));
      markers.push(m);
    });
  }
  svg.replaceChildren(...alarmMarks(v.alarm), ...routes, ...markers);
  renderAlarmNote(v.alarm);
}

// The study's alarm (`alarm` of the view): a dashed red ring with its label at its location while
// active, a green ring with the cleared label once the hazard is dealt with or the goal reached.
// Drawn with SVG attributes only (the map's colours are the study's, not the page style's).
function alarmMarks(a) {
  const at = a ? placeXY(a.location) : null;
  if (!at) return [];
  const colour = a.cleared ? '#15803d' : '#d22e28';
  const g = svgEl('g', { 'data-testid': 'map-alarm', 'data-location': a.location, 'data-cleared': a.cleared ? 'true' : 'false' });
  g.append(
    svgEl('circle', {
      cx: pct(at.x), cy: pct(at.y), r: '6.8%', fill: a.cleared ? 'rgba(21,128,61,0.15)' : 'none',
      stroke: colour, 'stroke-width': 3, 'stroke-dasharray': a.cleared ? 'none' : '6 4',
    }),
    svgEl('text', {
      x: pct(at.x), y: pct(Math.max(4, at.y - 10)), fill: colour, stroke: '#fff', 'stroke-width': 3,
      'paint-order': 'stroke', 'font-family': 'sans-serif', 'font-size': 12, 'font-weight': 'bold', 'text-anchor': 'middle',
    }, a.label),
  );
  return [g];
}

// The overlay is hidden from screen readers, so the alarm's state is also said in the map's
// key: one line that names the place and whether it is cleared.
function renderAlarmNote(a) {
  let note = $('map-alarm-note');
  if (!a) {
    if (note) note.remove();
    return;
  }
  const frame = $('map-overlay') && $('map-overlay').parentElement;
  if (!note && frame) {
    note = el('p', { id: 'map-alarm-note', 'data-testid': 'map-alarm-note' });
    frame.parentElement.append(note);
  }
  if (note) {
    const text = `${a.label}: ${placeName(a.location)}`;
    if (note.textContent !== text) note.textContent = text;
  }
}

// ---------------------------------------------------------------- view

// The partner-away banner counts down the partner's grace period (`partner_back_by_ms` of the
// view, on the server's clock); without it yet (the `partner` frame comes before the view) it
// says the same without the time. The time sits in its own span, hidden from screen readers, so
// the live banner is not read out again every second.
function renderPartner() {
  const box = $('partner-status');
  const away = st.partnerAway && !st.done;
  box.hidden = !away;
  if (!away) {
    box.replaceChildren();
    delete box.dataset.counting;
    return;
  }
  const until = st.view && st.view.partner_away ? st.view.partner_back_by_ms : null;
  if (!until) {
    if (box.dataset.counting !== 'false') {
      box.dataset.counting = 'false';
      box.textContent = t('room-js-partner-lost');
    }
    return;
  }
  let left = $('partner-countdown');
  if (!left) {
    box.dataset.counting = 'true';
    left = el('span', { id: 'partner-countdown', 'data-testid': 'partner-countdown', 'aria-hidden': 'true' });
    const [before, after = ''] = t('room-js-partner-lost-countdown').split('{countdown}');
    box.replaceChildren(before, left, after);
  }
  const text = fmt(Math.ceil(Math.max(0, (until - (Date.now() - st.skew)) / 1000)));
  if (left.textContent !== text) left.textContent = text;
}

// Seconds left on the game clock now (the full limit before it starts), or null without a limit.
function secondsLeft(t) {
  if (t.deadline_ms) return Math.max(0, (t.deadline_ms - (Date.now() - st.skew)) / 1000);
  return t.limit_s ? t.limit_s : null;
}

function renderTimer() {
  const v = st.view;
  if (!v) return;
  const left = secondsLeft(v.timer);
  $('timer').textContent = left === null ? '' : fmt(left);
  renderClocked();
}

// An option's text with its clock slots filled from the page's clock (`clock_text` of the view:
// strings, and {slot} pieces for `time_left` / `elapsed`), the same way the server fills them.
function clockText(parts) {
  return parts.map((p) => {
    if (typeof p === 'string') return p;
    if (p.slot === 'time_left') return fmt(secondsLeft(st.view.timer) ?? 0);
    if (p.slot === 'elapsed') return String(Math.max(0, Math.floor((Date.now() - st.skew - (p.since_ms ?? 0)) / 1000)));
    return '';
  }).join('');
}

// Option and fixed-option texts that name the time, kept current each tick of the page's clock.
function renderClocked() {
  for (const { span, parts } of st.clocked) {
    const text = clockText(parts);
    if (span.textContent !== text) span.textContent = text;
  }
}

// The robots panel and the action panel are on the page only in a study with robots / actions.
function renderRobots(v) {
  const ul = $('robots');
  if (!ul) return;
  ul.replaceChildren(...v.robots.map((r) => {
    const li = el('li', { 'data-testid': `robot-${r.id}`, 'data-busy': r.busy ? 'true' : 'false' });
    li.append(el('strong', {}, r.name), el('span', {}, ` · ${r.location_name} · ${t('room-js-battery', { percent: Math.round(r.battery) })}`));
    if (r.busy) {
      const action = `${r.action}${r.target ? ` → ${r.target}` : ''}`;
      const what = t('room-js-busy', { action, percent: r.percent ?? 0, eta: r.eta_s ?? '?' });
      li.append(el('div', { class: 'busy' }, what));
    } else {
      li.append(el('div', { class: 'muted' }, t(r.in_service === false ? 'room-js-out-of-service' : 'room-js-standby')));
    }
    return li;
  }));
}

// The element with the focus, by its test id, when it is one that `renderOptions` rebuilds: a
// new view must not throw a keyboard user's place in the options back to the top of the page.
function focusedRebuilt() {
  const a = document.activeElement;
  return a && a.dataset && a.dataset.testid && a.closest('#options, #fixed') ? a.dataset.testid : null;
}

function refocus(testid) {
  if (!testid) return;
  // The same button again, or (when the option just said is no longer offered) the first one.
  const again = document.querySelector(`[data-testid="${CSS.escape(testid)}"]`)
    || document.querySelector('#options button:not([disabled]), #fixed button:not([disabled])');
  if (again) again.focus();
}

function renderOptions(v) {
  const box = $('options');
  const focused = focusedRebuilt();
  st.clocked = [];
  const textOf = (o, span) => {
    if (o.clock_text) st.clocked.push({ span, parts: o.clock_text });
    return span;
  };
  const groups = ACT_TYPES.map((type) => {
    const opts = v.options.filter((o) => o.act_type === type);
    if (!opts.length) return null;
    const fs = el('fieldset', { 'data-act-type': type });
    fs.append(el('legend', {}, t(`room-js-act-${type}`)));
    for (const o of opts) {
      const b = el('button', {
        type: 'button', class: `option${o.hint ? ' hinted' : ''}`, 'data-testid': `option-${o.state}`,
        'data-state': o.state, 'data-kind': o.kind, disabled: inert(),
      });
      // The group's legend names the act type; a state the study labels shows its label too.
      const own = ownLabel(o.label, o.state);
      if (own) b.append(el('span', { class: 'label' }, own));
      b.append(textOf(o, el('span', { class: 'text' }, o.text)));
      b.addEventListener('click', () => cmd({ cmd: 'say', state: o.state }));
      fs.append(b);
    }
    return fs;
  }).filter(Boolean);
  box.replaceChildren(...groups);
  if (!groups.length) box.append(el('p', { class: 'muted' }, t(v.lock ? 'room-js-waiting-user' : 'room-js-no-option')));
  $('fixed').replaceChildren(...v.fixed.map((f) => {
    const b = textOf(f, el('button', { type: 'button', 'data-testid': `fixed-${f.id}`, 'data-id': f.id, disabled: inert() }, f.text));
    b.addEventListener('click', () => cmd({ cmd: 'fixed', id: f.id }));
    return b;
  }));
  refocus(focused);
  $('hint').disabled = inert() || !v.can_hint;
  const lock = $('lock-status');
  lock.hidden = !v.lock;
  lock.textContent = v.lock ? t(v.lock.kind === 'approval' ? 'room-js-lock-approval' : 'room-js-lock-reply') : '';
  renderClocked();
}

function fillSelect(sel, items) {
  const keep = sel.value;
  sel.replaceChildren(...items.map(([value, text]) => el('option', { value }, text)));
  if (items.some(([value]) => value === keep)) sel.value = keep;
}

// The action panel opens on a combination the engine accepts now: each action's `pick` in the
// view (a free robot with the skill, a place it may go to). Until the wizard chooses an action,
// robot or place themselves, the panel follows the view to a possible combination; their choice
// then stays until they start it. When nothing is possible, the panel says why (`why_not`).
function comboOf(action) {
  if (!action) return null;
  const target = action.target ? $('target-select').value : null;
  return action.combos.find((c) => c.robot === $('robot-select').value && (c.target ?? null) === target) || null;
}

function fillTargets(action) {
  const needsTarget = Boolean(action && action.target);
  $('target-label').hidden = !needsTarget;
  if (needsTarget) fillSelect($('target-select'), st.study.locations.map((l) => [l.id, l.name]));
}

// Puts the action's possible combination in the robot and place lists.
function choosePick(action) {
  if (!action || !action.pick) return;
  $('robot-select').value = action.pick.robot;
  if (action.pick.target) $('target-select').value = action.pick.target;
}

function renderActions() {
  const v = st.view;
  if (!v || role !== 'wizard' || !st.study || !$('action-panel')) return;
  fillSelect($('action-select'), v.actions.map((a) => [a.id, a.label]));
  fillSelect($('robot-select'), st.study.robots.map((r) => [r.id, `${r.name} (${r.kind_label})`]));
  let action = v.actions.find((a) => a.id === $('action-select').value);
  fillTargets(action);
  const current = comboOf(action);
  if (!st.actionChosen && !(current && current.ok)) {
    const possible = action && action.pick ? action : v.actions.find((a) => a.pick);
    if (possible) {
      $('action-select').value = possible.id;
      action = possible;
      fillTargets(action);
      choosePick(action);
    }
  }
  const combo = comboOf(action);
  const ok = Boolean(combo && combo.ok);
  $('action-send').disabled = inert() || !ok;
  const panel = $('action-panel');
  panel.dataset.possible = v.actions.some((a) => a.pick) ? 'true' : 'false';
  let reason = '';
  if (!action) reason = t('room-js-no-actions');
  else if (!ok && action.why_not) reason = action.why_not;
  else if (!ok) reason = `${(combo && combo.reason) || t('room-js-not-possible')}.`.replace(/^./, (c) => c.toUpperCase());
  if (!ok && !v.actions.some((a) => a.pick)) reason = t('room-js-no-action-possible', { reason });
  $('action-reason').textContent = reason;
}

function renderView(v) {
  // A wizard's view leaves the action panel out while it is the one this page already has.
  if (!('actions' in v) && st.view && st.view.actions) v.actions = st.view.actions;
  st.view = v;
  st.skew = Date.now() - v.now_ms;
  renderTimer();
  const bar = $('progress-bar');
  bar.style.width = `${v.progress}%`;
  bar.setAttribute('aria-valuenow', String(v.progress));
  $('subtask').textContent = v.subtask ? v.subtask.label : '';
  $('finish').disabled = inert() || !v.can_finish;
  const input = $('text-input');
  input.disabled = inert() || Boolean(v.muted) || Boolean(v.ended);
  $('send').disabled = input.disabled;
  input.placeholder = v.muted
    ? t('room-js-wait-for-partner', { partner: st.study ? st.study.partner.name : t('room-js-your-partner') })
    : t('room-js-placeholder');
  st.partnerAway = Boolean(v.partner_away);
  renderPartner();
  if (role === 'user') {
    const a = $('approval');
    const lock = v.lock && v.lock.kind === 'approval' ? v.lock : null;
    a.hidden = !lock;
    if (lock) {
      $('approval-prompt').textContent = lock.prompt || t('room-js-approve-prompt');
      $('approve').textContent = lock.approve_label;
      $('deny').textContent = lock.deny_label;
    }
  } else {
    renderOptions(v);
    renderActions();
  }
  renderRobots(v);
  renderMap(v);
  if (v.media) {
    $('media-panel').hidden = false;
    if ($('media').getAttribute('src') !== v.media.url) $('media').setAttribute('src', v.media.url);
    $('media').alt = v.media.alt;
  }
}

// ---------------------------------------------------------------- the user's goal

// The goal panel (the user's only; the wizard never receives the goal), built from
// `goal_generated`: one list per sub-goal with its constraints ("fee: free") and requested slots
// ("phone: ?"), in the order of the `turn_state` user state. Each `turn_state` ticks the entries
// it says are satisfied; a requested slot then shows the value the assistant told.
function renderGoal(e) {
  if (role !== 'user' || !e.goal) return;
  let panel = $('goal-panel');
  if (!panel) {
    panel = el('section', { id: 'goal-panel', class: 'panel', 'data-testid': 'goal-panel', 'aria-labelledby': 'goal-title' });
    const side = document.querySelector('.side-col');
    if (side) side.prepend(panel);
    else main.append(panel);
  }
  panel.replaceChildren(el('h2', { id: 'goal-title' }, goalWords().title));
  let i = 0;
  (e.goal.subgoals || []).forEach((sg, n) => {
    const sub = el('div', { class: 'goal-sub', 'data-testid': 'goal-subgoal', 'data-subgoal': sg.id });
    sub.append(el('h3', {}, `${sg.id}. ${sg.domain}`));
    if (e.description && e.description[n]) sub.append(el('p', { class: 'muted goal-description' }, e.description[n]));
    const list = el('ul');
    const add = (slot, kind) => {
      const li = el('li', { class: `goal-entry goal-${kind}`, 'data-testid': 'goal-entry', 'data-index': i, 'data-kind': kind, 'data-slot': slot.slot, 'data-satisfied': 'false' });
      const shown = kind === 'constraint' ? shownValue(slot) : slot.value;
      li.dataset.shown = shown || '';
      li.append(el('span', { class: 'tick', 'aria-hidden': 'true' }), el('span', { class: 'goal-text' }, goalText(slot.slot, shown, kind)));
      list.append(li);
      i += 1;
    };
    for (const c of sg.constraints || []) add(c, 'constraint');
    for (const r of sg.requests || []) add(r, 'request');
    sub.append(list);
    panel.append(sub);
  });
}

// The panel's words: the study's `goals.text` (`title`, `done`) from the welcome, else the
// page language's.
function goalWords() {
  const own = (st.study && st.study.goal_text) || {};
  return { title: own.title || t('room-js-goal-title'), done: own.done || t('room-js-goal-done') };
}

// A constraint's value as the guest reads it: a reference to an earlier sub-goal in the study's
// `goals.text.reference` words (`{id}`, `{column}`), else the stored value.
function shownValue(c) {
  const tpl = st.study && st.study.goal_text && st.study.goal_text.reference;
  if (!tpl || !c.reference) return c.value;
  return tpl.replaceAll('{id}', String(c.reference.subgoal)).replaceAll('{column}', c.reference.column);
}

function goalText(slot, value, kind) {
  if (kind === 'request') return `${slot}: ${value || '?'}`;
  return `${slot}: ${value}`;
}

function renderTurnState(e) {
  const panel = $('goal-panel');
  if (role !== 'user' || !panel) return;
  (e.user_state || []).forEach((x, i) => {
    const li = panel.querySelector(`li[data-index="${i}"]`);
    if (!li) return;
    const done = !!x.satisfied;
    li.classList.toggle('done', done);
    li.dataset.satisfied = done ? 'true' : 'false';
    li.querySelector('.tick').textContent = done ? '✓' : '';
    const value = x.kind === 'constraint' ? li.dataset.shown : x.value;
    li.querySelector('.goal-text').textContent = `${goalText(x.slot, value, x.kind)}${done ? ` ${goalWords().done}` : ''}`;
  });
}

// ---------------------------------------------------------------- the wizard's database

// The search panel, built when the wizard's welcome lists the study's tables: one filter row per
// column (text: equals or contains; numbers: a range), a results table from the `db_queried`
// event showing the table's `show` columns (all when it names none), and a "Use" button per row
// that selects it (`select`) for the {db.TABLE.COLUMN} slots.
function setupDatabase(tables) {
  if (role !== 'wizard' || !tables || !tables.length || $('db-panel')) return;
  const panel = el('section', { id: 'db-panel', class: 'panel', 'data-testid': 'db-panel', 'aria-labelledby': 'db-title' });
  panel.append(el('h2', { id: 'db-title' }, t('room-js-database')));
  const pick = el('select', { id: 'db-table', 'data-testid': 'db-table' });
  for (const table of tables) pick.append(el('option', { value: table.name }, table.label || table.name));
  const label = el('label', {}, `${t('room-js-table')} `);
  label.append(pick);
  const filters = el('div', { id: 'db-filters', 'data-testid': 'db-filters' });
  const search = el('button', { type: 'button', id: 'db-search', 'data-testid': 'db-search' }, t('room-js-search'));
  const selected = el('p', { id: 'db-selected', 'data-testid': 'db-selected', class: 'muted' });
  const results = el('table', { id: 'db-results', 'data-testid': 'db-results' });
  // The table scrolls sideways inside its own box, never the page.
  const scroll = el('div', { class: 'db-scroll' });
  scroll.append(results);
  panel.append(label, filters, search, selected, scroll);
  const after = $('options-panel');
  if (after && after.parentNode) after.parentNode.insertBefore(panel, after.nextSibling);
  else main.append(panel);
  const table = () => tables.find((t) => t.name === pick.value) || tables[0];
  const fillFilters = () => {
    filters.replaceChildren();
    for (const c of table().columns) {
      const row = el('div', { class: 'db-filter', 'data-column': c.name });
      const word = c.label || c.name;
      row.append(el('span', { class: 'db-column' }, word));
      if (c.type === 'text') {
        const op = el('select', { 'data-testid': `db-op-${c.name}`, 'aria-label': t('room-js-how-to-match', { column: word }) });
        op.append(el('option', { value: 'contains' }, t('room-js-contains')), el('option', { value: 'equals' }, t('room-js-equals')));
        row.append(op, el('input', { type: 'text', 'data-testid': `db-value-${c.name}`, 'aria-label': word, maxlength: 200 }));
      } else {
        row.append(
          el('input', { type: 'number', step: 'any', 'data-testid': `db-min-${c.name}`, 'aria-label': t('room-js-column-from', { column: word }), placeholder: t('room-js-from') }),
          el('input', { type: 'number', step: 'any', 'data-testid': `db-max-${c.name}`, 'aria-label': t('room-js-column-to', { column: word }), placeholder: t('room-js-to') }),
        );
      }
      filters.append(row);
    }
  };
  pick.addEventListener('change', fillFilters);
  fillFilters();
  search.addEventListener('click', () => {
    const out = [];
    for (const row of filters.children) {
      const column = row.dataset.column;
      const text = row.querySelector('input[type=text]');
      if (text) {
        if (text.value.trim()) out.push({ column, op: row.querySelector('select').value, value: text.value.trim() });
        continue;
      }
      const [lo, hi] = row.querySelectorAll('input[type=number]');
      const f = { column, op: 'range' };
      if (lo.value !== '') f.min = Number(lo.value);
      if (hi.value !== '') f.max = Number(hi.value);
      if ('min' in f || 'max' in f) out.push(f);
    }
    cmd({ cmd: 'query', table: table().name, filters: out });
  });
  if (inert()) for (const x of [pick, search]) x.disabled = true;
}

// A table of the study's database as the welcome frame describes it (its words included).
function dbTable(name) {
  return st.study && st.study.database ? st.study.database.find((x) => x.name === name) : undefined;
}

// What the wizard reads for a row: the first column the study shows (`show`, a name such as
// "Trattoria Lanterna", even when it is the key, as CrossWOZ's 名称 is); without `show`, the
// first column other than the key the program uses ("r01"), the key only if nothing else.
function rowName(spec, row, key) {
  if (!spec || !row) return key;
  const c = spec.show && spec.show.length
    ? spec.show[0]
    : spec.columns.map((x) => x.name).find((x) => x !== spec.key);
  return c && row[c] !== null && row[c] !== undefined && String(row[c]) !== '' ? String(row[c]) : key;
}

function renderDbResults(e) {
  const results = $('db-results');
  if (!results) return;
  const spec = dbTable(e.table);
  const cols = spec ? (spec.show && spec.show.length ? spec.show : spec.columns.map((c) => c.name)) : Object.keys(e.rows[0] || {});
  results.replaceChildren();
  results.dataset.table = e.table;
  results.dataset.count = String(e.rows.length);
  if (!e.rows.length) {
    results.append(el('caption', {}, t('room-js-nothing-found')));
    return;
  }
  const head = el('tr');
  const word = (c) => ((spec && spec.columns.find((x) => x.name === c)) || {}).label || c;
  for (const c of cols) head.append(el('th', { scope: 'col' }, word(c)));
  head.append(el('th', {}, ''));
  results.append(head);
  e.rows.forEach((r, i) => {
    const key = e.result_keys[i];
    const tr = el('tr', { 'data-key': key });
    for (const c of cols) tr.append(dbCell(r[c]));
    const use = el('button', { type: 'button', 'data-testid': `db-use-${key}` }, t('room-js-use'));
    use.disabled = inert();
    use.addEventListener('click', () => cmd({ cmd: 'select', table: e.table, key }));
    const td = el('td');
    td.append(use);
    tr.append(td);
    results.append(tr);
  });
}

// A results cell: long values (a list of nearby places) cut to DB_CELL_CHARS characters with
// the whole text in the cell's title (a tooltip).
const DB_CELL_CHARS = 40;
function dbCell(v) {
  const text = v === null || v === undefined ? '' : String(v);
  const chars = Array.from(text);
  if (chars.length <= DB_CELL_CHARS) return el('td', {}, text);
  return el('td', { title: text, class: 'db-cut' }, `${chars.slice(0, DB_CELL_CHARS - 1).join('')}…`);
}

function renderWelcome(study) {
  st.study = study;
  setupDatabase(study.database);
  if (study.map) {
    $('map-panel').hidden = false;
    $('map').setAttribute('src', study.map.url);
    $('map').alt = study.map.alt;
    setupMap(study);
  }
  $('typing').textContent = t('room-js-typing', { partner: study.partner.name });
}

// ---------------------------------------------------------------- connection

function onFrame(f) {
  switch (f.type) {
    case 'welcome': renderWelcome(f.study); break;
    case 'event':
      if (f.event.seq <= st.lastSeq) return;
      st.lastSeq = f.event.seq;
      renderEvent(f.event);
      break;
    case 'view': renderView(f.view); break;
    case 'ack': break;
    case 'error':
      // A suggestion closed meanwhile: the edited text stays in the box, to be sent as it is.
      if (f.detail && f.detail.refusal === 'suggestion_closed') st.editing = null;
      notice(refusalText(f));
      break;
    case 'partner':
      if (f.status === 'typing') {
        $('typing').hidden = false;
        clearTimeout(st.typingTimer);
        st.typingTimer = setTimeout(() => { $('typing').hidden = true; }, 3000);
      } else {
        st.partnerAway = f.status === 'reconnecting';
        renderPartner();
      }
      break;
    case 'ended': showEnd(f); break;
    default:
  }
}

// The session has ended: the room stays on screen, so the last messages can still be read, with
// a banner and a button that moves on to the next page (normally the questionnaire).
function showEnd(f) {
  st.done = true;
  st.next = safeNext(f.next);
  renderPartner();
  $('typing').hidden = true;
  // Every control goes grey at once (the options, the robot actions, the hint, the database):
  // a reply pressed now would only be refused.
  greyOut();
  if ($('approval')) $('approval').hidden = true;
  const banner = $('end-banner');
  // A participant whose seat a researcher took over is told so (the `seat_taken` error's words).
  // (Continue would only come back here: the page stays as it is, with the chat readable.)
  if (f.reason === 'seat_taken') {
    banner.replaceChildren(
      el('strong', {}, t('room-js-taken-over')),
      ` ${t('room-js-taken-over-rest')}`,
    );
    banner.hidden = false;
    return;
  }
  if (observing) {
    banner.hidden = false;
    $('continue-after-end').hidden = true;
    return;
  }
  if (banner.hidden) {
    banner.hidden = false;
    $('continue-after-end').focus({ preventScroll: true });
  }
}

function connect() {
  const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws${query}`);
  st.ws = ws;
  ws.onopen = () => {
    st.retry = 500;
    ws.send(JSON.stringify({ type: 'hello', last_seq: st.lastSeq }));
    $('conn-status').textContent = t('room-js-connected');
    main.dataset.connected = 'true';
  };
  ws.onmessage = (m) => {
    let f;
    try { f = JSON.parse(m.data); } catch { return; }
    onFrame(f);
  };
  ws.onclose = () => {
    main.dataset.connected = 'false';
    if (st.done || st.hidden) return;
    $('conn-status').textContent = t('room-js-reconnecting');
    st.retryTimer = setTimeout(connect, st.retry);
    st.retry = Math.min(st.retry * 2, 5000);
  };
}

// A page hidden by navigation (leaving it, or the back/forward cache keeping it) closes its
// socket at once, so the room tells the partner now instead of when the socket times out; a page
// shown again from the cache connects again and picks up from its last event.
function onPageHide() {
  st.hidden = true;
  clearTimeout(st.retryTimer);
  if (st.ws && st.ws.readyState <= WebSocket.OPEN) st.ws.close(1000, 'page hidden');
}

function onPageShow(ev) {
  if (!ev.persisted || !st.hidden) return;
  st.hidden = false;
  if (!st.done) connect();
}

// ---------------------------------------------------------------- input

function sendText() {
  const input = $('text-input');
  const text = input.value.trim();
  if (!text) return;
  const c = { cmd: 'text', text };
  // Sent from a suggestion the wizard edited: the log records how far it was changed.
  if (st.editing !== null) c.suggestion = st.editing;
  if (cmd(c)) input.value = '';
}

// ---------------------------------------------------------------- copilot

// The copilot's suggestion of the wizard's next message (docs/copilot.md): sent as it is,
// edited in the message box first, or dismissed. The wizard's next message closes it.
function showSuggestion(e) {
  if (!$('copilot-panel')) return;
  st.suggestion = { n: e.n, text: e.text };
  $('copilot-text').textContent = e.text;
  $('copilot-panel').hidden = inert();
}

function closeSuggestion() {
  st.suggestion = null;
  st.editing = null;
  if ($('copilot-panel')) $('copilot-panel').hidden = true;
}

if ($('copilot-panel')) {
  $('copilot-send').addEventListener('click', () => {
    if (!st.suggestion) return;
    cmd({ cmd: 'text', text: st.suggestion.text, suggestion: st.suggestion.n });
  });
  $('copilot-edit').addEventListener('click', () => {
    if (!st.suggestion) return;
    st.editing = st.suggestion.n;
    const input = $('text-input');
    input.value = st.suggestion.text;
    $('copilot-panel').hidden = true;
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  });
  $('copilot-dismiss').addEventListener('click', () => {
    $('copilot-panel').hidden = true;
    $('text-input').focus();
  });
}

$('composer').addEventListener('submit', (ev) => { ev.preventDefault(); sendText(); });
$('text-input').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); sendText(); }
});
$('text-input').addEventListener('input', () => {
  const now = Date.now();
  if (now - st.typingSent > 2000) { st.typingSent = now; send({ type: 'typing' }); }
});
// Finishing takes two clicks (no modal dialog, so keyboards and test drivers need nothing special).
$('finish').addEventListener('click', () => {
  const b = $('finish');
  if (b.dataset.armed === 'true') {
    b.dataset.armed = 'false';
    b.textContent = t('room-js-finish');
    cmd({ cmd: 'finish' });
    return;
  }
  b.dataset.armed = 'true';
  b.textContent = t('room-js-finish-confirm');
  setTimeout(() => { b.dataset.armed = 'false'; b.textContent = t('room-js-finish'); }, 5000);
});
if (role === 'user') {
  $('approve').addEventListener('click', () => cmd({ cmd: 'approve' }));
  $('deny').addEventListener('click', () => cmd({ cmd: 'deny' }));
} else {
  $('hint').addEventListener('click', () => cmd({ cmd: 'hint' }));
  if ($('action-panel')) {
    // Choosing an action opens it on its possible combination unless the robot and place
    // already chosen work for it; any choice of the wizard's own is kept until it is started.
    $('action-select').addEventListener('change', () => {
      st.actionChosen = true;
      const action = st.view && st.view.actions.find((a) => a.id === $('action-select').value);
      fillTargets(action);
      const combo = comboOf(action);
      if (!(combo && combo.ok)) choosePick(action);
      renderActions();
    });
    for (const id of ['robot-select', 'target-select']) {
      $(id).addEventListener('change', () => { st.actionChosen = true; renderActions(); });
    }
    $('action-send').addEventListener('click', () => {
      st.actionChosen = false;
      const action = $('action-select').value;
      const a = st.view && st.view.actions.find((x) => x.id === action);
      const c = { cmd: 'act', action, robot: $('robot-select').value };
      if (a && a.target) c.target = $('target-select').value;
      cmd(c);
    });
  }
}
$('continue-after-end').addEventListener('click', () => {
  if (st.next) location.href = st.next;
});
setInterval(() => { renderTimer(); renderPartner(); }, 250);
if (observing) {
  // Inputs stay on the page (the same layout as the participant's) but do nothing.
  greyOut();
  $('composer').hidden = true;
  $('finish').hidden = true;
  $('conn-status').textContent = t('room-js-observing');
  window.addEventListener('message', (m) => {
    if (m.origin !== location.origin || m.source !== window.parent || !m.data || typeof m.data !== 'object') return;
    if (m.data.reset) st.lastSeq = 0;
    if (m.data.frame) onFrame(m.data.frame);
  });
  window.parent.postMessage({ ready: role }, location.origin);
} else {
  window.addEventListener('pagehide', onPageHide);
  window.addEventListener('pageshow', onPageShow);
  connect();
}
