// The replay page: steps of a finished session from `replay.json` (http/replay.rs), loaded in
// chunks one after another. Each step carries the engine's session (`s`) and what the pages derive
// from it (`d`): whole on a chunk's first step, then only the fields that changed, merged here in
// order. Nothing here interprets events: the world state is the server's fold of the log.

const $ = (id) => document.getElementById(id);
const main = $('replay');
const GAP_CAP_MS = 3000;
const GAP_MIN_MS = 60;

const st = {
  steps: [],       // by k: { k, t_ms, event, line, s, d }, as loaded
  chunkStart: [],  // by k: the first step of k's chunk (where whole state is)
  total: 0,
  world: false,
  facts: {},
  loadedTo: -1,    // highest k loaded
  at: 0,
  playing: false,
  timer: null,
  transcriptAt: 0, // the transcript shows steps 1..transcriptAt
};

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    e.setAttribute(k, v === true ? '' : String(v));
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

const SVG_NS = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmtTime(ms) {
  const s = Math.floor(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

// ---------------------------------------------------------------- loading

async function loadChunk(from) {
  const res = await fetch(`${main.dataset.src}?from=${from}`, { credentials: 'same-origin' });
  if (!res.ok) throw new Error(`replay data: HTTP ${res.status}`);
  const c = await res.json();
  if (c.facts) st.facts = c.facts;
  st.total = c.total;
  st.world = c.world;
  for (const step of c.steps) {
    st.steps[step.k] = step;
    st.chunkStart[step.k] = c.from;
    st.loadedTo = Math.max(st.loadedTo, step.k);
  }
  return c.next;
}

async function loadAll() {
  let next = 0;
  try {
    while (next !== null && next !== undefined) {
      next = await loadChunk(next);
      $('replay-scrubber').max = String(st.total);
      main.dataset.total = String(st.total);
      main.dataset.loaded = String(st.loadedTo);
      if (st.loadedTo >= 0 && st.steps[0] && !main.dataset.ready) {
        main.dataset.ready = 'true';
        if (!st.world) main.classList.add('no-world');
        show(0);
      } else {
        renderPosition();
      }
    }
    main.dataset.complete = 'true';
  } catch (e) {
    $('replay-position').textContent = String(e.message || e);
  }
}

// One change of a step (`[path, value]`, or `[path]` to remove a key) applied to the state.
function applyChange(root, change) {
  const path = change[0];
  let at = root;
  for (let i = 0; i < path.length - 1; i++) at = at[path[i]];
  const last = path[path.length - 1];
  if (change.length > 1) at[last] = change[1];
  else delete at[last];
}

// The state at step k: its chunk's whole state with every later step's changes applied in order.
function stateAt(k) {
  if (!st.world) return null;
  const from = st.chunkStart[k];
  const base = st.steps[from];
  const state = JSON.parse(JSON.stringify({ s: base.s, d: base.d }));
  for (let i = from + 1; i <= k; i++) {
    for (const change of st.steps[i].p || []) applyChange(state, change);
  }
  return state;
}

// ---------------------------------------------------------------- rendering

function renderPosition() {
  const step = st.steps[st.at];
  const time = step ? ` · ${fmtTime(step.t_ms)}` : '';
  const loading = st.loadedTo < st.total ? ` (loaded ${st.loadedTo + 1})` : '';
  $('replay-position').textContent = `step ${st.at} of ${st.total}${time}${loading}`;
}

function actorName(a) {
  if (!a) return '';
  if (a.type === 'system' || a === 'system') return 'system';
  const roles = st.facts.roles || {};
  const role = roles[a.role] || a.role || '';
  return a.name ? `${a.name} (bot, ${role})` : role;
}

function renderStep(step) {
  const box = $('replay-step');
  box.dataset.step = String(step.k);
  if (!step.event) {
    box.dataset.seq = '0';
    box.dataset.kind = '';
    box.replaceChildren(el('p', { class: 'muted' }, 'Before the first event: the study\'s initial state.'));
    return;
  }
  const e = step.event;
  box.dataset.seq = String(e.seq);
  box.dataset.kind = e.kind;
  const head = el('p', {});
  head.append(el('strong', {}, `#${e.seq} ${e.kind}`), el('span', { class: 'muted' }, ` · ${fmtTime(step.t_ms)} · ${actorName(e.actor)}`));
  const rest = { ...e };
  for (const k of ['v', 'seq', 'at_ms', 'actor', 'kind']) delete rest[k];
  box.replaceChildren(head, el('pre', { class: 'replay-event' }, JSON.stringify(rest, null, 1)));
}

function lineItem(step) {
  const l = step.line;
  const li = el('li', { class: `line ${l.kind}${l.role ? ` role-${l.role}` : ''}`, 'data-k': step.k, 'data-kind': l.kind });
  if (l.via) li.dataset.via = l.via;
  li.append(el('span', { class: 'who' }, l.who), el('span', { class: 'text' }, l.text));
  if (l.kind === 'message') {
    const how = l.via === 'free' ? 'free text' : `${l.via === 'fixed' ? 'fixed option' : 'option'}${l.label ? `: ${l.label}` : ''}`;
    li.append(el('span', { class: 'via' }, how));
  }
  return li;
}

// The transcript up to step k: appended when moving forward, rebuilt when moving back.
function renderTranscript(k) {
  const ol = $('replay-transcript');
  if (k < st.transcriptAt) {
    for (const li of [...ol.children]) if (Number(li.dataset.k) > k) li.remove();
  } else {
    for (let i = st.transcriptAt + 1; i <= k; i++) {
      if (st.steps[i] && st.steps[i].line) ol.append(lineItem(st.steps[i]));
    }
  }
  st.transcriptAt = k;
  ol.dataset.lines = String(ol.children.length);
  for (const li of ol.querySelectorAll('.current')) li.classList.remove('current');
  const last = ol.lastElementChild;
  if (last && Number(last.dataset.k) === k) {
    last.classList.add('current');
    // Scrolls the transcript only (scrollIntoView would move the page away from the controls).
    const top = last.offsetTop;
    if (top < ol.scrollTop || top + last.offsetHeight > ol.scrollTop + ol.clientHeight) {
      ol.scrollTop = Math.max(0, top + last.offsetHeight - ol.clientHeight);
    }
  }
}

function placeXY(id) {
  const l = (st.facts.locations || []).find((x) => x.id === id);
  return l ? { x: l.x, y: l.y } : null;
}

function robotXY(r) {
  const from = placeXY(r.location);
  const to = r.moving_to ? placeXY(r.moving_to) : null;
  if (!from || !to) return from;
  const f = Math.min(100, Math.max(0, r.percent ?? 0)) / 100;
  return { x: from.x + (to.x - from.x) * f, y: from.y + (to.y - from.y) * f };
}

const pct = (n) => `${+n.toFixed(2)}%`;

function mapPanel(d) {
  const map = st.facts.map;
  if (!map) return null;
  const frame = el('div', { class: 'replay-map', 'data-testid': 'replay-map' });
  frame.append(el('img', { src: map.url, alt: map.alt || 'map' }));
  const svg = svgEl('svg', { class: 'replay-map-overlay', 'aria-hidden': 'true' });
  if (d.alarm) {
    const at = placeXY(d.alarm.location);
    if (at) svg.append(svgEl('circle', { class: `alarm${d.alarm.cleared ? ' cleared' : ''}`, cx: pct(at.x), cy: pct(at.y), r: 14 }));
  }
  const spots = new Map();
  (d.robots || []).forEach((r, i) => {
    const at = robotXY(r);
    if (!at) return;
    const key = `${Math.round(at.x * 2)}:${Math.round(at.y * 2)}`;
    const n = spots.get(key) || 0;
    spots.set(key, n + 1);
    const to = r.moving_to ? placeXY(r.moving_to) : null;
    if (to) svg.append(svgEl('line', { class: 'route', x1: pct(at.x), y1: pct(at.y), x2: pct(to.x), y2: pct(to.y) }));
    const m = svgEl('svg', { class: `robot${r.action ? ' busy' : ''}`, x: pct(at.x), y: pct(at.y), overflow: 'visible', 'data-robot': r.id });
    m.append(svgEl('title', {}, r.name), svgEl('circle', { cx: n * 18, cy: 0, r: 8 }), svgEl('text', { x: n * 18, y: 0 }, String(i + 1)));
    svg.append(m);
  });
  frame.append(svg);
  return frame;
}

function section(title, ...children) {
  const s = el('section', { class: 'replay-part' });
  s.append(el('h3', {}, title), ...children.filter(Boolean));
  return s;
}

function dl(pairs) {
  const list = el('dl', {});
  for (const [k, v] of pairs) list.append(el('dt', {}, k), el('dd', {}, v));
  return list;
}

function renderWorld(state) {
  const box = $('replay-world');
  if (!state) {
    box.replaceChildren(el('h2', {}, 'World'), el('p', { class: 'muted' },
      st.facts.note || 'This log has no world: its transcript and judgments are the content.'));
    return;
  }
  const { s, d } = state;
  const timer = d.timer || {};
  const clock = timer.left_s === null || timer.left_s === undefined
    ? 'no time limit'
    : `${fmtTime(timer.left_s * 1000)} left of ${fmtTime(timer.limit_s * 1000)}`;
  const status = d.ended
    ? `ended: ${d.ended.reason}${d.ended.goal_reached ? ' (goal reached)' : ''}`
    : (s.started ? 'running' : 'not started');
  const overview = dl([
    ['Status', status],
    ['Clock', `${clock}${timer.elapsed_s != null ? ` · ${fmtTime(timer.elapsed_s * 1000)} in` : ''}`],
    ['Progress', `${d.progress}%${d.subtask ? ` · ${d.subtask}` : ''}`],
    ['Milestones', (d.milestones || []).map((m) => `${m.label} (${m.id})`).join(', ') || '—'],
    ['Messages', String(s.messages)],
  ]);
  overview.id = 'replay-overview';
  const vars = el('table', { id: 'replay-vars', class: 'replay-table' });
  for (const [k, v] of Object.entries(s.world || {})) {
    const tr = el('tr', { 'data-var': k });
    // An unset variable reads as unset, not as JSON's `null`.
    tr.append(el('th', {}, k), el('td', {}, v == null ? '— (unset)' : JSON.stringify(v)));
    vars.append(tr);
  }
  const robots = el('ul', { id: 'replay-robots', class: 'replay-robots' });
  for (const r of d.robots || []) {
    const act = r.action ? ` — ${r.action}${r.target ? ` → ${r.target}` : ''} (${r.percent ?? 0}%)` : ' — idle';
    robots.append(el('li', { 'data-robot': r.id, 'data-location': r.location, 'data-busy': r.action ? 'true' : 'false' },
      `${r.name} at ${r.location_name || r.location || '—'}, battery ${Math.round(r.battery ?? 0)}%${act}`));
  }
  const w = d.wizard || {};
  const u = d.user || {};
  const opts = el('ul', { id: 'replay-options', class: 'replay-options' });
  for (const id of w.option_order || []) {
    const o = { state: id, ...(w.options || {})[id] };
    const li = el('li', { 'data-state': o.state, class: w.hint === o.state ? 'hinted' : null });
    // An option without a text (free text, a robot button) or an act type shows only what it has.
    li.append(el('span', { class: 'muted' }, `${o.label || o.state}${o.act_type ? ` / ${o.act_type}` : ''}: `),
      document.createTextNode(o.text || '—'));
    opts.append(li);
  }
  if (!opts.children.length) opts.append(el('li', { class: 'muted' }, 'none offered'));
  const wizard = dl([
    ['Seat', w.presence || '—'],
    ['Dialogue state', w.state_label ? `${w.state_label} (${w.state})` : '—'],
    ['Waiting on', w.lock ? `${w.lock.kind}${w.lock.prompt ? `: ${w.lock.prompt}` : ''}` : '—'],
    ['Hint', w.hint || '—'],
  ]);
  const user = dl([
    ['Seat', u.presence || '—'],
    ['Asked to approve', u.lock ? (u.lock.prompt || 'yes') : '—'],
    ['Waiting for the wizard', u.muted ? 'yes' : 'no'],
  ]);
  const roles = st.facts.roles || {};
  const media = d.media ? el('img', { class: 'replay-media', src: d.media.url, alt: d.media.alt || '' }) : null;
  box.replaceChildren(
    el('h2', {}, 'World'),
    section('Session', overview),
    mapPanel(d),
    section('Robots', robots),
    section('Variables', vars),
    section(`${roles.wizard || 'Wizard'} (wizard)`, wizard, el('h4', {}, 'Options offered'), opts),
    section(`${roles.user || 'User'} (user)`, user),
    media ? section('Media shown', media) : null,
  );
  box.dataset.step = String(st.at);
}

function show(k) {
  k = Math.max(0, Math.min(k, st.loadedTo));
  if (!st.steps[k]) return;
  st.at = k;
  $('replay-scrubber').value = String(k);
  renderStep(st.steps[k]);
  renderTranscript(k);
  renderWorld(stateAt(k));
  renderPosition();
}

// ---------------------------------------------------------------- playing

function speed() {
  return Number($('replay-speed').value) || 1;
}

function stop() {
  st.playing = false;
  clearTimeout(st.timer);
  $('replay-play').textContent = 'Play';
  $('replay-play').setAttribute('aria-pressed', 'false');
}

function tick() {
  if (!st.playing) return;
  if (st.at >= st.total) {
    stop();
    return;
  }
  if (st.at + 1 > st.loadedTo) {
    st.timer = setTimeout(tick, 200); // the next chunk is still loading
    return;
  }
  show(st.at + 1);
  const next = st.steps[st.at + 1];
  const gap = next ? Math.max(0, next.t_ms - st.steps[st.at].t_ms) : 0;
  st.timer = setTimeout(tick, Math.max(GAP_MIN_MS, Math.min(GAP_CAP_MS, gap / speed())));
}

function play() {
  if (st.at >= st.total) show(0);
  st.playing = true;
  $('replay-play').textContent = 'Pause';
  $('replay-play').setAttribute('aria-pressed', 'true');
  tick();
}

function toggle() {
  if (st.playing) stop(); else play();
}

$('replay-play').addEventListener('click', toggle);
$('replay-back').addEventListener('click', () => { stop(); show(st.at - 1); });
$('replay-forward').addEventListener('click', () => { stop(); show(st.at + 1); });
$('replay-scrubber').addEventListener('input', (e) => { stop(); show(Number(e.target.value)); });
document.addEventListener('keydown', (e) => {
  const t = e.target;
  if (t && (t.tagName === 'SELECT' || t.tagName === 'TEXTAREA' || (t.tagName === 'INPUT' && t.type !== 'range'))) return;
  if (e.key === ' ' || e.key === 'Spacebar') {
    if (t && t.tagName === 'BUTTON') return; // a focused button takes space as its own click
    e.preventDefault();
    toggle();
  } else if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
    // The scrubber moves itself on arrows when focused; its input event shows the step.
    if (t && t.id === 'replay-scrubber') return;
    e.preventDefault();
    stop();
    show(st.at + (e.key === 'ArrowLeft' ? -1 : 1));
  }
});

loadAll();
