// The Agents view: "#/agents" lists the owner's agents and the configured
// ones (read-only), "#/agents/<name>" shows one with its versions and a
// diff between two of them, "#/agents/new" and "#/agents/<name>/edit"
// are the form (agentform.js). Delete asks first; "New chat with this
// agent" opens the New chat dialog with the agent chosen.

import { $, h, setError, show } from "./dom.js";
import { jsonBlock } from "./output.js";
import { lineDiff } from "./agentcheck.js";
import { AgentForm } from "./agentform.js";

// The fields of an agent that are the server's, not its definition.
const serverFields = ["version", "source", "owner", "created_at", "updated_at"];

// definition is an agent (or a version) without the server's fields.
export function definition(a) {
  const d = { ...a };
  for (const k of serverFields) delete d[k];
  return d;
}

const agentPath = (name) => `/api/v1/agents/${encodeURIComponent(name)}`;

export class AgentsView {
  // hooks.onNewChat(name) starts a new chat with the agent.
  constructor(api, hooks) {
    this.api = api;
    this.hooks = hooks;
    this.open = false;
    this.seq = 0; // the latest show(); an older one's answers are dropped
    this.form = new AgentForm(api, {
      onSaved: (a) => { location.hash = `#/agents/${encodeURIComponent(a.name)}`; },
      onCancel: (name) => { location.hash = name ? `#/agents/${encodeURIComponent(name)}` : "#/agents"; },
    });
    $("#agent-new").addEventListener("click", () => { location.hash = "#/agents/new"; });
    $("#agent-confirm-dialog").addEventListener("close", () => {
      const name = $("#agent-confirm-dialog").dataset.agent;
      if ($("#agent-confirm-dialog").returnValue === "yes" && name) this.remove(name);
    });
  }

  // show displays what rest names: "" the list, "new" the form for a new
  // agent, "<name>" an agent, "<name>/edit" its form.
  async show(rest = "") {
    this.open = true;
    const seq = ++this.seq;
    const [name, sub] = rest.split("/");
    setError($("#agents-error"), "");
    show($("#agents-list-box"), !name);
    show($("#agent-detail"), false);
    this.form.hide();
    if (!name) return this.loadList(seq);
    if (name === "new") return this.form.edit(null);
    let a;
    try {
      a = await this.api.get(agentPath(name));
    } catch (err) {
      if (seq !== this.seq) return;
      setError($("#agents-error"), err.status === 404 ? `There is no agent named “${name}” (it may have been deleted).` : `Could not read the agent: ${err.message}`);
      show($("#agents-list-box"), true);
      return this.loadList(seq);
    }
    if (seq !== this.seq || !this.open) return;
    if (sub === "edit" && a.source !== "config") return this.form.edit(a);
    return this.detail(a, seq);
  }

  hide() {
    this.open = false;
    this.seq++;
    this.form.hide();
  }

  async loadList(seq) {
    let res;
    try {
      res = await this.api.get("/api/v1/agents");
    } catch (err) {
      setError($("#agents-error"), `Could not read the agents: ${err.message}`);
      return;
    }
    if (seq !== this.seq) return;
    const agents = res.agents || [];
    $("#agents-list").replaceChildren(...agents.map((a) => this.item(a)));
    show($("#agents-empty"), agents.length === 0);
  }

  item(a) {
    const config = a.source === "config";
    return h("li", { class: "agent-item", dataset: { agent: a.name, source: a.source } },
      h("div", { class: "agent-item-head" },
        h("a", { href: `#/agents/${encodeURIComponent(a.name)}`, class: "agent-link" }, a.name),
        h("span", { class: "muted agent-version" }, `version ${a.version}`),
        config ? h("span", { class: "badge agent-readonly", title: "Defined in the server's configuration file: read-only here" }, "read-only") : null),
      a.description ? h("p", { class: "agent-description" }, a.description) : null,
      h("p", { class: "muted agent-model" }, `Model: ${a.model || "the server's default"}`));
  }

  async detail(a, seq) {
    const box = $("#agent-detail");
    const config = a.source === "config";
    const chat = h("button", { type: "button", id: "agent-chat", class: "primary", onclick: () => this.hooks.onNewChat(a.name) }, "New chat with this agent");
    const edit = config ? null : h("a", { id: "agent-edit", class: "button", href: `#/agents/${encodeURIComponent(a.name)}/edit` }, "Edit");
    const del = config ? null : h("button", { type: "button", id: "agent-delete", class: "danger", onclick: () => this.confirmDelete(a.name) }, "Delete");
    const heading = h("h3", { id: "agent-detail-heading", tabindex: "-1" }, a.name);
    box.replaceChildren(
      h("p", {}, h("a", { href: "#/agents" }, "← All agents")),
      h("div", { class: "agent-detail-head" }, heading,
        h("span", { class: "badge", id: "agent-detail-version" }, `version ${a.version}`),
        config ? h("span", { class: "badge agent-readonly" }, "read-only: defined in the server's configuration file") : null),
      a.description ? h("p", { class: "agent-description" }, a.description) : null,
      h("div", { class: "agent-actions" }, chat, edit, del),
      h("dl", { class: "agent-fields" }, summary(a)),
      h("details", { class: "agent-definition" }, h("summary", {}, "Definition (JSON)"), jsonBlock(definition(a))),
      h("section", { class: "agent-history", "aria-labelledby": "agent-history-heading" },
        h("h4", { id: "agent-history-heading" }, "Versions"),
        h("div", { id: "agent-history-body" }, h("p", { class: "muted" }, "Reading the versions…"))));
    show(box, true);
    heading.focus();
    let res;
    try {
      res = await this.api.get(`${agentPath(a.name)}/versions`);
    } catch (err) {
      if (seq === this.seq) $("#agent-history-body").replaceChildren(h("p", { class: "error" }, `Could not read the versions: ${err.message}`));
      return;
    }
    if (seq !== this.seq) return;
    $("#agent-history-body").replaceChildren(...history(res.versions || []));
  }

  confirmDelete(name) {
    const d = $("#agent-confirm-dialog");
    $("#agent-confirm-text").textContent = `Delete the agent “${name}”? Chats made from it keep working on their version; no new chat can name it.`;
    d.dataset.agent = name;
    d.returnValue = "";
    d.showModal();
  }

  async remove(name) {
    try {
      await this.api.del(agentPath(name));
    } catch (err) {
      setError($("#agents-error"), `Could not delete “${name}”: ${err.message}`);
      return;
    }
    location.hash = "#/agents";
  }
}

// summary is the agent's fields as a description list.
function summary(a) {
  const rows = [
    ["Model", a.model || "the server's default"],
    ["Tools", a.tools == null ? "every server-side tool" : a.tools.length ? a.tools.join(", ") : "none"],
    ["Ask before running", (a.approve || []).join(", ") || "—"],
    ["Dynamic tools", (a.dynamic_tools || []).map((t) => t.name).join(", ") || "—"],
    ["Output", a.output_schema ? "JSON valid against its output schema" : "free text"],
    ["Subagents", (a.subagents || []).join(", ") || "—"],
    ["Labels", Object.entries(a.labels || {}).map(([k, v]) => `${k}: ${v}`).join(", ") || "—"],
    ["Limits", [a.limits && a.limits.max_steps != null ? `${a.limits.max_steps} steps` : "", a.limits && a.limits.timeout ? `timeout ${a.limits.timeout}` : ""].filter(Boolean).join(", ") || "—"],
  ];
  return rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]);
}

// history lists the versions, newest first, with a diff between two of
// them (the previous and the current one to start with).
function history(versions) {
  if (!versions.length) return [h("p", { class: "muted" }, "No versions.")];
  const newest = [...versions].reverse();
  const list = h("ol", { class: "agent-versions", reversed: true }, newest.map((v) =>
    h("li", { dataset: { version: String(v.version) } }, `Version ${v.version}`,
      h("span", { class: "muted" }, ` — ${new Date(v.created_at).toLocaleString()}`))));
  if (versions.length < 2) return [list, h("p", { class: "muted" }, "One version: nothing to compare yet.")];
  const pick = (id, label, selected) => {
    const sel = h("select", { id }, newest.map((v) => h("option", { value: String(v.version), selected: v.version === selected }, `version ${v.version}`)));
    return [h("label", { for: id }, label), sel];
  };
  const [fromLabel, from] = pick("agent-diff-old", "Compare", versions[versions.length - 2].version);
  const [toLabel, to] = pick("agent-diff-new", "with", versions[versions.length - 1].version);
  const out = h("div", { id: "agent-diff-box" });
  const render = () => {
    const a = versions.find((v) => String(v.version) === from.value);
    const b = versions.find((v) => String(v.version) === to.value);
    out.replaceChildren(...diffView(a, b));
  };
  from.addEventListener("change", render);
  to.addEventListener("change", render);
  render();
  return [list, h("div", { class: "agent-diff-pick" }, fromLabel, from, toLabel, to), out];
}

// diffView shows the line diff of two versions' pretty-printed JSON.
function diffView(a, b) {
  const d = lineDiff(JSON.stringify(definition(a), null, 2), JSON.stringify(definition(b), null, 2));
  const added = d.filter((l) => l.op === "+").length;
  const removed = d.filter((l) => l.op === "-").length;
  const said = added || removed
    ? `From version ${a.version} to version ${b.version}: ${removed} line${removed === 1 ? "" : "s"} removed, ${added} added.`
    : `Versions ${a.version} and ${b.version} define the same agent.`;
  const kind = { "+": "add", "-": "del", " ": "same" };
  return [
    h("p", { id: "agent-diff-summary", role: "status" }, said),
    h("pre", { id: "agent-diff", class: "diff", "aria-describedby": "agent-diff-summary" },
      d.map((l) => h("span", { class: `diff-line diff-${kind[l.op]}` }, `${l.op} ${l.line}\n`))),
  ];
}
