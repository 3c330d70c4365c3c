// ActionPanel answers what a requires_action chat waits for: results of
// dynamic tool calls (POST /tool-results) and decisions on calls that need
// approval (POST /approvals), with the deadline counting down. A 409 means
// someone else answered first: that is said as such, and the chat is read
// again. The two kinds are separate forms: answering one leaves what is
// typed into the other as it is.

import { $, countdown, h, pretty, setError, show } from "./dom.js";
import { resultEditor } from "./schemaform.js";

export class ActionPanel {
  // hooks: onChat(chat) takes the chat an answer returned; onConflict() is
  // called after a 409, to read the chat again (its stream may not have
  // told the page yet what changed).
  constructor(api, hooks) {
    this.api = api;
    this.hooks = hooks;
    this.section = $("#action");
    this.callsEl = $("#action-calls");
    this.forms = { client: { key: "", el: null }, approval: { key: "", el: null } };
    this.timer = 0;
  }

  // clear hides the panel. The notice stays (it may say why the panel
  // went) unless clearNotice, as when another chat opens.
  clear(clearNotice) {
    for (const f of Object.values(this.forms)) {
      f.key = "";
      f.el = null;
    }
    clearInterval(this.timer);
    this.timer = 0;
    this.callsEl.replaceChildren();
    if (clearNotice) setError($("#action-notice"), "");
    show(this.section, false);
  }

  // update shows c's required action. Each form is made again only when
  // the calls it answers change, so typing is not lost to an unrelated
  // status event, nor to the other kind being answered.
  update(c) {
    const ra = c.status === "requires_action" ? c.required_action : null;
    const calls = (ra && ra.tool_calls) || [];
    if (calls.length === 0) {
      if (this.forms.client.key || this.forms.approval.key) this.clear();
      return;
    }
    const tools = new Map((c.dynamic_tools || []).map((t) => [t.name, t]));
    const kinds = {
      client: calls.filter((t) => (t.kind || "client") === "client"),
      approval: calls.filter((t) => t.kind === "approval"),
    };
    let changed = false;
    for (const [kind, list] of Object.entries(kinds)) {
      const f = this.forms[kind];
      const key = list.length ? c.id + "|" + list.map((t) => t.tool_call_id).join(",") : "";
      if (key === f.key) continue;
      changed = true;
      f.key = key;
      f.el = !list.length ? null : kind === "client" ? this.clientForm(c.id, list, tools) : this.approvalForms(c.id, list);
    }
    if (!changed) return;
    setError($("#action-notice"), "");
    this.callsEl.replaceChildren(...[this.forms.client.el, this.forms.approval.el].filter(Boolean));
    this.deadline(ra.deadline);
    const appearing = this.section.hidden;
    show(this.section, true);
    // A panel that appears takes the focus, so the keyboard (and a screen
    // reader) is where the decision is; the scroll is the follower's.
    if (appearing) $("#action-heading").focus({ preventScroll: true });
  }

  deadline(iso) {
    clearInterval(this.timer);
    const el = $("#deadline");
    el.dataset.deadline = iso || "";
    if (!iso) {
      el.textContent = "none";
      return;
    }
    const at = Date.parse(iso);
    const tick = () => {
      el.textContent = `${countdown(at - Date.now())} (${new Date(at).toLocaleTimeString()})`;
    };
    tick();
    this.timer = setInterval(tick, 1000);
  }

  // conflict reports a 409: the calls were answered elsewhere (or ran out).
  conflict(err) {
    const status = err.details && err.details.status;
    const now = status && status !== "requires_action" ? ` The chat is ${status} now.` : "";
    setError($("#action-notice"), `Someone else answered first.${now}`);
    this.hooks.onConflict();
  }

  clientForm(chatId, calls, tools) {
    const editors = calls.map((call) => {
      const tool = tools.get(call.tool_name) || {};
      const editor = resultEditor(tool.output_schema, call.tool_name);
      // An error is said in words: the schema describes results, not errors.
      const errorId = `error-text-${call.tool_call_id}`;
      const errorText = h("textarea", { id: errorId, class: "error-text", rows: 2 });
      const errorBox = h("div", { class: "field", hidden: true }, h("label", { for: errorId }, "What went wrong (shown to the model)"), errorText);
      const isError = h("input", { type: "checkbox", class: "is-error", id: `is-error-${call.tool_call_id}`,
        onchange: () => { show(editor.el, !isError.checked); show(errorBox, isError.checked); } });
      const fs = h("fieldset", { class: "call", dataset: { toolCallId: call.tool_call_id, kind: "client" } },
        h("legend", {}, call.tool_name),
        tool.description ? h("p", { class: "muted" }, tool.description) : null,
        h("div", { class: "muted" }, "Arguments"),
        h("pre", { class: "call-args" }, pretty(call.args ?? {})),
        editor.el,
        h("div", { class: "field check" }, isError, h("label", { for: `is-error-${call.tool_call_id}` }, "Report as an error")),
        errorBox,
      );
      return { call, editor, isError, errorText, fs };
    });
    const error = h("p", { class: "error call-error", role: "alert", hidden: true });
    const button = h("button", { type: "submit", id: "submit-results", class: "primary" }, calls.length > 1 ? "Send results" : "Send result");
    // The editors check the values themselves, with messages that name the
    // field; the browser's own checks would also block an error report.
    const form = h("form", { id: "tool-results-form", novalidate: true }, editors.map((e) => e.fs), error, button);
    // In a text box Enter is a new line: Ctrl+Enter (⌘+Enter) sends.
    form.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && !ev.isComposing) {
        ev.preventDefault();
        form.requestSubmit(button);
      }
    });
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const results = [];
      let wrong = false;
      // Every editor is checked, in reverse so the focus ends on the
      // first field at fault; each shows what is wrong by the field.
      for (const e of [...editors].reverse()) {
        const r = e.isError.checked ? { value: e.errorText.value } : e.editor.read();
        if (r.error) wrong = true;
        else results.unshift({ tool_call_id: e.call.tool_call_id, output: r.value, is_error: e.isError.checked });
      }
      setError(error, "");
      if (wrong) return;
      button.disabled = true;
      try {
        this.hooks.onChat(await this.api.post(this.api.chatPath(chatId, "/tool-results"), { results }));
      } catch (err) {
        if (err.status === 409 && err.code === "status_conflict") this.conflict(err);
        else setError(error, err.message);
        button.disabled = false;
      }
    });
    return form;
  }

  approvalForms(chatId, calls) {
    const decisions = new Map(); // tool_call_id → decision
    const wrap = h("div", { class: "approvals" });
    // With several calls, how many are decided: nothing is sent before all are.
    const progress = h("p", { class: "decisions-progress", role: "status", hidden: true });
    const send = async () => {
      const list = calls.map((c) => decisions.get(c.tool_call_id));
      const left = list.filter((d) => !d).length;
      if (calls.length > 1) {
        progress.textContent = left
          ? `${calls.length - left} of ${calls.length} decided — waiting for your ${left > 1 ? `other ${left} decisions` : "other decision"}`
          : `${calls.length} of ${calls.length} decided — sending`;
        progress.hidden = false;
      }
      if (left) {
        // The keyboard goes on to the next call that waits.
        const next = calls.find((c) => !decisions.has(c.tool_call_id));
        wrap.querySelector(`fieldset[data-tool-call-id="${CSS.escape(next.tool_call_id)}"] button.approve`)?.focus();
        return;
      }
      for (const b of wrap.querySelectorAll("button")) b.disabled = true;
      try {
        this.hooks.onChat(await this.api.post(this.api.chatPath(chatId, "/approvals"), { decisions: list }));
      } catch (err) {
        decisions.clear();
        progress.hidden = true;
        for (const b of wrap.querySelectorAll("button")) b.disabled = false;
        for (const fs of wrap.querySelectorAll("fieldset")) fs.dataset.decision = "";
        for (const n of wrap.querySelectorAll(".decision-note")) n.textContent = "";
        if (err.status === 409 && err.code === "status_conflict") {
          this.conflict(err);
          return;
        }
        const id = err.details && err.details.tool_call_id;
        const target = (id && wrap.querySelector(`fieldset[data-tool-call-id="${CSS.escape(id)}"] .call-error`)) || wrap.querySelector(".call-error");
        setError(target, err.message);
      }
    };
    for (const call of calls) {
      const original = pretty(call.args ?? {});
      const argsId = `args-${call.tool_call_id}`;
      const reasonId = `reason-${call.tool_call_id}`;
      const args = h("textarea", { id: argsId, class: "args-editor", rows: Math.min(12, original.split("\n").length + 1), spellcheck: "false" }, original);
      const reason = h("input", { id: reasonId, class: "reason", type: "text", maxlength: 4096, placeholder: "shown to the model if you deny" });
      const error = h("p", { class: "error call-error", role: "alert", hidden: true });
      const note = h("p", { class: "decision-note muted" });
      const fs = h("fieldset", { class: "call", dataset: { toolCallId: call.tool_call_id, kind: "approval" } },
        h("legend", {}, `${call.tool_name}`, call.source ? h("span", { class: "muted" }, ` (${call.source})`) : null),
        call.description ? h("p", { class: "muted" }, call.description) : null,
        h("label", { for: argsId }, "Arguments (edit before approving)"),
        args,
        h("label", { for: reasonId }, "Reason"),
        reason,
        error,
      );
      const decide = (approve) => {
        const d = { tool_call_id: call.tool_call_id, approve };
        if (approve) {
          let edited;
          try {
            edited = JSON.parse(args.value);
          } catch (err) {
            setError(error, `The arguments are not valid JSON: ${err.message}`);
            return;
          }
          if (JSON.stringify(edited) !== JSON.stringify(call.args ?? {})) d.args = edited;
        }
        if (reason.value.trim()) d.reason = reason.value.trim();
        setError(error, "");
        decisions.set(call.tool_call_id, d);
        fs.dataset.decision = approve ? "approve" : "deny";
        note.textContent = calls.length > 1 ? `Your decision: ${approve ? "approve" : "deny"} (you can still change it)` : "";
        send();
      };
      fs.append(h("div", { class: "decide" },
        h("button", { type: "button", class: "approve primary", onclick: () => decide(true) }, "Approve"),
        h("button", { type: "button", class: "deny danger", onclick: () => decide(false) }, "Deny")), note);
      wrap.append(fs);
    }
    wrap.append(progress);
    return wrap;
  }
}
