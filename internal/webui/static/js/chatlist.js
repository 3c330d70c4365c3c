// The chat list: the owner's chats, filtered by status, label and
// archived on the server and by title here, kept live by the owner feed
// (GET /api/v1/chats/watch). Feed events are hints: on every (re)connect
// the list is read again.

import { $, h, setError, show } from "./dom.js";
import { EventStream } from "./sse.js";
import { connState, statusBadge } from "./status.js";

const pageSize = 100;
// When a title search is typed, pages are read until the list is complete
// (at most this many chats), since the search runs here, not on the server.
const searchLimit = 5000;

export class ChatList {
  constructor(api, hooks) {
    this.api = api;
    this.hooks = hooks;
    this.chats = new Map(); // id → Chat, the newest version seen
    this.cursor = "";
    this.run = null; // the current reload; older ones drop their results
    this.held = null; // feed events that arrived during a reload
    this.more = null; // the page being read by loadMore
    this.deleted = new Set(); // ids the feed said were deleted: late copies stay out
    this.feed = null;
    this.currentId = null;
    this.el = $("#chat-list");
    this.filters = { status: $("#filter-status"), label: $("#filter-label"), archived: $("#filter-archived"), search: $("#filter-search") };
    this.filters.status.addEventListener("change", () => this.reload());
    this.filters.archived.addEventListener("change", () => this.reload());
    this.filters.label.addEventListener("change", () => this.reload());
    this.filters.label.addEventListener("keydown", (e) => { if (e.key === "Enter") this.reload(); });
    this.filters.search.addEventListener("input", () => this.searchChanged());
    $("#list-more").addEventListener("click", () => this.loadMore());
  }

  start() {
    this.feed = new EventStream({
      url: "/api/v1/chats/watch",
      token: this.api.token,
      onOpen: () => this.reload(),
      onEvent: (type, data) => this.event(type, data),
      onState: (s) => connState($("#feed-state"), s, "Chat list"),
      onEnd: (reason) => { if (reason === "unauthorized") this.hooks.onUnauthorized(); },
    });
  }

  query(cursor) {
    const q = new URLSearchParams({ limit: String(pageSize) });
    const status = this.filters.status.value;
    if (status) q.set("status", status);
    const label = this.filters.label.value.trim();
    if (label) q.set("label", label);
    q.set("archived", this.filters.archived.checked ? "true" : "false");
    if (cursor) q.set("cursor", cursor);
    return `/api/v1/chats?${q}`;
  }

  // reload reads the first page again with the current filters. Feed
  // events that arrive while it is read are held and applied after it, so
  // the page, older than they are, cannot undo them.
  reload() {
    const run = {};
    this.run = run;
    this.held = [];
    const load = async () => {
      let page;
      try {
        page = await this.api.get(this.query(""));
      } catch (err) {
        if (this.run === run) {
          this.loadError(err);
          this.replay();
        }
        return;
      }
      if (this.run !== run) return; // a newer reload superseded this one
      setError($("#filter-error"), "");
      this.chats.clear();
      for (const c of page.chats) {
        if (!this.deleted.has(c.id)) this.chats.set(c.id, c);
      }
      this.cursor = page.next_cursor || "";
      this.replay();
      this.render();
      if (this.filters.search.value.trim()) await this.loadAll(run);
    };
    return load();
  }

  // replay applies the feed events held during a reload.
  replay() {
    const held = this.held || [];
    this.held = null;
    for (const [type, data] of held) this.event(type, data);
  }

  loadError(err) {
    setError($("#filter-error"), err.status === 400 ? err.message : `Could not load the chats: ${err.message}`);
  }

  // loadMore reads the next page; a call while one is read waits for it.
  loadMore() {
    if (!this.cursor) return Promise.resolve();
    if (this.more) return this.more;
    const run = this.run;
    const cursor = this.cursor;
    this.more = (async () => {
      try {
        const page = await this.api.get(this.query(cursor));
        if (this.run !== run) return;
        for (const c of page.chats) {
          if (!this.deleted.has(c.id)) this.keep(c);
        }
        this.cursor = page.next_cursor || "";
        this.render();
      } catch (err) {
        if (this.run === run) this.loadError(err);
        this.cursor = this.run === run ? "" : this.cursor; // stop a search's loop
      } finally {
        this.more = null;
      }
    })();
    return this.more;
  }

  async loadAll(run) {
    while (this.cursor && this.chats.size < searchLimit && this.run === run) {
      await this.loadMore();
    }
  }

  searchChanged() {
    if (this.filters.search.value.trim() && this.cursor) this.loadAll(this.run);
    this.render();
  }

  // matches says whether c belongs in the list under the server-side filters.
  matches(c) {
    const status = this.filters.status.value;
    if (status && c.status !== status) return false;
    if (Boolean(c.archived) !== this.filters.archived.checked) return false;
    const label = this.filters.label.value.trim();
    if (label) {
      const i = label.indexOf(":");
      const k = i < 0 ? label : label.slice(0, i);
      const v = i < 0 ? "" : label.slice(i + 1);
      if (!c.labels || c.labels[k] !== v) return false;
    }
    return true;
  }

  // keep stores c unless an equal or newer version is known.
  keep(c) {
    const old = this.chats.get(c.id);
    if (old && (old.version || 0) > (c.version || 0)) return false;
    this.chats.set(c.id, c);
    return true;
  }

  // upsert takes a chat seen elsewhere (the open conversation, a new chat).
  upsert(c) {
    if (this.deleted.has(c.id)) return;
    if (!this.matches(c)) {
      if (this.chats.delete(c.id)) this.render();
      return;
    }
    if (this.keep(c)) this.render();
  }

  event(type, data) {
    if (type === "resync") return; // the stream reconnects and reloads
    const c = data && data.chat;
    if (!c) return;
    if (this.held) {
      this.held.push([type, data]);
      return;
    }
    if (type === "deleted") {
      this.deleted.add(c.id);
      this.chats.delete(c.id);
      this.render();
      this.hooks.onDeleted(c.id);
      return;
    }
    this.upsert(c);
  }

  markCurrent(id) {
    this.currentId = id;
    for (const li of this.el.children) {
      li.classList.toggle("active", li.dataset.chatId === id);
      const a = li.querySelector("a");
      if (li.dataset.chatId === id) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
  }

  render() {
    const search = this.filters.search.value.trim().toLowerCase();
    const rows = [...this.chats.values()]
      .filter((c) => !search || (c.title || "").toLowerCase().includes(search))
      .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : a.id < b.id ? 1 : -1));
    // The rows are made again: the chat the keyboard is on keeps the focus.
    const focusedId = this.el.contains(document.activeElement) ? document.activeElement.closest("li")?.dataset.chatId : null;
    this.el.replaceChildren(...rows.map((c) => this.row(c)));
    if (focusedId) this.el.querySelector(`li[data-chat-id="${CSS.escape(focusedId)}"] a`)?.focus();
    show($("#list-more"), Boolean(this.cursor) && !search);
    show($("#list-empty"), rows.length === 0);
  }

  row(c) {
    const li = h("li", { class: "chat-item" + (c.id === this.currentId ? " active" : ""), dataset: { chatId: c.id, status: c.status } },
      h("a", { href: `#/chats/${encodeURIComponent(c.id)}`, "aria-current": c.id === this.currentId ? "page" : null },
        h("span", { class: "chat-title" }, c.title || "Untitled"),
        statusBadge(c.status),
        c.labels && c.labels.forked_from ? h("span", { class: "tag tag-fork", title: "A fork of another chat" }, "fork") : null,
        c.archived ? h("span", { class: "tag" }, "archived") : null,
      ),
    );
    return li;
  }
}
