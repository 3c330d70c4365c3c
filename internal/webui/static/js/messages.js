// MessageView renders a conversation: durable messages in id order, the
// answer streaming in (the draft), tool calls as cards that later show
// their result, and queued messages. Tool messages carry no bubble of
// their own: their results and decisions fill the cards of the calls. A
// compaction is a divider with its summary folded away. A message an edit
// or Regenerate wrote again carries "‹ 2/3 ›": its earlier versions, each
// shown read-only with what followed it. User messages and answers carry
// their actions (edit, regenerate, fork), which hooks carry out:
// onEdit(id, content) and onRegenerate() and onFork(id) return an error
// message, or "" when the server took the request. renderFile(p) makes the
// element of a file part.

import { h, pretty } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { addCodeCopy, copyButton } from "./copy.js";
import { toolOutput } from "./toolout.js";
import { isRepair, outputPart, repairPart, roleLabel, sameAsOutput } from "./output.js";

export class MessageView {
  constructor(ol, hooks) {
    this.ol = ol;
    this.hooks = hooks || {};
    this.reset();
  }

  reset() {
    this.ol.replaceChildren();
    this.items = new Map(); // message id → li
    this.cards = new Map(); // tool_call_id → {el, name, started}
    this.outcomes = new Map(); // tool_call_id → result or decision parts seen before their call
    this.draft = null;
    this.queuedEls = [];
    this.lastId = 0;
    this.waits = new Map(); // tool_call_id → kind, of the calls the chat waits for
    this.seenQueued = new Map(); // queued id → text, of the queued messages shown
    this.clientHistory = false; // the chat's history may hold a client's assistant messages
    this.msgs = new Map(); // message id → the message shown
    this.old = new Map(); // message id → a superseded message (see versionsOf)
    this.branchEl = null; // the li of the earlier version shown, if any
    this.alt = null; // {at, pick, choices}: the earlier version shown in place of live message at
    this.navDue = false;
  }

  // add renders a durable message once; a repeat of a known id is ignored.
  // live says the message arrived as it happened (not read from history),
  // so the time between a call and its result is the call's duration.
  add(m, live = false) {
    if (m.superseded && !this.hooks.readOnly) {
      this.addOld(m);
      return;
    }
    if (this.items.has(m.id)) return;
    this.msgs.set(m.id, m);
    if (!this.hooks.readOnly) {
      if (live) this.showVersion(null);
      this.navSoon();
    }
    if (this.draft && this.draft.messageId === m.id) this.dropDraft();
    this.live = live;
    const li = this.render(m);
    this.items.set(m.id, li);
    this.place(li);
    this.lastId = Math.max(this.lastId, m.id);
    this.markLastAnswer();
    if (!live) return;
    if (m.role === "user") this.markFromQueue(li, m);
    if (m.role !== "assistant" || !this.hooks.onAnswer) return;
    // What it says as read on the page, without the Markdown's marks and
    // without the code blocks' Copy buttons.
    const text = [...li.querySelectorAll(".msg-text")].map((el) => {
      const copy = el.cloneNode(true);
      for (const b of copy.querySelectorAll("button")) b.remove();
      return copy.textContent.trim();
    }).filter(Boolean).join("\n");
    if (text) this.hooks.onAnswer(text, li.dataset.stopped === "true");
  }

  // place puts li among the shown messages by its position (see posOf):
  // a compaction's divider goes right after the last message it
  // summarises, whatever its own id.
  place(li) {
    const pos = Number(li.dataset.pos);
    let before = null;
    for (const el of [...this.items.values(), this.branchEl].filter(Boolean)) {
      if (el === li) continue;
      const p = Number(el.dataset.pos);
      if (p > pos && (!before || Number(before.dataset.pos) > p)) before = el;
    }
    this.ol.insertBefore(li, before || this.firstTransient());
  }

  // markFromQueue says on a user message that arrived as it happened that
  // it is one of the queued messages shown, now in the history and
  // answered next (after a Stop, say).
  markFromQueue(li, m) {
    const text = textOf(m);
    for (const [id, t] of this.seenQueued) {
      if (t !== text) continue;
      this.seenQueued.delete(id);
      li.dataset.fromQueue = "true";
      li.querySelector(".msg-role").after(h("p", { class: "msg-note from-queue" }, "Running your queued message"));
      return;
    }
  }

  // supersede removes the messages with ids after `after`, up to and
  // including upTo: an edit or a regeneration replaced them. They become
  // earlier versions, each knowing the message it followed.
  supersede(after, upTo = Infinity) {
    const gone = [...this.msgs.values()].filter((m) => m.id > after && m.id <= upTo).sort((a, b) => a.id - b.id);
    const idx = this.versionIndex();
    const parents = new Map(gone.map((m) => [m.id, this.parentOf(m, idx)]));
    for (const m of gone) {
      const li = this.items.get(m.id);
      if (li) {
        this.forget(li);
        li.remove();
      }
      this.items.delete(m.id);
      this.msgs.delete(m.id);
      this.addOld({ ...m, superseded: true, parent_id: parents.get(m.id) });
    }
    this.showVersion(null);
    this.markLastAnswer();
  }

  // addOld keeps a superseded message (read with ?superseded=true, or
  // replaced here by an edit or a regeneration) among the versions.
  addOld(m) {
    this.old.set(m.id, m);
    this.lastId = Math.max(this.lastId, m.id);
    this.navSoon();
  }

  // versionIndex reads who follows whom, once for every lookup of a
  // render: parent (live message id → the message it follows, the one
  // shown before it, compactions aside), child (message id → the live
  // message that follows it) and older (message id → the superseded
  // messages that followed it, compactions aside).
  versionIndex() {
    const parent = new Map();
    const child = new Map();
    let prev = 0;
    for (const m of [...this.msgs.values()].sort((a, b) => a.id - b.id)) {
      parent.set(m.id, prev);
      if (isCompaction(m)) continue;
      if (!child.has(prev)) child.set(prev, m);
      prev = m.id;
    }
    const older = new Map();
    for (const o of [...this.old.values()].sort((a, b) => a.id - b.id)) {
      if (isCompaction(o)) continue;
      const p = o.parent_id || 0;
      older.set(p, [...(older.get(p) || []), o]);
    }
    return { parent, child, older };
  }

  // parentOf is the id of the message m followed (0: none): a superseded
  // message names it, one of the history follows the message shown before
  // it, compactions aside.
  parentOf(m, idx) {
    return m.superseded ? m.parent_id || 0 : idx.parent.get(m.id) || 0;
  }

  // versionsOf lists the versions of message m, oldest first: the
  // messages that followed the same one (compactions aside).
  versionsOf(m, idx) {
    if (isCompaction(m)) return [m];
    const parent = this.parentOf(m, idx);
    const out = [...(idx.older.get(parent) || [])];
    const live = (parent === 0 || this.msgs.has(parent)) && idx.child.get(parent);
    if (live) out.push(live);
    return out.sort((a, b) => a.id - b.id);
  }

  // branchOf is superseded message m and what followed it, as it read: at
  // each step the newest message that followed, or the one chosen.
  branchOf(m, choices, idx) {
    const out = [m];
    for (let cur = m; ;) {
      const next = idx.older.get(cur.id) || [];
      if (!next.length) return out;
      cur = next.find((o) => o.id === choices.get(cur.id)) || next[next.length - 1];
      out.push(cur);
    }
  }

  navSoon() {
    if (this.navDue) return;
    this.navDue = true;
    queueMicrotask(() => {
      this.navDue = false;
      const idx = this.versionIndex();
      for (const [id, li] of this.items) {
        this.setNav(li, this.msgs.get(id), idx, (v) => this.showVersion(v.superseded ? { at: id, pick: v.id, choices: new Map() } : null));
      }
    });
  }

  // setNav puts "‹ k/n ›" in li's header when message m has other
  // versions (idx: versionIndex), k that of version shown (m's own by
  // default); pick(v) shows version v.
  setNav(li, m, idx, pick, shown = m && m.id) {
    li.querySelector(".versions-nav")?.remove();
    const role = li.querySelector(".msg-role");
    if (!m || !role) return;
    const all = this.versionsOf(m, idx);
    const k = all.findIndex((v) => v.id === shown);
    if (all.length < 2 || k < 0) return;
    // The button pressed goes with the version it showed: focus moves to
    // the same button of the version shown now.
    const go = (d) => {
      const v = all[k + d];
      pick(v);
      const nav = this.ol.querySelector(`.versions-nav[data-shown="${v.id}"]`);
      const b = nav && (nav.querySelector(`${d < 0 ? ".version-prev" : ".version-next"}:not([disabled])`) || nav.querySelector("button:not([disabled])"));
      if (b) b.focus();
    };
    const step = (d, label) => h("button", { type: "button", class: d < 0 ? "version-prev" : "version-next", "aria-label": label,
      disabled: !all[k + d], onclick: () => go(d) }, d < 0 ? "‹" : "›");
    role.append(h("span", { class: "versions-nav", role: "group", "aria-label": `Version ${k + 1} of ${all.length}`, dataset: { shown: String(shown) } },
      step(-1, "Previous version"), h("span", { class: "version-count" }, `${k + 1}/${all.length}`), step(1, "Next version")));
  }

  // showVersion shows, in place of live message alt.at and everything
  // after it, the earlier version alt.pick with what followed it,
  // read-only; null shows the history again.
  showVersion(alt) {
    this.alt = alt;
    this.branchEl?.remove();
    this.branchEl = null;
    for (const li of this.items.values()) if (li.dataset.versionHidden) {
      li.hidden = li.dataset.role === "tool";
      delete li.dataset.versionHidden;
    }
    if (!alt) return;
    const at = this.items.get(alt.at);
    const pick = this.old.get(alt.pick);
    if (!at || !pick) {
      this.alt = null;
      return;
    }
    for (const li of this.items.values()) if (Number(li.dataset.pos) >= Number(at.dataset.pos)) {
      li.hidden = true;
      li.dataset.versionHidden = "true";
    }
    const ol = h("ol", { class: "version-messages" });
    const view = new MessageView(ol, { readOnly: true, renderFile: this.hooks.renderFile });
    view.clientHistory = this.clientHistory;
    const idx = this.versionIndex();
    const branch = this.branchOf(pick, alt.choices, idx);
    for (const m of branch) view.add(m);
    const li = h("li", { class: "msg-branch", dataset: { pos: String(Number(at.dataset.pos) - 0.01), version: String(pick.id) } },
      h("p", { class: "branch-note muted" }, "An earlier version, as it read: the model no longer sees it."), ol);
    for (const m of branch) {
      const el = ol.querySelector(`li[data-old-id="${m.id}"]`);
      if (m === pick) this.setNav(el, this.msgs.get(alt.at), idx, (v) => this.showVersion(v.superseded ? { ...alt, pick: v.id, choices: new Map() } : null), pick.id);
      else this.setNav(el, m, idx, (v) => this.showVersion({ ...alt, choices: new Map(alt.choices).set(v.parent_id || 0, v.id) }));
    }
    this.branchEl = li;
    this.place(li);
  }

  // forget drops the cards of the calls inside li, which is going away.
  forget(li) {
    for (const [id, c] of [...this.cards]) {
      if (li.contains(c.el)) this.cards.delete(id);
    }
  }

  // summarised counts the messages shown (questions and answers) that
  // compaction part c stands for and the previous summary did not, and
  // says whether there is a previous summary.
  summarised(c) {
    let since = 0;
    for (const li of this.items.values()) {
      const t = Number(li.dataset.through);
      if (li.dataset.role === "compaction" && t < c.through_message_id) since = Math.max(since, t);
    }
    let n = 0;
    for (const [id, li] of this.items) {
      if (id > since && id <= c.through_message_id && (li.dataset.role === "user" || li.dataset.role === "assistant")) n++;
    }
    return { n, previous: since > 0 };
  }

  // compactable says whether a compaction would find something to
  // summarise: since the newest compaction's cut, a user message follows
  // some other message (the last turn always stays verbatim).
  compactable() {
    let through = 0;
    for (const li of this.items.values()) {
      if (li.dataset.role === "compaction") through = Math.max(through, Number(li.dataset.through));
    }
    let seen = false;
    for (const [id, li] of [...this.items].sort((a, b) => a[0] - b[0])) {
      if (id <= through || li.dataset.role === "compaction") continue;
      if (seen && li.dataset.role === "user") return true;
      seen = true;
    }
    return false;
  }

  // lastUserId is the id of the newest message of the person shown (not
  // a repair request of parley's), 0 if none.
  lastUserId() {
    let last = 0;
    for (const [id, li] of this.items) {
      if (li.dataset.role === "user" && !li.dataset.repair && id > last) last = id;
    }
    return last;
  }

  // markLastAnswer marks the newest answer after the newest user message:
  // the one Regenerate replaces.
  markLastAnswer() {
    const user = this.lastUserId();
    let last = null;
    for (const [id, li] of this.items) {
      li.classList.remove("last-answer");
      if (li.dataset.role === "assistant" && id > user && (!last || id > Number(last.dataset.messageId))) last = li;
    }
    if (last) last.classList.add("last-answer");
  }

  // setIdle says whether the chat waits (or failed) with no run under
  // way: only then are messages edited and answers regenerated.
  setIdle(idle) {
    this.ol.dataset.idle = String(idle);
  }

  // firstTransient is the first element after the durable messages: the
  // draft, then queued messages, always stay last.
  firstTransient() {
    if (this.draft) return this.draft.li;
    return this.queuedEls[0] || null;
  }

  render(m) {
    const li = this.renderMessage(m);
    li.dataset.pos = String(posOf(m));
    return li;
  }

  renderMessage(m) {
    if (this.hooks.readOnly) {
      // An earlier version: shown as it read, outside the conversation's
      // own messages (it carries no role or id the page looks up).
      const li = this.renderLive({ ...m, superseded: false });
      li.dataset.oldRole = li.dataset.role;
      li.dataset.oldId = li.dataset.messageId;
      delete li.dataset.role;
      delete li.dataset.messageId;
      li.classList.add("old");
      return li;
    }
    return this.renderLive(m);
  }

  renderLive(m) {
    const li = h("li", { class: "msg", dataset: { role: m.role, messageId: String(m.id) } });
    if (m.role === "tool") {
      li.hidden = true;
      for (const p of m.parts || []) this.outcome(p);
      return li;
    }
    const parts = m.parts || [];
    if (parts.length && parts[0].type === "compaction") return compaction(m.id, parts[0], this.summarised(parts[0]));
    if (isRepair(m)) li.dataset.repair = "true";
    li.append(h("div", { class: "msg-role" }, roleLabel(m)));
    // Every answer the model finished carries its usage; one without was
    // cut short by Stop (the text streamed until then is kept). In a chat
    // made through a compatible API (labelled "api") the client may have
    // sent assistant messages of its own, which carry none either.
    const stopped = m.role === "assistant" && !m.usage && !this.clientHistory;
    if (stopped) li.dataset.stopped = "true";
    for (const p of m.parts || []) {
      if (p.type === "text") {
        if (!sameAsOutput(m, p.text)) li.append(this.text(m.role, p.text));
      } else if (p.type === "reasoning") li.append(reasoning(p.text, false));
      else if (p.type === "tool-call") li.append(this.card(p.tool_call_id, p.tool_name, p.args));
      else if (p.type === "file" && this.hooks.renderFile) li.append(this.hooks.renderFile(p));
      else if (p.type === "output") li.append(outputPart(p));
      else if (p.type === "output-repair") li.append(repairPart(p));
    }
    if (stopped) li.append(h("p", { class: "msg-stopped" }, "Stopped — this answer was cut short"));
    if (m.usage && (m.usage.input_tokens || m.usage.output_tokens)) {
      li.append(h("div", { class: "msg-usage muted" }, usageText(m.usage)));
    }
    li.append(this.hooks.readOnly ? h("div", { class: "msg-actions" }, copyButton(() => textOf(m), "msg-copy", "Copy as Markdown")) : this.msgActions(li, m));
    return li;
  }

  // msgActions are a message's buttons: Edit on a user message,
  // Regenerate on an answer (shown on the last one only), Fork on both.
  // Edit and Regenerate show only while the chat is idle (see setIdle).
  msgActions(li, m) {
    const status = h("span", { class: "msg-action-error error", role: "alert", hidden: true });
    const run = async (btn, fn) => {
      btn.disabled = true;
      const err = await fn();
      btn.disabled = false;
      status.textContent = err || "";
      status.hidden = !err;
    };
    const user = m.role === "user";
    const edit = user && !isRepair(m) && h("button", { type: "button", class: "msg-edit needs-idle", "aria-label": "Edit this message",
      onclick: () => this.edit(li, m) }, "Edit");
    const regen = !user && h("button", { type: "button", class: "msg-regenerate needs-idle", "aria-label": "Regenerate this answer",
      onclick: (e) => run(e.currentTarget, () => this.hooks.onRegenerate()) }, "Regenerate");
    const fork = h("button", { type: "button", class: "msg-fork", "aria-label": "Fork a new chat from this message",
      title: "A new chat with the conversation up to here", onclick: (e) => run(e.currentTarget, () => this.hooks.onFork(m.id)) }, "Fork");
    const copy = copyButton(() => textOf(m), "msg-copy", user ? "Copy this message as Markdown" : "Copy this answer as Markdown");
    return h("div", { class: "msg-actions" }, copy, edit, regen, fork, status);
  }

  // editLast opens the editor on the newest user message shown, with
  // text in place of its own when given; false when there is none or the
  // chat is not idle.
  editLast(text) {
    const id = this.lastUserId();
    if (!id || this.ol.dataset.idle !== "true") return false;
    const li = this.items.get(id);
    this.edit(li, this.msgs.get(id));
    const area = li.querySelector("textarea.msg-edit-input");
    if (text && area) area.value = text;
    return true;
  }

  // edit swaps a user message's text for an editor; Save sends the new
  // text, and the messages after it go when the server says so.
  edit(li, m) {
    if (li.querySelector("form.msg-editor")) return;
    const parts = m.parts || [];
    const area = h("textarea", { class: "msg-edit-input", rows: 3, "aria-label": "Edited message" });
    area.value = parts.filter((p) => p.type === "text").map((p) => p.text).join("\n");
    const error = h("p", { class: "error", role: "alert", hidden: true });
    const shown = [...li.children].filter((el) => !el.classList.contains("msg-role") && !el.hidden);
    const done = () => {
      form.remove();
      for (const el of shown) el.hidden = false;
    };
    // An edit replaces everything after the message: when that is more
    // than its own answer, the first Save says how much and asks again.
    const later = [...this.items].filter(([id, el]) => id > m.id && el.dataset.role === "user").length;
    let confirmed = later === 0;
    const warn = h("p", { class: "msg-edit-confirm", role: "alert", hidden: true },
      `Saving replaces everything after this message: its answer and the ${later} later ${later === 1 ? "turn" : "turns"}. ` +
      "They stay readable (page back with ‹ on the message), but the model will not see them.");
    const form = h("form", { class: "msg-editor",
      onsubmit: async (e) => {
        e.preventDefault();
        const text = area.value;
        if (!text.trim()) return;
        if (!confirmed) {
          confirmed = true;
          warn.hidden = false;
          save.textContent = `Save and replace ${later + 1} turns`;
          return;
        }
        const others = parts.filter((p) => p.type !== "text");
        const content = others.length ? [{ type: "text", text }, ...others] : text;
        save.disabled = true;
        const err = await this.hooks.onEdit(m.id, content);
        save.disabled = false;
        error.textContent = err || "";
        error.hidden = !err;
        if (err) return;
        // The history event renders the message again; until then it
        // shows what was sent.
        const t = li.querySelector(".msg-text");
        if (t) t.textContent = text;
        done();
      } },
      area, error, warn,
      h("div", { class: "msg-editor-buttons" },
        h("button", { type: "submit", class: "primary msg-edit-save" }, "Save"),
        h("button", { type: "button", class: "msg-edit-cancel", onclick: done }, "Cancel")));
    const save = form.querySelector(".msg-edit-save");
    for (const el of shown) el.hidden = true;
    li.append(form);
    area.focus();
  }

  text(role, text) {
    if (role === "user") return h("div", { class: "msg-text plain" }, text);
    const div = h("div", { class: "msg-text" });
    div.append(renderMarkdown(text));
    addCodeCopy(div);
    return div;
  }

  // card makes (or re-uses, for a call first seen streaming) a call's card.
  card(id, name, args) {
    const argsEl = h("pre", { class: "tool-args" }, pretty(args ?? {}));
    const el = h("div", { class: "tool-card", dataset: { toolCallId: id, state: "running" } },
      h("div", { class: "tool-head" },
        h("span", { class: "tool-name" }, name),
        h("span", { class: "tool-state" }),
        h("span", { class: "tool-duration muted" }),
      ),
      h("details", { class: "tool-args-box", open: true }, h("summary", {}, "Arguments"), argsEl),
    );
    const old = this.cards.get(id);
    const c = { el, name, started: old ? old.started : this.live ? performance.now() : 0 };
    this.cards.set(id, c);
    setCardState(el, "running");
    this.markWaiting(id, c);
    const early = this.outcomes.get(id);
    if (early) {
      this.outcomes.delete(id);
      for (const p of early) this.outcome(p);
    }
    return el;
  }

  // outcome applies a tool message's part to its call's card.
  outcome(p) {
    const c = this.cards.get(p.tool_call_id);
    if (!c) {
      // A result whose call is not shown (yet): keep it for the card.
      const list = this.outcomes.get(p.tool_call_id) || [];
      list.push(p);
      this.outcomes.set(p.tool_call_id, list);
      return;
    }
    const el = c.el;
    if (p.type === "tool-decision") {
      const d = p.decision || {};
      const who = d.decided_by ? ` by ${d.decided_by}` : "";
      const why = d.reason ? `: ${d.reason}` : "";
      replaceIn(el, ".tool-decision", h("p", { class: "tool-decision", dataset: { approved: String(Boolean(d.approved)) } },
        `${d.approved ? "Approved" : "Denied"}${who}${why}`));
      if (p.args !== undefined) {
        // The model's arguments stay shown; the edited ones are what ran.
        replaceIn(el, ".tool-edited-box", h("details", { class: "tool-edited-box", open: true },
          h("summary", {}, "Edited arguments (these ran)"), h("pre", { class: "tool-edited-args" }, pretty(p.args))));
      }
      // An approved call runs from now on; a denied one never runs.
      c.started = d.approved && this.live ? performance.now() : 0;
      return;
    }
    if (p.type !== "tool-result") return;
    el.querySelector("progress.tool-progress")?.remove();
    el.querySelector(".tool-progress-message")?.remove();
    const out = toolOutput(p.output, p.is_error);
    // A result over the server's cap was cut; the output ends with the
    // same marker, this says it before the reader scrolls.
    const cut = p.truncated && h("p", { class: "tool-truncated" }, `truncated — ${grouped(p.output_bytes)} bytes in full`);
    replaceIn(el, ".tool-output-box", h("div", { class: "tool-output-box" }, h("div", { class: "muted" }, p.is_error ? "Error" : "Result"), cut, out));
    setCardState(el, p.is_error ? "error" : "done");
    if (this.live && c.started) {
      el.querySelector(".tool-duration").textContent = duration(performance.now() - c.started);
    }
  }

  // waiting marks the calls a chat waits for (client results or decisions).
  // Cards made later (the history may still be loading) take it too.
  waiting(calls) {
    this.waits = new Map((calls || []).map((c) => [c.tool_call_id, c.kind || "client"]));
    for (const [id, c] of this.cards) this.markWaiting(id, c);
  }

  markWaiting(id, c) {
    const kind = this.waits.get(id);
    if (kind) {
      // The time it waits for a person is not the call's duration.
      c.started = 0;
      setCardState(c.el, "waiting", kind === "approval" ? "waiting for approval" : "waiting for your result");
    } else if (c.el.dataset.state === "waiting") {
      setCardState(c.el, "running");
    }
  }

  // progress shows a server-side call's progress report on its card.
  progress(p) {
    const c = this.cards.get(p.tool_call_id);
    if (!c || c.el.dataset.state === "done" || c.el.dataset.state === "error") return;
    let bar = c.el.querySelector("progress.tool-progress");
    if (!bar) {
      bar = h("progress", { class: "tool-progress", "aria-label": `Progress of ${c.name}` });
      c.el.append(bar, h("p", { class: "tool-progress-message muted" }));
    }
    if (p.total) {
      bar.max = p.total;
      bar.value = p.progress;
    } else {
      bar.removeAttribute("value");
    }
    const msg = [p.message, p.total ? `${p.progress}/${p.total}` : `${p.progress}`].filter(Boolean).join(" · ");
    c.el.querySelector(".tool-progress-message").textContent = msg;
  }

  // part applies one live delta of the step in progress to the draft.
  part(messageId, p) {
    if (p.type === "tool-progress") {
      this.progress(p);
      return;
    }
    if (this.items.has(messageId)) return; // the step's message is already shown
    const d = this.ensureDraft(messageId);
    if (p.type === "text-delta") {
      const seg = d.current("text");
      seg.text += p.text || "";
      seg.dirty = true;
    } else if (p.type === "reasoning-delta") {
      const seg = d.current("reasoning");
      seg.text += p.text || "";
      seg.dirty = true;
    } else if (p.type === "tool-call-start") {
      const seg = { kind: "tool", id: p.tool_call_id, name: p.tool_name, args: "", el: null, dirty: true };
      d.segs.push(seg);
      d.calls.set(p.index, seg);
    } else if (p.type === "tool-call-delta") {
      const seg = d.calls.get(p.index);
      if (seg) {
        seg.args += p.text || "";
        seg.dirty = true;
      }
    }
    this.scheduleDraft();
  }

  ensureDraft(messageId) {
    if (this.draft && this.draft.messageId !== messageId) this.dropDraft();
    if (!this.draft) {
      const li = h("li", { class: "msg draft", dataset: { role: "assistant" }, "aria-busy": "true" },
        h("div", { class: "msg-role" }, "Assistant"));
      this.ol.insertBefore(li, this.queuedEls[0] || null);
      const segs = [];
      this.draft = {
        messageId, li, segs, calls: new Map(), frame: 0,
        current(kind) {
          const last = segs[segs.length - 1];
          if (last && last.kind === kind) return last;
          const seg = { kind, text: "", el: null, dirty: true };
          segs.push(seg);
          return seg;
        },
      };
    }
    return this.draft;
  }

  // scheduleDraft renders the draft at most once per frame: Markdown is
  // parsed again for the whole text, so not for every delta.
  scheduleDraft() {
    const d = this.draft;
    if (!d || d.frame) return;
    d.frame = requestAnimationFrame(() => {
      d.frame = 0;
      if (this.draft === d) this.renderDraft(d);
    });
  }

  renderDraft(d) {
    for (const seg of d.segs) {
      if (!seg.dirty) continue;
      seg.dirty = false;
      let el;
      if (seg.kind === "text") {
        el = h("div", { class: "msg-text" });
        el.append(renderMarkdown(seg.text, { streaming: true }));
      } else if (seg.kind === "reasoning") {
        el = reasoning(seg.text, true);
        if (seg.el) el.open = seg.el.open;
      } else {
        el = h("div", { class: "tool-card", dataset: { toolCallId: seg.id, state: "running" } },
          h("div", { class: "tool-head" }, h("span", { class: "tool-name" }, seg.name), h("span", { class: "tool-state" }, "writing…")),
          h("pre", { class: "tool-args" }, seg.args));
      }
      if (seg.el) seg.el.replaceWith(el);
      else d.li.append(el);
      seg.el = el;
    }
  }

  // dropDraft removes the draft: its message arrived, or the stream
  // reconnected and the server sends the step's parts again from the start.
  dropDraft() {
    if (!this.draft) return;
    cancelAnimationFrame(this.draft.frame);
    this.draft.li.remove();
    this.draft = null;
  }

  // queued shows the messages waiting in the chat's queue, after the rest.
  queued(list) {
    for (const el of this.queuedEls) el.remove();
    for (const q of list) this.seenQueued.set(q.id, textOf(q));
    this.queuedEls = list.map((q) => h("li", { class: "msg queued", dataset: { role: "user", queuedId: String(q.id) } },
      h("div", { class: "msg-role" }, "You ", h("span", { class: "queued-label" }, "queued")),
      h("div", { class: "msg-text plain" }, (q.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("\n"))));
    this.ol.append(...this.queuedEls);
  }
}

function isCompaction(m) {
  const p = (m.parts || [])[0];
  return Boolean(p && p.type === "compaction");
}

// posOf is where message m stands in the conversation: its id, or for a
// compaction (written after the turns it kept verbatim) just after the
// last message it summarises, compactions of one cut in id order.
function posOf(m) {
  const p = (m.parts || [])[0];
  if (p && p.type === "compaction" && p.through_message_id) return p.through_message_id + 0.5 - 1 / (m.id + 2);
  return m.id;
}

// compaction is the divider where the conversation was summarised: it
// stands after the last message summarised and says how many of the
// messages above it the summary stands for (count.n, since the previous
// summary when count.previous); the model sees the summary in place of
// them (they stay shown here), and the summary is folded away.
function compaction(id, p, count) {
  const why = { auto: "automatically", manual: "on request", overflow: "after the context overflowed" }[p.source] || "";
  const text = h("div", { class: "msg-text compaction-text" });
  text.append(renderMarkdown(p.summary || ""));
  const what = `${count.n} ${count.n === 1 ? "message" : "messages"} above summarised` + (count.previous ? " with the previous summary" : "");
  const before = p.tokens_before ? `The context was about ${grouped(p.tokens_before)} tokens` +
    (p.context_window ? ` of ${grouped(p.context_window)}` : "") + "; " : "";
  return h("li", { class: "msg compaction", dataset: { role: "compaction", messageId: String(id), through: String(p.through_message_id || 0) } },
    h("details", { class: "compaction-box" },
      h("summary", {}, h("span", { class: "twisty", "aria-hidden": "true" }), h("span", { class: "compaction-what" }, what),
        why && h("span", { class: "compaction-why" }, `(${why})`)),
      h("p", { class: "compaction-note muted" }, `${before}the model now reads this summary in place of the messages above, and the ones below verbatim.`),
      text));
}

function reasoning(text, open) {
  return h("details", { class: "reasoning", open },
    h("summary", {}, "Reasoning"),
    h("div", { class: "reasoning-text" }, text));
}

function setCardState(el, state, words) {
  el.dataset.state = state;
  const say = { running: "running…", waiting: "waiting", done: "done", error: "error" };
  el.querySelector(".tool-state").textContent = words || say[state] || state;
}

function replaceIn(el, sel, node) {
  const old = el.querySelector(sel);
  if (old) old.replaceWith(node);
  else el.append(node);
}

// grouped writes a byte count as the server's marker does: 10,485,760.
function grouped(n) {
  return Number(n).toLocaleString("en-US");
}

function duration(ms) {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

// textOf is the text of a message's text parts: what it says, as the
// Markdown it was written in.
function textOf(m) {
  return (m.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("\n\n");
}

export function usageText(u) {
  const parts = [`${u.input_tokens || 0} in / ${u.output_tokens || 0} out tokens`];
  if (u.cost_micros) parts.push(`cost ${(u.cost_micros / 1e6).toFixed(4)}`);
  return parts.join(" · ");
}
