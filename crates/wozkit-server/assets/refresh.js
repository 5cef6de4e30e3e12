// Researcher pages: reload every few seconds while there is something live to watch.
const main = document.querySelector('main');
if (!main || main.dataset.live !== 'false') {
  setTimeout(() => location.reload(), 3000);
}
