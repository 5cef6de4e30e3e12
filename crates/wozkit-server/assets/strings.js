// The page's interface strings, in the study's language: the server writes its catalogue's
// messages for this script into a JSON block (`<script type="application/json" id="strings">`,
// see src/i18n.rs), variables as `{name}` holes. A key missing from the block shows as itself.

const block = document.getElementById('strings');
let strings = {};
try {
  strings = block ? JSON.parse(block.textContent) : {};
} catch {
  strings = {};
}

// Whether the page's catalogue has the message `key`.
export function has(key) {
  return typeof strings[key] === 'string';
}

// The message `key` with its holes filled from `args`.
export function t(key, args = {}) {
  const text = typeof strings[key] === 'string' ? strings[key] : key;
  return text.replace(/\{(\w+)\}/g, (hole, name) => (name in args ? String(args[name]) : hole));
}
