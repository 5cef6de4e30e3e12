// Chat and arena pages: send a turn without leaving the page and show the replies as they are
// written; the stream ends with the page as the server now draws it (labels, the end button, a
// failure or the questions), put in place of the old one. The form works without this script
// too (the page comes back with the replies).
import { t } from './strings.js';

let main = null;
let form = null;

function addLine(side, who, text) {
  const log = document.querySelector(`[data-testid="log-${side}"]`);
  if (!log) return null;
  const li = document.createElement('li');
  li.className = `said ${who}`;
  const speaker = document.createElement('span');
  speaker.className = 'speaker';
  speaker.textContent = who === 'user' ? t('chat-js-you') : log.closest('section').querySelector('h2').textContent;
  const body = document.createElement('span');
  body.className = 'text';
  body.textContent = text;
  li.append(speaker, ' ', body);
  log.append(li);
  log.scrollTop = log.scrollHeight;
  return body;
}

function typing(side, on) {
  const t = document.querySelector(`[data-testid="typing-${side}"]`);
  if (t) t.hidden = !on;
}

function sides() {
  return [...document.querySelectorAll('section.chat-side')].map((s) => s.dataset.side);
}

// Shows the replies as they arrive; returns the page the stream ended with, if it did.
async function streamReplies(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const bubbles = {};
  let buffer = '';
  let page = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (!line.trim()) continue;
      const frame = JSON.parse(line);
      if (frame.type === 'delta') {
        typing(frame.side, false);
        if (!bubbles[frame.side]) bubbles[frame.side] = addLine(frame.side, 'system', '');
        if (bubbles[frame.side]) bubbles[frame.side].textContent += frame.text;
      } else if (frame.type === 'reply') {
        typing(frame.side, false);
        if (!bubbles[frame.side]) bubbles[frame.side] = addLine(frame.side, 'system', '');
        if (bubbles[frame.side]) bubbles[frame.side].textContent = frame.text;
      } else if (frame.type === 'failed' || frame.type === 'refused') {
        typing(frame.side, false);
      } else if (frame.type === 'page') {
        page = frame.html;
      }
    }
  }
  return page;
}

// Puts the page's new drawing in place of the old one (a chat page still: anything else is
// loaded as a page of its own, with its scripts).
function show(html) {
  const next = new DOMParser().parseFromString(html, 'text/html');
  const fresh = next.querySelector('main.chat');
  const old = document.querySelector('main.chat');
  if (!fresh || !old) {
    location.reload();
    return;
  }
  document.title = next.title;
  old.replaceWith(document.adoptNode(fresh));
  bind();
}

async function post(action, body, showText) {
  const response = await fetch(action, {
    method: 'POST',
    body: new URLSearchParams(body),
    headers: { Accept: 'application/x-ndjson' },
    credentials: 'same-origin',
  });
  const type = response.headers.get('content-type') || '';
  if (!response.ok && type.includes('application/x-ndjson')) {
    // Refused (e.g. a reply still pending in another tab): say why and keep what was typed.
    const frame = JSON.parse((await response.text()).split('\n')[0] || '{}');
    let notice = document.querySelector('[data-testid="chat-notice"]');
    if (!notice) {
      notice = document.createElement('p');
      notice.className = 'problem';
      notice.setAttribute('role', 'alert');
      notice.dataset.testid = 'chat-notice';
      main.querySelector('.chat-sides').before(notice);
    }
    notice.textContent = frame.message || t('chat-js-not-sent');
    for (const b of document.querySelectorAll('#chat-send button, #chat-send textarea, form[action^="/p/chat/retry"] button')) b.disabled = false;
    return;
  }
  let page = null;
  if (response.ok && type.includes('application/x-ndjson')) {
    if (showText) for (const side of sides()) addLine(side, 'user', showText);
    for (const side of sides()) typing(side, true);
    page = await streamReplies(response);
  }
  if (page) {
    show(page);
    return;
  }
  // No page at the end of the stream (an older server, a refusal answered with a page): it is
  // loaded again. The message box is emptied first: a browser that restores fields on reload
  // (Firefox) would otherwise show the message just sent as one still to send.
  if (showText && form) {
    const box = form.querySelector('textarea[name="text"]');
    if (box) box.value = '';
  }
  location.reload();
}

// Wires the page as drawn (on load, and each time a turn's stream brings it drawn again).
function bind() {
  main = document.querySelector('main.chat');
  form = document.getElementById('chat-send');
  bindSend();
  for (const retryForm of document.querySelectorAll('form[action^="/p/chat/retry"]')) {
    retryForm.addEventListener('submit', (e) => {
      e.preventDefault();
      for (const b of retryForm.querySelectorAll('button')) b.disabled = true;
      post(retryForm.action, new FormData(retryForm), null).catch(() => location.reload());
    });
  }
  // A reply still being written when the page was drawn (a reload mid-reply): look again soon.
  if (main && main.dataset.pending === 'true') {
    for (const b of document.querySelectorAll('#chat-send button, #chat-send textarea')) b.disabled = true;
    setTimeout(() => location.reload(), 1500);
  }
}

function bindSend() {
  if (!main || !form) return;
  form.addEventListener('submit', (e) => {
    // The end button posts this form elsewhere (with the labels and anything typed): the
    // browser sends it as a plain form and the server answers with the next page.
    if (e.submitter && e.submitter.hasAttribute('formaction')) return;
    e.preventDefault();
    const text = form.querySelector('textarea[name="text"]');
    if (!text || !text.value.trim()) return;
    const data = new FormData(form);
    for (const b of form.querySelectorAll('button, textarea')) b.disabled = true;
    const message = text.value.trim();
    post(form.action, data, message).catch(() => location.reload());
  });
  const text = form.querySelector('textarea[name="text"]');
  if (text) {
    text.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
    if (main.dataset.pending !== 'true') text.focus();
  }
}

bind();
