// The form that creates or edits an agent. Every field is checked as you
// type (the name, the tool globs against the server's tools, the dynamic
// tools' JSON, the output schema with the vendored JSON Schema validator,
// the subagents against the agents there are, labels and limits); Save
// refuses while a field is wrong, and a 400 from the server naming a field
// is shown on that field.

import { $, globs, h, setError, show } from "./dom.js";
import { checkGlobs, schemaProblems } from "./agentcheck.js";

const namePattern = /^[a-z0-9_-]{1,64}$/;
const durationPattern = /^(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))*$/;

// The form's fields: [key, label, kind, hint]. The key is the agent's
// field ("limits.timeout" for a limit), which the server's errors name.
const fields = [
  ["name", "Name", "input", "Lower-case letters, digits, - and _ (at most 64); it never changes."],
  ["description", "Description (optional)", "textarea", ""],
  ["model", "Model", "select", ""],
  ["system_prompt", "System prompt (optional)", "textarea", ""],
  ["tools", "Server-side tools (globs, comma-separated; empty: every one)", "input", ""],
  ["approve", "Ask before running (globs, comma-separated)", "input", ""],
  ["dynamic_tools", "Dynamic tools the client answers (JSON array, optional)", "code", ""],
  ["output_schema", "Output schema (JSON Schema of an object, optional: every answer is then JSON valid against it)", "code", ""],
  ["subagents", "Subagents (agent names, comma-separated)", "input", ""],
  ["labels", "Labels (one key: value per line)", "textarea", ""],
  ["limits.max_steps", "Most model calls per run (optional)", "number", ""],
  ["limits.timeout", "Timeout when another agent delegates to it (optional, e.g. 90s, 10m)", "input", ""],
];

// idOf is the element id of a field.
const idOf = (key) => `agent-${key.replace(/[._]/g, "-")}`;

export class AgentForm {
  // hooks.onSaved(agent) after a save; hooks.onCancel(name or "").
  constructor(api, hooks) {
    this.api = api;
    this.hooks = hooks;
    this.form = $("#agent-form");
    this.agent = null; // the agent edited, null for a new one
    this.toolNames = null; // the server's tools, once read
    this.agentNames = []; // the agents there are, for the subagents
    this.fields = new Map();
    const box = h("div", { class: "agent-form-fields" });
    for (const [key, label, kind, hint] of fields) {
      const f = this.field(key, label, kind, hint);
      this.fields.set(key, f);
      box.append(f.el);
    }
    this.noTools = h("input", { type: "checkbox", id: "agent-no-tools" });
    this.noTools.addEventListener("change", () => { this.fields.get("tools").input.disabled = this.noTools.checked; this.check("tools"); });
    this.fields.get("tools").el.append(h("label", { class: "check" }, this.noTools, " No server-side tools"));
    this.heading = h("h3", { id: "agent-form-heading", tabindex: "-1" }, "New agent");
    this.form.replaceChildren(this.heading, box,
      h("p", { id: "agent-form-error", class: "error", role: "alert", hidden: true }),
      h("div", { class: "dialog-buttons" },
        h("button", { type: "button", id: "agent-cancel", onclick: () => this.hooks.onCancel(this.agent ? this.agent.name : "") }, "Cancel"),
        h("button", { type: "submit", id: "agent-save", class: "primary" }, "Save")));
    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.save();
    });
  }

  // field builds one labelled field with its hint and its error, checked
  // on every input.
  field(key, label, kind, hint) {
    const id = idOf(key);
    const attrs = { id, name: key, "aria-describedby": `${id}-hint ${id}-error`, spellcheck: "false", autocomplete: "off" };
    let input;
    if (kind === "select") input = h("select", attrs);
    else if (kind === "textarea") input = h("textarea", { ...attrs, rows: 3, spellcheck: key === "labels" ? "false" : "true" });
    else if (kind === "code") input = h("textarea", { ...attrs, rows: 6, class: "code-input" });
    else if (kind === "number") input = h("input", { ...attrs, type: "number", min: 0, step: 1 });
    else input = h("input", { ...attrs, type: "text" });
    const hintEl = h("p", { id: `${id}-hint`, class: "muted field-hint" }, hint);
    const errorEl = h("ul", { id: `${id}-error`, class: "field-error error", hidden: true });
    input.addEventListener("input", () => this.check(key));
    return {
      el: h("div", { class: "agent-field", dataset: { field: key } }, h("label", { for: id }, label), input, hintEl, errorEl),
      input, hintEl,
      say: (messages) => {
        errorEl.replaceChildren(...messages.map((m) => h("li", {}, m)));
        errorEl.hidden = messages.length === 0;
        input.setAttribute("aria-invalid", String(messages.length > 0));
      },
    };
  }

  hide() { show(this.form, false); }

  // edit opens the form on agent a, or on a new agent when a is null.
  async edit(a) {
    this.agent = a;
    this.heading.textContent = a ? `Edit ${a.name}` : "New agent";
    setError($("#agent-form-error"), "");
    const v = (key) => this.fields.get(key).input;
    v("name").value = a ? a.name : "";
    v("name").readOnly = Boolean(a);
    v("description").value = a ? a.description || "" : "";
    v("system_prompt").value = a ? a.system_prompt || "" : "";
    this.noTools.checked = Boolean(a && a.tools && a.tools.length === 0);
    v("tools").disabled = this.noTools.checked;
    v("tools").value = a && a.tools ? a.tools.join(", ") : "";
    v("approve").value = a ? (a.approve || []).join(", ") : "";
    v("dynamic_tools").value = a && a.dynamic_tools && a.dynamic_tools.length ? JSON.stringify(a.dynamic_tools, null, 2) : "";
    v("output_schema").value = a && a.output_schema ? JSON.stringify(a.output_schema, null, 2) : "";
    v("subagents").value = a ? (a.subagents || []).join(", ") : "";
    v("labels").value = a ? Object.entries(a.labels || {}).map(([k, x]) => `${k}: ${x}`).join("\n") : "";
    v("limits.max_steps").value = a && a.limits && a.limits.max_steps != null ? String(a.limits.max_steps) : "";
    v("limits.timeout").value = a && a.limits && a.limits.timeout ? a.limits.timeout : "";
    for (const f of this.fields.values()) f.say([]);
    show(this.form, true);
    (a ? v("description") : v("name")).focus();
    try {
      const [models, tools, agents] = await Promise.all([this.api.get("/api/v1/models"), this.api.get("/api/v1/tools"), this.api.get("/api/v1/agents")]);
      const def = (models.models || []).find((m) => m.default);
      v("model").replaceChildren(
        h("option", { value: "" }, def ? `The server's default (now ${def.name})` : "The server's default"),
        ...(models.models || []).map((m) => h("option", { value: m.name }, m.name)));
      v("model").value = a && a.model ? a.model : "";
      this.toolNames = (tools.tools || []).map((t) => t.name);
      const names = this.toolNames.length ? this.toolNames.join(", ") : "none";
      this.fields.get("tools").hintEl.textContent = `The server's tools: ${names}.`;
      this.agentNames = (agents.agents || []).map((x) => x.name).filter((n) => !a || n !== a.name);
      this.fields.get("subagents").hintEl.textContent = this.agentNames.length ? `Agents: ${this.agentNames.join(", ")}.` : "There are no other agents.";
    } catch (err) {
      setError($("#agent-form-error"), `Could not read the models, tools and agents: ${err.message}`);
    }
    for (const key of this.fields.keys()) if (this.filled(key)) this.check(key);
  }

  filled(key) { return this.fields.get(key).input.value.trim() !== ""; }

  // check shows what is wrong with one field and returns its problems.
  check(key) {
    const f = this.fields.get(key);
    const text = f.input.value;
    let problems = [];
    switch (key) {
      case "name":
        if (!namePattern.test(text)) problems = ["The name must be 1 to 64 lower-case letters, digits, - or _."];
        break;
      case "tools":
      case "approve": {
        if (key === "tools" && this.noTools.checked) break;
        const r = checkGlobs(globs(text), key, this.toolNames);
        problems = r.errors;
        const base = this.toolNames ? `The server's tools: ${this.toolNames.join(", ") || "none"}.` : "";
        f.hintEl.textContent = r.unmatched.length ? `${base} Matching no tool now: ${r.unmatched.join(", ")}.` : base;
        break;
      }
      case "dynamic_tools":
        if (text.trim()) {
          try {
            if (!Array.isArray(JSON.parse(text))) problems = ["Dynamic tools must be a JSON array of tool declarations."];
          } catch (err) {
            problems = [`Dynamic tools are not valid JSON: ${err.message}`];
          }
        }
        break;
      case "output_schema":
        if (text.trim()) problems = schemaProblems(text);
        break;
      case "subagents":
        problems = globs(text).filter((n) => !this.agentNames.includes(n)).map((n) => `There is no other agent named “${n}”.`);
        break;
      case "labels":
        problems = text.split("\n").filter((l) => l.trim() && !/^[^:]+:/.test(l)).map((l) => `“${l.trim()}” is not key: value`);
        break;
      case "limits.max_steps":
        if (f.input.validity.badInput || (text !== "" && !(Number.isInteger(Number(text)) && Number(text) >= 0))) problems = ["Must be a whole number, at least 0."];
        break;
      case "limits.timeout":
        if (text.trim() && !durationPattern.test(text.trim())) problems = ["Must be a duration like 90s, 10m or 1h30m (at most 24h)."];
        break;
    }
    f.say(problems);
    return problems;
  }

  // body builds the agent's definition from the form, every field given
  // (a PUT resets what it leaves out).
  body() {
    const v = (key) => this.fields.get(key).input.value;
    const b = {
      name: v("name").trim(),
      description: v("description"),
      system_prompt: v("system_prompt"),
      approve: globs(v("approve")),
      dynamic_tools: v("dynamic_tools").trim() ? JSON.parse(v("dynamic_tools")) : [],
      subagents: globs(v("subagents")),
      labels: {},
      limits: {},
    };
    if (v("model")) b.model = v("model");
    if (this.noTools.checked) b.tools = [];
    else if (v("tools").trim()) b.tools = globs(v("tools"));
    if (v("output_schema").trim()) b.output_schema = JSON.parse(v("output_schema"));
    for (const line of v("labels").split("\n")) {
      const i = line.indexOf(":");
      if (i > 0) b.labels[line.slice(0, i).trim()] = line.slice(i + 1).trim();
    }
    if (v("limits.max_steps") !== "") b.limits.max_steps = Number(v("limits.max_steps"));
    if (v("limits.timeout").trim()) b.limits.timeout = v("limits.timeout").trim();
    return b;
  }

  async save() {
    setError($("#agent-form-error"), "");
    let first = null;
    for (const [key, f] of this.fields) {
      if (this.check(key).length && !first) first = f.input;
    }
    if (first) {
      setError($("#agent-form-error"), "Not saved: correct the fields marked above.");
      first.focus();
      return;
    }
    const body = this.body();
    const button = $("#agent-save");
    button.disabled = true;
    try {
      const a = this.agent
        ? await this.api.put(`/api/v1/agents/${encodeURIComponent(this.agent.name)}`, body)
        : await this.api.post("/api/v1/agents", body);
      this.hooks.onSaved(a);
    } catch (err) {
      this.refused(err);
    } finally {
      button.disabled = false;
    }
  }

  // refused shows the server's refusal on the field it names ("tools[2]"
  // on the tools, "dynamic_tools[0].input_schema" on the dynamic tools),
  // else under the form.
  refused(err) {
    const named = err.details && err.details.field ? String(err.details.field) : "";
    const key = named.startsWith("limits.") ? named.replace(/\[.*$/, "") : named.split(/[.[]/)[0];
    const f = this.fields.get(key);
    if (f) {
      f.say([named && !err.message.includes(named) ? `${named}: ${err.message}` : err.message]);
      f.input.focus();
      setError($("#agent-form-error"), "Not saved: the server refused a field (marked above).");
      return;
    }
    setError($("#agent-form-error"), `Not saved: ${err.message}${named ? ` (${named})` : ""}`);
  }
}
