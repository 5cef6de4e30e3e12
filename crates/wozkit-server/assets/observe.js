// The observe page: one read-only WebSocket (`/ws?observe=SESSION`, docs/protocol.md) whose
// `observed` frames go to the room page of their role in its frame (room.js in read-only mode,
// by postMessage), and whose `seats` frames show each seat and the "Take over as wizard" button.

const $ = (id) => document.getElementById(id);
const main = $('observe');
const session = main.dataset.session;
const frames = { user: $('observe-user'), wizard: $('observe-wizard') };
const st = { lastSeq: 0, ready: { user: false, wizard: false }, queued: { user: [], wizard: [] }, ended: false, retry: 500 };

function toRole(role, msg) {
  const f = frames[role];
  if (!f) return;
  if (!st.ready[role]) {
    st.queued[role].push(msg);
    return;
  }
  f.contentWindow.postMessage(msg, location.origin);
}

// A frame is ready once its room.js listens: it says so, and its `load` event (which comes after
// its scripts ran) says the same in case that message came before this script listened.
function markReady(role) {
  if (st.ready[role]) return;
  st.ready[role] = true;
  for (const msg of st.queued[role].splice(0)) frames[role].contentWindow.postMessage(msg, location.origin);
}

window.addEventListener('message', (m) => {
  if (m.origin !== location.origin || !m.data || typeof m.data !== 'object') return;
  const role = m.data.ready;
  if (!frames[role] || m.source !== frames[role].contentWindow) return;
  markReady(role);
});
for (const role of Object.keys(frames)) {
  const f = frames[role];
  if (!f) continue;
  f.addEventListener('load', () => markReady(role));
  const doc = f.contentDocument;
  if (doc && doc.readyState === 'complete' && doc.getElementById('room')) markReady(role);
}

const SEAT_WORDS = { here: 'connected', away: 'away (reconnecting)', absent: 'not here', bot: 'a bot', ended: 'ended' };

function renderSeats(f) {
  $('observe-seats').textContent = `User: ${SEAT_WORDS[f.user] || f.user} · Wizard: ${SEAT_WORDS[f.wizard] || f.wizard}`;
  $('observe-seats').dataset.wizard = f.wizard;
  const form = $('take-over-form');
  if (form) form.hidden = !f.can_take_over;
}

function onFrame(f) {
  switch (f.type) {
    case 'observed': {
      const inner = f.frame;
      if (inner.type === 'event' && inner.event.seq > st.lastSeq) st.lastSeq = inner.event.seq;
      if (inner.type === 'ended') {
        st.ended = true;
        $('observe-ended').hidden = false;
      }
      toRole(f.role, { frame: inner });
      break;
    }
    case 'seats': renderSeats(f); break;
    case 'error': $('observe-status').textContent = f.message; break;
    default:
  }
}

function connect() {
  const proto = location.protocol === 'https:' ? 'wss' : 'ws';
  const ws = new WebSocket(`${proto}://${location.host}/ws?observe=${encodeURIComponent(session)}`);
  ws.onopen = () => {
    st.retry = 500;
    ws.send(JSON.stringify({ type: 'hello', last_seq: st.lastSeq }));
    $('observe-status').textContent = 'observing';
    main.dataset.connected = 'true';
  };
  ws.onmessage = (m) => {
    let f;
    try { f = JSON.parse(m.data); } catch { return; }
    onFrame(f);
  };
  ws.onclose = () => {
    main.dataset.connected = 'false';
    if (st.ended) {
      $('observe-status').textContent = 'ended';
      return;
    }
    $('observe-status').textContent = 'reconnecting…';
    setTimeout(connect, st.retry);
    st.retry = Math.min(st.retry * 2, 5000);
  };
}

if (main.dataset.live === 'true') {
  connect();
} else {
  $('observe-status').textContent = 'not live';
  $('observe-ended').hidden = false;
}
