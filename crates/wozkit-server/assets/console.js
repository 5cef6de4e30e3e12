// Console overview: keeps the study cards' figures current from the server-sent events of
// /researcher/live (EventSource reconnects by itself). Without this script the page shows the
// figures as of its loading.
const overview = document.getElementById('overview');
const state = document.getElementById('overview-state');

function money(amount, currency) {
  return `${amount.toFixed(2)} ${currency}`.trim();
}

function duration(s) {
  if (s === null || s === undefined) return '—';
  return s < 120 ? `${Math.round(s)} s` : `${(s / 60).toFixed(1)} min`;
}

function texts(f) {
  const spend = f.budget !== null && f.budget_percent !== null
    ? `spent ${money(f.spent, f.currency)} of ${money(f.budget, f.currency)} (${f.budget_percent.toFixed(1)} %)`
    : `spent ${money(f.spent, f.currency)}`;
  const out = {
    waiting_users: String(f.waiting_users),
    waiting_wizards: String(f.waiting_wizards),
    live: String(f.live),
    finished: String(f.finished),
    abandoned: String(f.abandoned),
    no_partner: String(f.no_partner),
    screened_out: String(f.screened_out),
    unfinished: String(f.unfinished),
    codes: String(f.codes),
    median_duration: duration(f.median_duration_s),
    spend,
  };
  if (f.items_done !== null && f.items_total !== null) {
    out.items = `${f.items_done} / ${f.items_total}`;
  }
  return out;
}

function update(figures) {
  for (const f of figures.studies) {
    const card = Array.from(overview.querySelectorAll('.study-card'))
      .find((c) => c.dataset.study === f.study);
    if (!card) continue;
    for (const [key, text] of Object.entries(texts(f))) {
      const el = card.querySelector(`[data-figure="${key}"]`);
      if (!el || el.textContent === text) continue;
      el.textContent = text;
      el.classList.remove('changed');
      void el.offsetWidth; // restart the highlight
      el.classList.add('changed');
    }
    const spend = card.querySelector('[data-figure="spend"]');
    if (spend) spend.classList.toggle('over-budget', Boolean(f.budget_warning));
  }
  const at = new Date(figures.computed_at_ms);
  state.textContent = `Live: figures as of ${at.toLocaleTimeString()}.`;
}

if (overview && window.EventSource) {
  const source = new EventSource(overview.dataset.liveUrl);
  source.addEventListener('figures', (e) => {
    try {
      update(JSON.parse(e.data));
    } catch (err) {
      state.textContent = `The live figures could not be read: ${err}`;
    }
  });
  source.addEventListener('error', () => {
    state.textContent = 'Connection lost; reconnecting… (the figures shown may be out of date)';
  });
}
