// The Sources view (#/sources): every tool source of the server (the
// built-in tools, each Lua source and MCP server) with its state, its last
// error and the tools it offers, from GET /api/v1/tools.

import { $, h, setError, show } from "./dom.js";

// While a source is connecting, the view reads the list again this often.
const pollMs = 3000;

// stateLabel says a source's state in words.
const stateLabel = { ready: "connected", connecting: "connecting…", failed: "failed" };

export class SourcesView {
  constructor(api) {
    this.api = api;
    this.open = false;
    this.timer = 0;
    $("#sources-refresh").addEventListener("click", () => this.load());
  }

  show() {
    this.open = true;
    this.load();
  }

  hide() {
    this.open = false;
    clearTimeout(this.timer);
  }

  async load() {
    clearTimeout(this.timer);
    let res;
    try {
      res = await this.api.get("/api/v1/tools");
    } catch (err) {
      setError($("#sources-error"), `Could not read the sources: ${err.message}`);
      return;
    }
    if (!this.open) return;
    setError($("#sources-error"), "");
    this.render(res.tools || [], res.sources || []);
    if ((res.sources || []).some((s) => s.state === "connecting")) {
      this.timer = setTimeout(() => this.open && this.load(), pollMs);
    }
  }

  render(tools, sources) {
    const bySource = new Map();
    for (const t of tools) {
      if (!bySource.has(t.source)) bySource.set(t.source, []);
      bySource.get(t.source).push(t);
    }
    const all = [];
    // The built-in tools are no registered source: they are always there.
    if (bySource.has("builtin")) all.push({ name: "builtin", state: "ready", builtin: true });
    all.push(...sources);
    const list = $("#sources-list");
    list.replaceChildren(...all.map((s) => this.card(s, bySource.get(s.name) || [])));
    show($("#sources-empty"), all.length === 0);
  }

  card(s, tools) {
    const state = s.state || "ready";
    return h("article", { class: "source-card", dataset: { source: s.name, state } },
      h("header", { class: "source-head" },
        h("h3", null, s.name),
        h("span", { class: "source-state", dataset: { state } }, stateLabel[state] || state),
        s.builtin ? h("span", { class: "muted" }, "built into parley") : null),
      s.error ? h("p", { class: "error source-error" }, s.error) : null,
      tools.length === 0
        ? h("p", { class: "muted" }, state === "ready" ? "No tools." : "No tools while it is not connected.")
        : h("ul", { class: "source-tools" }, tools.map((t) =>
          h("li", { dataset: { tool: t.name } },
            h("code", null, t.name),
            t.requires_approval ? h("span", { class: "muted" }, " (asks for approval)") : null,
            t.description ? h("span", { class: "tool-description" }, ` — ${t.description}`) : null))));
  }
}
