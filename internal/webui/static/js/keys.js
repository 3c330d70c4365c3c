// Keyboard moves that are not the browser's own: the arrow keys (and
// Home, End) walk the chat list's links, as in a menu, while Tab still
// goes through them one by one.

// listKeys makes the arrow keys move the focus through the links in list.
export function listKeys(list) {
  list.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    const links = [...list.querySelectorAll("a[href]")];
    const at = links.indexOf(document.activeElement);
    if (at === -1 || links.length === 0) return;
    const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: links.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    links[Math.max(0, Math.min(links.length - 1, to))].focus();
  });
}
