// Review page: "select shown" ticks or clears every row's checkbox on the page; ticking
// "all matching the filter" makes the row ticks irrelevant, so they are shown as such.
const shown = document.getElementById("select-shown");
const all = document.getElementById("all-matching");
const boxes = () => document.querySelectorAll('input[name="p"][form="bulk"]');
if (shown) {
  shown.addEventListener("change", () => {
    for (const b of boxes()) b.checked = shown.checked;
  });
}
if (all) {
  all.addEventListener("change", () => {
    for (const b of boxes()) b.disabled = all.checked;
    if (shown) shown.disabled = all.checked;
  });
}
