// Keyboard moves that are not the browser's own: the chat list is one Tab
// stop (a roving tabindex), and inside it the arrow keys (and Home, End)
// walk its links, as in a menu. Tab from the list goes on to what follows
// it, however many chats it holds.

// listKeys makes list's links one Tab stop, moved through with the arrow
// keys. The stop is the link last focused while it is listed, else the
// current chat's (aria-current), else the first.
export function listKeys(list) {
  let last = null; // the chat id of the link last focused
  const links = () => [...list.querySelectorAll("a[href]")];
  const idOf = (a) => a.closest("li")?.dataset.chatId ?? null;
  const rove = () => {
    const all = links();
    const stop = all.find((a) => last !== null && idOf(a) === last) ||
      all.find((a) => a.getAttribute("aria-current") === "page") || all[0];
    for (const a of all) a.tabIndex = a === stop ? 0 : -1;
  };
  // The rows are made again on every change of the list.
  new MutationObserver(rove).observe(list, { childList: true, subtree: true, attributes: true, attributeFilter: ["aria-current"] });
  list.addEventListener("focusin", (e) => {
    const a = e.target.closest("a[href]");
    if (!a) return;
    last = idOf(a);
    rove();
  });
  list.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    const all = links();
    const at = all.indexOf(document.activeElement);
    if (at === -1 || all.length === 0) return;
    const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: all.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    all[Math.max(0, Math.min(all.length - 1, to))].focus();
  });
}
