// Ending pages of a crowd platform's participant: back to the platform after the seconds the
// link names, unless the participant presses "Stay on this page" (a timed return that can be
// stopped, instead of a <meta> refresh that cannot). Without this script the link is still there.
const link = document.querySelector('a[data-redirect-s]');
const stay = document.getElementById('completion-stay');
if (link) {
  const seconds = Number(link.dataset.redirectS) || 5;
  const timer = setTimeout(() => {
    location.href = link.href;
  }, seconds * 1000);
  if (stay) {
    stay.hidden = false;
    stay.addEventListener('click', () => {
      clearTimeout(timer);
      stay.hidden = true;
      const auto = document.getElementById('completion-auto');
      if (auto) auto.hidden = true;
      link.focus();
    });
  }
}
