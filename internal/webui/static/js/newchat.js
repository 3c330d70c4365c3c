// The "New chat" dialog: an agent to start from, model, title, system
// prompt, first message (with files attached to it), and the chat's tools
// (server-side globs, approvals, dynamic tools as JSON). With an agent,
// what the form leaves empty is the agent's.

import { $, globs, h, setError } from "./dom.js";
import { Attachments, content, refusal } from "./attach.js";

export class NewChatDialog {
  constructor(api, hooks) {
    this.api = api;
    this.hooks = hooks;
    this.dialog = $("#new-chat-dialog");
    this.form = $("#new-chat-form");
    $("#new-chat").addEventListener("click", () => this.open());
    this.models = [];
    this.agents = [];
    $("#new-agent").addEventListener("change", () => this.fillModels());
    this.attach = new Attachments(api, { list: $("#new-attachments"), input: $("#new-attach-input"), button: $("#new-attach"),
      zone: this.form, paste: $("#new-message") }, (m) => setError($("#new-chat-error"), m));
    $("#new-cancel").addEventListener("click", () => this.dialog.close());
    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.create();
    });
  }

  // open shows the dialog; opts.agent chooses an agent to start from.
  async open(opts = {}) {
    setError($("#new-chat-error"), "");
    this.dialog.showModal();
    $("#new-message").focus();
    try {
      const [models, tools, agents] = await Promise.all([this.api.get("/api/v1/models"), this.api.get("/api/v1/tools"),
        this.api.get("/api/v1/agents")]);
      this.models = models.models || [];
      this.agents = agents.agents || [];
      $("#new-agent").replaceChildren(h("option", { value: "" }, "None"),
        ...this.agents.map((a) => h("option", { value: a.name }, a.description ? `${a.name} — ${a.description}` : a.name)));
      $("#new-agent").value = opts.agent && this.agents.some((a) => a.name === opts.agent) ? opts.agent : "";
      this.fillModels();
      const names = (tools.tools || []).map((t) => t.name);
      $("#new-tools-list").textContent = names.length ? `Server-side tools: ${names.join(", ")}` : "This server has no server-side tools.";
    } catch (err) {
      setError($("#new-chat-error"), `Could not load the models and tools: ${err.message}`);
    }
  }

  // fillModels offers the models; with an agent chosen, the first choice
  // is the agent's model, which sends none.
  fillModels() {
    const agent = this.agents.find((a) => a.name === $("#new-agent").value);
    const options = this.models.map((m) => {
      const o = h("option", { value: m.name }, m.default ? `${m.name} (default)` : m.name);
      // defaultSelected, so that the form's reset selects the default again.
      o.defaultSelected = o.selected = !agent && Boolean(m.default);
      return o;
    });
    if (agent) options.unshift(h("option", { value: "", selected: true }, `The agent's (${agent.model || "the server's default"})`));
    $("#new-model").replaceChildren(...options);
    const note = $("#new-agent-note");
    note.textContent = agent ? `Starts from ${agent.name}, version ${agent.version}: the fields left empty are the agent's.` : "";
    note.hidden = !agent;
  }

  // body builds the request from the form, or throws with what is wrong.
  body() {
    const b = {};
    const agent = $("#new-agent").value;
    if (agent) b.agent = agent;
    const model = $("#new-model").value;
    if (model) b.model = model;
    const title = $("#new-title").value.trim();
    if (title) b.title = title;
    const system = $("#new-system").value;
    if (system.trim()) b.system_prompt = system;
    const message = $("#new-message").value;
    if (message.trim()) b.message = message;
    const tools = $("#new-tools").value.trim();
    if (tools) b.tools = globs(tools);
    const approve = $("#new-approve").value.trim();
    if (approve) b.approve = globs(approve);
    const dyn = $("#new-dynamic-tools").value.trim();
    if (dyn) {
      let parsed;
      try {
        parsed = JSON.parse(dyn);
      } catch (err) {
        throw new Error(`Dynamic tools: not valid JSON (${err.message}).`);
      }
      if (!Array.isArray(parsed)) throw new Error("Dynamic tools: want a JSON array of tool declarations.");
      b.dynamic_tools = parsed;
    }
    return b;
  }

  async create() {
    let body;
    try {
      body = this.body();
    } catch (err) {
      setError($("#new-chat-error"), err.message);
      return;
    }
    const button = $("#new-create");
    button.disabled = true;
    let files = null;
    try {
      files = await this.attach.take();
      if (files.parts.length) body.message = content(body.message || "", files.parts);
      const c = await this.api.post("/api/v1/chats", body);
      this.attach.clear();
      this.form.reset();
      this.dialog.close();
      this.hooks.onCreated(c);
    } catch (err) {
      const field = err.details && err.details.field ? ` (${err.details.field})` : "";
      setError($("#new-chat-error"), refusal(err, files && files.items) || `${err.message}${field}`);
    } finally {
      button.disabled = false;
    }
  }
}
