// Waiting room: keeps a WebSocket open so that the lobby holds this participant's place, shows
// the waiting time, and moves on when the server says so (`paired` → the room, `ended` → the
// completion page, `reassigned` → the other role's instructions). Reconnects by itself; the wait limit counts from the first connection.
// Its words come from the page (strings.js), in the study's language.

import { has, t } from './strings.js';

const main = document.querySelector('main[data-page="waiting"]');
const seat = main ? main.dataset.seat : '';
const query = seat ? `?seat=${encodeURIComponent(seat)}` : '';
const status = document.getElementById('waiting-status');
// The study's own words for the wait (its waiting page's title or text), else a plain phrase;
// an ellipsis is added unless the words already end in punctuation.
const own = main ? (main.dataset.waiting || '').trim() : '';
const words = own ? (/[.…!?:。！？：]$/.test(own) ? own : `${own}…`) : t('waiting-js-default');
let done = false;
let retry = 500;

const fmt = (s) => `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, '0')}`;
const go = (next) => {
  done = true;
  location.href = typeof next === 'string' && next.startsWith('/') && !next.startsWith('//') ? next : `/p${query}`;
};

function connect() {
  const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws${query}`);
  ws.onopen = () => {
    retry = 500;
    ws.send(JSON.stringify({ type: 'hello', last_seq: 0 }));
    status.textContent = words;
  };
  ws.onmessage = (m) => {
    let f;
    try { f = JSON.parse(m.data); } catch { return; }
    if (f.type === 'waiting') {
      status.textContent = t('waiting-js-time', { words, waited: fmt(f.waited_s), limit: fmt(f.limit_s) });
    } else if (f.type === 'paired' || f.type === 'ended') {
      status.textContent = t(f.type === 'paired' ? 'waiting-js-paired' : 'waiting-js-no-partner');
      go(f.next);
    } else if (f.type === 'reassigned') {
      // Too many people arrived for this role: the other role's instructions, then the queue.
      status.textContent = f.message || t('waiting-js-reassigned');
      done = true;
      setTimeout(() => go(f.next), 4000);
    } else if (f.type === 'error') {
      const key = `waiting-js-error-${String(f.code || '').replace(/_/g, '-')}`;
      status.textContent = has(key) ? t(key) : f.message;
      if (f.code === 'replaced') done = true;
    }
  };
  ws.onclose = () => {
    if (done) return;
    status.textContent = t('waiting-js-lost');
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 5000);
  };
}

connect();
