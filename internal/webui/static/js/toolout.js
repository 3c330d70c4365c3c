// toolOutput renders a tool's result for its card. A result of content
// blocks, as MCP tools return them ({"content": [{"type": "text", ...},
// {"type": "image", "mime_type": "image/png", "data": "<base64>"}]}), shows
// its texts as text and its images as images; anything else shows as
// JSON. Long texts are folded, with a button to show them whole.

import { h, pretty } from "./dom.js";

// Above either bound a text is folded.
const foldChars = 2000;
const foldLines = 30;

// Only these types become <img>, from a data: URL (the page loads images
// from nowhere else); SVG, which can carry script, is not among them.
const imageTypes = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const base64 = /^[A-Za-z0-9+/]+={0,2}$/;

export function toolOutput(output, isError) {
  const cls = isError ? "tool-output tool-error" : "tool-output";
  const blocks = contentBlocks(output);
  if (!blocks) return folded(h("pre", { class: cls }, pretty(output)));
  const box = h("div", { class: `${cls} tool-content` });
  for (const b of blocks) box.append(block(b));
  if (output.structured !== undefined) {
    box.append(h("div", { class: "muted" }, "Structured content"), folded(h("pre", {}, pretty(output.structured))));
  }
  return box;
}

// contentBlocks is output's list of content blocks, or null when output
// is not such a result.
function contentBlocks(output) {
  if (!output || typeof output !== "object" || Array.isArray(output) || !Array.isArray(output.content)) return null;
  const extra = Object.keys(output).filter((k) => k !== "content" && k !== "structured");
  if (extra.length || !output.content.every((b) => b && typeof b === "object" && typeof b.type === "string")) return null;
  return output.content;
}

function block(b) {
  if (b.type === "text" && typeof b.text === "string") return folded(h("pre", { class: "tool-text" }, b.text));
  const mime = String(b.mime_type || b.mimeType || "").toLowerCase();
  if (b.type === "image" && imageTypes.has(mime) && typeof b.data === "string" && base64.test(b.data)) {
    return h("img", { class: "tool-image", src: `data:${mime};base64,${b.data}`, alt: `Image from the tool (${mime})` });
  }
  return folded(h("pre", { class: "tool-block" }, pretty(b)));
}

// folded returns pre as it is when its text is short, else in a box that
// shows its start and a button to show it all.
function folded(pre) {
  const text = pre.textContent;
  const lines = text.split("\n").length;
  if (text.length <= foldChars && lines <= foldLines) return pre;
  pre.classList.add("folded");
  const more = `Show all (${lines === 1 ? "1 line" : `${lines.toLocaleString("en-US")} lines`}, ${text.length.toLocaleString("en-US")} characters)`;
  const button = h("button", { type: "button", class: "fold-toggle", "aria-expanded": "false" }, more);
  button.addEventListener("click", () => {
    const open = pre.classList.toggle("folded") === false;
    button.setAttribute("aria-expanded", String(open));
    button.textContent = open ? "Show less" : more;
  });
  return h("div", { class: "fold" }, pre, button);
}
