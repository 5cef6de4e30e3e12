// Self-dialogs and span annotation. The forms work without this script; it adds:
// - on the writing page: Enter sends the turn (Shift+Enter for a new line), the typed text is
//   kept as a draft in this tab until it is sent, and the newest turn is scrolled into view;
// - on the span page: selecting words in an utterance fills the utterance, the offsets and the
//   words of the marking form (offsets in characters, as Taskmaster-1 counts them).
// Its sentences come from the page in the study's language (`sp-js-*`, see strings.js).

import { t } from './strings.js';

const chars = (s) => Array.from(s).length;

function writing(main) {
  const form = document.getElementById("sd-next");
  const last = main.querySelector(".sd-turns li:last-child");
  if (last) last.scrollIntoView({ block: "nearest" });
  if (!form) return;
  const area = form.querySelector("textarea");
  const key = `sd-draft:${form.lease.value}:${form.index.value}`;
  try {
    const draft = sessionStorage.getItem(key);
    if (draft && !area.value) area.value = draft;
  } catch (_) { /* storage unavailable: no drafts */ }
  area.addEventListener("input", () => {
    try { sessionStorage.setItem(key, area.value); } catch (_) { /* ignore */ }
  });
  area.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (area.value.trim()) form.requestSubmit();
    }
  });
  form.addEventListener("submit", () => {
    try { sessionStorage.removeItem(key); } catch (_) { /* ignore */ }
    const button = form.querySelector("button");
    if (button) button.disabled = true;
  });
  area.focus();
}

function spans() {
  const form = document.getElementById("sp-mark");
  if (!form) return;
  const status = document.createElement("p");
  status.className = "muted sp-status";
  status.setAttribute("role", "status");
  status.textContent = t("sp-js-hint");
  form.prepend(status);
  document.addEventListener("mouseup", () => {
    const sel = window.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return;
    const range = sel.getRangeAt(0);
    const holder = range.startContainer.parentElement?.closest(".sp-text");
    if (!holder || !holder.contains(range.endContainer)) {
      status.textContent = t("sp-js-one-utterance");
      return;
    }
    const before = document.createRange();
    before.selectNodeContents(holder);
    before.setEnd(range.startContainer, range.startOffset);
    let text = range.toString();
    let start = chars(before.toString());
    // Spaces at the edges of a selection are not part of a span.
    const lead = chars(text) - chars(text.trimStart());
    start += lead;
    text = text.trim();
    if (!text) return;
    const end = start + chars(text);
    form.turn.value = holder.dataset.turn;
    form.start.value = String(start);
    form.end.value = String(end);
    form.text.value = text;
    status.textContent = t("sp-js-selected", { text, turn: holder.dataset.turn, start, end });
    form.slot.focus();
  });
}

const main = document.querySelector("main[data-page]");
if (main?.dataset.page === "self-dialog") writing(main);
if (main?.dataset.page === "spans") spans();
