// The desk: tells the server every 2 s that the wizard is still here, and reloads the page
// when a turn arrives or is taken back — unless a reply is being written.
const main = document.querySelector('main[data-page="desk"]');
if (main) {
  const seat = main.dataset.seat ? `?seat=${encodeURIComponent(main.dataset.seat)}` : '';
  const writing = () => [...document.querySelectorAll('textarea')].some((t) => t.value.trim() !== '');
  setInterval(async () => {
    try {
      const res = await fetch(`/p/desk/poll${seat}`, { credentials: 'same-origin', cache: 'no-store' });
      if (!res.ok) return;
      const desk = await res.json();
      if (!desk.at_desk || (desk.version !== main.dataset.version && !writing())) {
        location.reload();
      }
    } catch {
      // The next poll tries again.
    }
  }, 2000);
}
