// Chat statuses as people read them.

import { h } from "./dom.js";

const words = {
  waiting: "waiting",
  pending: "pending",
  running: "running",
  requires_action: "action required",
  error: "error",
};

export function statusText(s) {
  return words[s] || s || "";
}

// statusBadge is the small coloured label of a status.
export function statusBadge(s) {
  return h("span", { class: "status-badge", dataset: { status: s } }, statusText(s));
}

// busy says whether a run is under way or waits: a new message queues, and
// Stop has something to stop.
export function busy(s) {
  return s === "pending" || s === "running" || s === "requires_action";
}

// connState shows a stream's state on its dot, in words too (title and
// label), not only by its colour.
export function connState(el, state, what) {
  el.dataset.state = state;
  const words = `${what}: ${state === "connected" ? "live" : "reconnecting…"}`;
  el.title = words;
  el.setAttribute("aria-label", words);
}

// announce says text to screen readers through the page's polite live
// region (#announcer), replacing what it said before: a finished answer,
// or a change of status that needs the person.
export function announce(text) {
  const el = document.getElementById("announcer");
  if (el) el.textContent = text;
}

// statusAnnouncement is what a change to chat c's status says, "" for
// the changes that need no one (running, waiting).
export function statusAnnouncement(c) {
  if (c.status === "requires_action") {
    const calls = (c.required_action && c.required_action.tool_calls) || [];
    return calls.some((t) => t.kind === "approval") ? "Waiting for your approval" : "Waiting for your result";
  }
  if (c.status === "error") {
    const e = c.last_error || {};
    return `Error: ${e.message || e.kind || "the run failed"}`;
  }
  return "";
}
