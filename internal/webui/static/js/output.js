// Structured output in the conversation: an answer's output part (the
// JSON valid against the turn's schema) shown as formatted, highlighted
// JSON under the answer, and parley's own repair requests told apart from
// the person's messages. jsonBlock also shows the agents' definitions.

import hljs from "../vendor/highlight.min.js";
import { h } from "./dom.js";
import { copyButton } from "./copy.js";

// Above this size JSON is shown without highlighting.
const highlightLimit = 100_000;

// jsonBlock is value as pretty-printed JSON in a highlighted code block
// (highlight.js escapes the text and adds only its own spans).
export function jsonBlock(value, cls = "") {
  const text = JSON.stringify(value, null, 2) ?? "null";
  const code = h("code", { class: "language-json" });
  if (text.length <= highlightLimit) {
    code.innerHTML = hljs.highlight(text, { language: "json", ignoreIllegals: true }).value;
    code.classList.add("hljs");
  } else {
    code.textContent = text;
  }
  return h("pre", { class: `json-block ${cls}`.trim() }, code);
}

// outputPart renders an output part ({type: "output", json}) under its
// answer, with a Copy button for the JSON.
export function outputPart(p) {
  return h("section", { class: "msg-output", "aria-label": "Structured output" },
    h("div", { class: "msg-output-head" },
      h("span", { class: "msg-output-label" }, "Output (JSON)"),
      copyButton(() => JSON.stringify(p.json, null, 2), "output-copy", "Copy the output")),
    jsonBlock(p.json));
}

// sameAsOutput reports whether the text of an answer is only the JSON of
// its output part (which is then shown once, formatted, under it).
export function sameAsOutput(m, text) {
  const out = (m.parts || []).find((p) => p.type === "output");
  if (!out) return false;
  let v;
  try {
    v = JSON.parse(text.trim().replace(/^```(?:json)?\s*([\s\S]*?)\s*```$/, "$1"));
  } catch {
    return false;
  }
  return JSON.stringify(v) === JSON.stringify(out.json);
}

// isRepair reports whether m is a request parley made of the model to
// repair an answer that did not match the output schema (a user message
// whose first part is an output-repair), not a person's message.
export function isRepair(m) {
  return m.role === "user" && Boolean(m.parts && m.parts.length && m.parts[0].type === "output-repair");
}

// repairPart renders the text of parley's repair request.
export function repairPart(p) {
  return h("div", { class: "msg-text plain msg-repair-text" }, p.text || "");
}

// roleLabel names who wrote m, as its message header says.
export function roleLabel(m) {
  if (isRepair(m)) return "parley (asked the model to fix its output)";
  return m.role === "user" ? "You" : "Assistant";
}
