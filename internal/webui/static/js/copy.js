// Copy buttons: one on each code block of an answer, and one on each
// message that copies its text as the Markdown it was written in.

import { h } from "./dom.js";

// copyText puts text on the clipboard and says whether it got there. The
// Clipboard API needs a secure context (HTTPS, or localhost); elsewhere a
// hidden text box is selected and copied the old way.
export async function copyText(text) {
  if (navigator.clipboard && navigator.clipboard.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Refused (no permission, the page not focused): try the old way.
    }
  }
  const area = h("textarea", { class: "visually-hidden", "aria-hidden": "true", tabindex: "-1" });
  area.value = text;
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

// copyButton makes a button that copies what text() returns; its label
// says "Copied" (or that it failed) for a moment after.
export function copyButton(text, cls, ariaLabel) {
  const b = h("button", { type: "button", class: `copy-button ${cls}`, "aria-label": ariaLabel, title: ariaLabel }, "Copy");
  let timer = 0;
  b.addEventListener("click", async () => {
    const ok = await copyText(text());
    b.textContent = ok ? "Copied" : "Copy failed";
    b.dataset.copied = String(ok);
    clearTimeout(timer);
    timer = setTimeout(() => {
      b.textContent = "Copy";
      delete b.dataset.copied;
    }, 2000);
  });
  return b;
}

// addCodeCopy gives every code block under root a Copy button of its own.
export function addCodeCopy(root) {
  for (const pre of root.querySelectorAll("pre")) {
    if (pre.parentElement && pre.parentElement.classList.contains("code-block")) continue;
    const box = h("div", { class: "code-block" });
    pre.replaceWith(box);
    // The code, without the line end that closes the block.
    box.append(copyButton(() => pre.textContent.replace(/\n$/, ""), "code-copy", "Copy code"), pre);
  }
}
