// Small DOM helpers: the UI builds its elements with h() rather than
// HTML strings, so nothing a model or a user writes is ever parsed as HTML
// (Markdown goes through markdown.js, which sanitises).

// h creates an element. attrs maps attribute names to values (false, null
// and undefined leave the attribute out; "on…" keys with a function add
// event listeners; "dataset" takes an object); children are nodes, strings
// (added as text) or arrays of them; null and false children are skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v == null) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "dataset") {
      Object.assign(el.dataset, v);
    } else if (k === "class") {
      el.className = v;
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// $ finds one element by selector, in root or the document.
export const $ = (sel, root = document) => root.querySelector(sel);

// show sets whether el is visible.
export function show(el, visible) {
  el.hidden = !visible;
}

// setError shows message in el (an element with role=alert), or hides it.
export function setError(el, message) {
  el.textContent = message || "";
  el.hidden = !message;
}

// pretty formats a JSON value for reading.
export function pretty(v) {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

// globs splits a comma-separated list of globs, dropping empty entries.
export function globs(text) {
  return text.split(",").map((s) => s.trim()).filter(Boolean);
}

// countdown says how long ms milliseconds are, for deadlines: "4m 05s".
export function countdown(ms) {
  if (ms <= 0) return "passed";
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = String(s % 60).padStart(2, "0");
  return h > 0 ? `${h}h ${String(m).padStart(2, "0")}m` : `${m}m ${sec}s`;
}
