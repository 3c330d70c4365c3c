// Conversation is the open chat: its history read page by page from
// /messages, then its live stream (/stream) resumed after the last
// message, the header (title, status, usage, context), the composer, and
// the buttons that act on the chat and its messages (edit, regenerate,
// fork, compact).

import { $, setError, show } from "./dom.js";
import { EventStream } from "./sse.js";
import { MessageView, usageText } from "./messages.js";
import { ActionPanel } from "./actions.js";
import { announce, busy, connState, statusAnnouncement, statusText } from "./status.js";
import { errorKinds } from "./quota.js";
import { ScrollFollower } from "./scroll.js";
import { Attachments, FileViews, content, refusal } from "./attach.js";

const historyPage = 200;

export class Conversation {
  constructor(api, hooks) {
    this.api = api;
    this.hooks = hooks;
    this.id = null;
    this.epoch = 0;
    this.chat = null;
    this.stream = null;
    const files = new FileViews(api);
    this.view = new MessageView($("#messages"), {
      onEdit: (id, content) => this.editMessage(id, content),
      onRegenerate: () => this.regenerate(),
      onFork: (id) => this.fork(id),
      // A finished answer is read out once, as it arrives; the history is not.
      onAnswer: (text, stopped) => announce(stopped ? `Stopped: ${text}` : text),
      renderFile: (p) => files.render(this.id, p),
    });
    this.attach = new Attachments(api, { list: $("#attachments"), input: $("#attach-input"), button: $("#attach"),
      zone: $("#chat"), paste: $("#composer-input") }, (m) => this.composerError(m));
    this.actions = new ActionPanel(api, { onChat: (c) => this.setChat(c), onConflict: () => this.reread() });
    this.wire();
    // Everything in the scrolling box grows with the conversation: the
    // messages, the notices, the error and the action panel.
    this.follower = new ScrollFollower($("#chat-scroll"), [...$("#chat-scroll").children], $("#chat-scroll"));
  }

  wire() {
    const input = $("#composer-input");
    $("#composer").addEventListener("submit", (e) => {
      e.preventDefault();
      this.send();
    });
    input.addEventListener("keydown", (e) => {
      // Enter sends, Shift+Enter is a new line; on a touch screen, whose
      // keyboard has no Shift+Enter, Enter is a new line and Send sends.
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing && finePointer()) {
        e.preventDefault();
        this.send();
      }
    });
    $("#interrupt").addEventListener("click", () => this.act("/interrupt"));
    $("#retry").addEventListener("click", () => this.act("/retry"));
    $("#compact").addEventListener("click", () => this.act("/compact"));
    $("#archive").addEventListener("click", () => this.patch({ archived: !(this.chat && this.chat.archived) }));
    $("#rename").addEventListener("click", () => {
      $("#rename-input").value = (this.chat && this.chat.title) || "";
      setError($("#rename-error"), "");
      $("#rename-dialog").showModal();
      $("#rename-input").select();
    });
    $("#rename-cancel").addEventListener("click", () => $("#rename-dialog").close());
    $("#rename-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const title = $("#rename-input").value.trim();
      if (!title) return;
      if (await this.patch({ title }, $("#rename-error"))) $("#rename-dialog").close();
    });
    $("#delete").addEventListener("click", () => {
      $("#confirm-text").textContent = `Delete "${(this.chat && this.chat.title) || "this chat"}" and its messages? This cannot be undone.`;
      $("#confirm-dialog").returnValue = "";
      $("#confirm-dialog").showModal();
    });
    $("#confirm-dialog").addEventListener("close", async () => {
      if ($("#confirm-dialog").returnValue !== "yes" || !this.id) return;
      try {
        await this.api.del(this.api.chatPath(this.id));
        this.gone("");
      } catch (err) {
        this.composerError(`Could not delete the chat: ${err.message}`);
      }
    });
  }

  // noteOnOpen shows text in chat id's notice when it is opened next.
  noteOnOpen(id, text) {
    this.note = { id, text };
  }

  // open shows chat id. Each open has its own epoch, so the awaits of an
  // earlier open (of this chat or another) do nothing once it is left.
  async open(id) {
    if (id === this.id) return;
    this.close();
    const epoch = ++this.epoch;
    const left = () => this.epoch !== epoch;
    this.id = id;
    this.follower.reset();
    const main = $("#chat");
    main.dataset.chatId = id;
    show(main, true);
    $("#chat-title").textContent = "";
    this.showContext(null);
    setError($("#composer-error"), "");
    if (this.note && this.note.id === id) setError($("#action-notice"), this.note.text);
    this.note = null;
    try {
      const c = await this.api.get(this.api.chatPath(id));
      if (left()) return;
      this.setChat(c, true);
      await this.readHistory(id, left);
      if (!left()) this.compactState();
    } catch (err) {
      if (left()) return;
      if (err.status === 404) {
        this.gone("This chat does not exist (or was deleted).");
        return;
      }
      // The server may be restarting: try again while the chat is open.
      this.composerError(`Could not load the chat: ${err.message} Trying again…`);
      setTimeout(() => {
        if (left()) return;
        this.id = null;
        this.open(id);
      }, 2000);
      return;
    }
    if (left()) return;
    this.readQueue();
    this.follow(id);
    // On a phone, focusing would pop up the keyboard over the chat.
    if (finePointer()) $("#composer-input").focus();
  }

  close() {
    this.epoch++;
    if (this.stream) this.stream.close();
    this.stream = null;
    this.id = null;
    this.chat = null;
    this.view.reset();
    this.view.setIdle(false);
    this.actions.clear(true);
    show($("#chat"), false);
    show($("#chat-error"), false);
    show($("#retry-notice"), false);
  }

  // gone leaves a chat that no longer exists.
  gone(message) {
    const id = this.id;
    if (!id) return;
    this.close();
    if (message) setError($("#filter-error"), message);
    this.hooks.onGone(id);
  }

  async readHistory(id, left) {
    let after = 0;
    for (;;) {
      const page = await this.api.get(this.api.chatPath(id, `/messages?after=${after}&limit=${historyPage}&superseded=true`));
      if (left()) return;
      for (const m of page.messages) this.view.add(m);
      if (page.messages.length < historyPage) return;
      after = page.messages[page.messages.length - 1].id;
    }
  }

  // follow opens the chat's stream after the last message read. Every
  // (re)connect sends the step in progress again from its start, so the
  // draft is dropped on open.
  follow(id) {
    if (this.stream) this.stream.close();
    this.stream = new EventStream({
      url: this.api.chatPath(id, "/stream"),
      token: this.api.token,
      lastEventId: String(this.view.lastId),
      onOpen: () => this.view.dropDraft(),
      onState: (s) => connState($("#stream-state"), s, "Conversation"),
      onEvent: (type, data) => this.event(type, data),
      onEnd: (reason) => {
        if (reason === "unauthorized") this.hooks.onUnauthorized();
        else this.gone("This chat was deleted.");
      },
    });
  }

  event(type, data) {
    this.follower.arrived();
    switch (type) {
      case "status":
        this.setChat(data.chat);
        break;
      case "message":
        this.view.add(data.message, true);
        this.compactState();
        if (data.message.role === "user") this.readQueue();
        if (data.message.role === "assistant") show($("#retry-notice"), false);
        break;
      case "part":
        if (data.part && data.part.type === "text-delta") show($("#retry-notice"), false);
        this.view.part(data.message_id, data.part);
        break;
      case "history":
        // An edit or a regeneration: what came after is gone; the edit's
        // new version and the new answer follow as messages.
        this.view.supersede(data.superseded_after);
        this.compactState();
        break;
      case "retry": {
        const n = $("#retry-notice");
        n.textContent = `The model call failed (${data.error}); retrying, attempt ${data.attempt}, in ${(data.delay_ms / 1000).toFixed(1)} s…`;
        show(n, true);
        this.view.dropDraft();
        break;
      }
      case "error":
        this.showError({ kind: data.kind, message: data.message });
        this.view.dropDraft(); // a failed call leaves no message
        break;
      // action_required needs nothing more: the status event before it
      // carries the chat with its required_action.
    }
  }

  // setChat takes a copy of the chat unless a newer one is shown. full
  // says c was read with GET /chats/{id}, the only answer that carries its
  // context; a status change reads the chat again for it.
  setChat(c, full = false) {
    if (!c || c.id !== this.id) return;
    if (this.chat && (this.chat.version || 0) > (c.version || 0)) return;
    const moved = this.chat && this.chat.status !== c.status;
    this.chat = c;
    this.view.clientHistory = Boolean(c.labels && c.labels.api);
    if (full) this.showContext(c.context);
    if (moved) {
      this.readQueue();
      this.reread();
      const say = statusAnnouncement(c);
      if (say) announce(say);
    }
    $("#chat-title").textContent = c.title || "Untitled";
    document.title = `${c.title || "Untitled"} · parley`;
    const badge = $("#chat-status");
    badge.dataset.status = c.status;
    badge.textContent = statusText(c.status);
    $("#chat-model").textContent = c.model;
    this.showAgent(c);
    this.showOrigin(c);
    $("#chat-usage").textContent = usageText(c.usage || {});
    $("#archive").textContent = c.archived ? "Unarchive" : "Archive";
    $("#interrupt").disabled = !busy(c.status);
    const idle = c.status === "waiting" || c.status === "error";
    show($("#compact"), idle);
    this.compactState();
    this.view.setIdle(idle);
    if (c.status === "error" && c.last_error) this.showError(c.last_error);
    else show($("#chat-error"), false);
    if (c.status !== "running" && c.status !== "pending") show($("#retry-notice"), false);
    // No step is in progress: a draft left (a failed call stores nothing) goes.
    if (c.status !== "running") this.view.dropDraft();
    this.view.waiting(c.status === "requires_action" && c.required_action ? c.required_action.tool_calls : []);
    this.actions.update(c);
    this.hooks.onChat(c);
  }

  // showAgent names, in the header, the agent the chat was made from and
  // its version, linking to the agent.
  showAgent(c) {
    show($("#chat-agent"), Boolean(c.agent));
    if (!c.agent) return;
    const link = $("#chat-agent-link");
    link.href = `#/agents/${encodeURIComponent(c.agent)}`;
    link.textContent = `${c.agent}, version ${c.agent_version}`;
  }

  // showOrigin says, on a fork, which chat it was forked from, with a
  // link to it (its title read once; a deleted origin says so).
  async showOrigin(c) {
    const origin = c.labels && c.labels.forked_from;
    const box = $("#chat-fork");
    show(box, Boolean(origin));
    if (!origin) return;
    const link = $("#chat-fork-link");
    if (link.dataset.origin === origin) return;
    link.dataset.origin = origin;
    link.href = `#/chats/${encodeURIComponent(origin)}`;
    link.textContent = "the original chat";
    try {
      const o = await this.api.get(this.api.chatPath(origin));
      if (link.dataset.origin === origin) link.textContent = `“${o.title || "Untitled"}”`;
    } catch (err) {
      if (link.dataset.origin === origin && err.status === 404) {
        link.removeAttribute("href");
        link.textContent = "a chat that was deleted";
      }
    }
  }

  // compactState offers Compact only when there is something to
  // summarise: more than the last turn since the newest compaction.
  compactState() {
    const can = this.view.compactable();
    const b = $("#compact");
    b.disabled = !can;
    b.title = can ? "Summarise the earlier messages to free the model's context"
      : "Nothing to compact: the last turn always stays verbatim, and there is nothing before it since the last summary";
  }

  // reread reads the chat again, for when its stream may lag behind.
  async reread() {
    const id = this.id;
    if (!id) return;
    try {
      const c = await this.api.get(this.api.chatPath(id));
      this.setChat(c, true);
    } catch (err) {
      if (this.id === id && err.status === 404) this.gone("This chat was deleted.");
    }
  }

  // showContext shows how full the model's context window is (ctx from
  // GET /chats/{id}); without a known window the meter is hidden.
  showContext(ctx) {
    const box = $("#chat-context");
    if (!ctx || !ctx.window) {
      show(box, false);
      return;
    }
    const pct = ctx.percent ?? (100 * ctx.tokens) / ctx.window;
    const bar = $("#context-bar");
    bar.value = Math.min(pct, 100);
    box.dataset.tokens = String(ctx.tokens);
    box.dataset.window = String(ctx.window);
    const words = `${grouped(ctx.tokens)} / ${grouped(ctx.window)} tokens (${pct.toFixed(1)}%)`;
    $("#context-text").textContent = words;
    box.title = `Context: ${words} of the model's window, estimated for the next request`;
    show(box, true);
  }

  // editMessage writes a new version of user message id: it and the
  // messages after it are superseded, and the new version is answered.
  editMessage(id, content) {
    return this.rerun(id - 1, (chatId) => this.api.patch(this.api.chatPath(chatId, `/messages/${id}`), { content }));
  }

  // regenerate answers the last user message again, replacing what came
  // after it.
  regenerate() {
    return this.rerun(this.view.lastUserId(), (chatId) => this.api.post(this.api.chatPath(chatId, "/regenerate")));
  }

  // rerun sends a request that supersedes the messages after message
  // after and answers again; the ones shown when it was sent go at once
  // (the history event says the same), later ones are the new answer. It
  // returns the API's error message, "" on success.
  async rerun(after, send) {
    const chatId = this.id;
    const upTo = this.view.lastId;
    try {
      const c = await send(chatId);
      if (this.id !== chatId) return "";
      this.view.supersede(after, upTo);
      this.setChat(c);
      setError($("#composer-error"), "");
      return "";
    } catch (err) {
      return err.message;
    }
  }

  // fork makes a new chat with the history up to message id and opens it.
  async fork(id) {
    try {
      const c = await this.api.post(this.api.chatPath(this.id, "/fork"), { message_id: id });
      this.hooks.onChat(c);
      this.hooks.onOpen(c.id);
      return "";
    } catch (err) {
      return err.message;
    }
  }

  // showError shows the chat's failure. Retry is offered only for a
  // failure the server calls retryable, or a budget's stop (a retry goes
  // on once the budget allows): the same request would fail again
  // otherwise, and the message says the way on. The stream's error event
  // does not say: Retry is left to the chat's last_error, in the status
  // event next to it.
  showError(e) {
    const box = $("#chat-error");
    box.querySelector(".error-kind").textContent = errorKinds[e.kind] || e.kind || "error";
    box.querySelector(".error-message").textContent = e.message || "";
    if ("retryable" in e) show($("#retry"), e.retryable === true || e.kind === "spend_limit");
    show(box, true);
  }

  composerError(message) {
    setError($("#composer-error"), message);
  }

  // send sends the composer's text and attached files (once uploaded). A
  // refusal (a file the chat's model cannot take) is shown, and the text
  // and the files stay for another try.
  async send() {
    const input = $("#composer-input");
    let text = input.value;
    const id = this.id;
    if ((!text.trim() && !this.attach.count) || !id || this.sending) return;
    if (text.trimStart().startsWith("//")) text = text.trimStart().slice(1); // a message that starts with "/"
    else if (text.trimStart().startsWith("/")) {
      this.command(text.trim());
      return;
    }
    this.sending = true;
    $("#send").disabled = true;
    let files = null;
    try {
      files = await this.attach.take();
      if (this.id !== id) return;
      const r = await this.api.post(this.api.chatPath(id, "/messages"), { message: content(text, files.parts), busy: "queue" });
      if (this.id !== id) return; // the composer belongs to another chat now
      // Keep only what was typed and attached while the message was sent.
      this.attach.remove(files.items);
      input.value = input.value.startsWith(text) ? input.value.slice(text.length).trimStart() : input.value;
      setError($("#composer-error"), "");
      setError($("#action-notice"), "");
      if (r.message) this.view.add(r.message, true);
      if (r.queued) this.readQueue();
      // What was sent is shown, however far up the reader was.
      this.follower.toBottom();
    } catch (err) {
      if (this.id === id) this.composerError(refusal(err, files && files.items) || err.message);
    } finally {
      this.sending = false;
      $("#send").disabled = false;
    }
  }

  // command runs a composer command (a line starting with "/"); none is
  // ever sent to the model. /compact and /retry do what their buttons do,
  // /edit [text] opens the editor on the last message you sent.
  async command(line) {
    const [, name, rest] = line.match(/^\/(\S*)\s*([\s\S]*)$/);
    const input = $("#composer-input");
    const done = () => {
      input.value = "";
      setError($("#composer-error"), "");
    };
    switch (name) {
      case "compact":
        if ($("#compact").disabled || $("#compact").hidden) {
          this.composerError(`/compact: ${$("#compact").hidden ? "the chat is busy; compact it once it waits" : $("#compact").title}.`);
          return;
        }
        done();
        await this.act("/compact");
        return;
      case "retry":
        if (!this.chat || this.chat.status !== "error") {
          this.composerError("/retry: only a chat that failed can be retried.");
          return;
        }
        done();
        await this.act("/retry");
        return;
      case "edit":
        if (!this.view.editLast(rest)) {
          this.composerError("/edit: there is no message of yours to edit while the chat waits.");
          return;
        }
        done();
        return;
      default:
        this.composerError(`Unknown command /${name}. The commands are /compact, /retry and /edit [new text]; ` +
          "to send a message that starts with /, begin it with //.");
    }
  }

  // readQueue shows the chat's queued messages as the server has them. It
  // runs on open, after a message was queued, and whenever the status
  // changes or a user message reaches the history (that is when the queue
  // moves); overlapping calls collapse into one more read.
  async readQueue() {
    const id = this.id;
    if (!id) return;
    if (this.queueReading === id) {
      this.queueAgain = true;
      return;
    }
    this.queueReading = id;
    try {
      do {
        this.queueAgain = false;
        const r = await this.api.get(this.api.chatPath(id, "/queued"));
        if (this.id !== id) return;
        this.view.queued(r.queued || []);
      } while (this.queueAgain && this.id === id);
    } catch (err) {
      if (this.id === id && err.status !== 404) this.composerError(`Could not read the queued messages: ${err.message}`);
    } finally {
      if (this.queueReading === id) this.queueReading = null;
    }
  }

  async act(path) {
    if (!this.id) return;
    try {
      const c = await this.api.post(this.api.chatPath(this.id, path));
      this.setChat(c);
      setError($("#composer-error"), "");
    } catch (err) {
      this.composerError(err.message);
    }
  }

  async patch(body, errorEl) {
    if (!this.id) return false;
    try {
      const c = await this.api.patch(this.api.chatPath(this.id), body);
      this.setChat(c);
      return true;
    } catch (err) {
      if (errorEl) setError(errorEl, err.message);
      else this.composerError(err.message);
      return false;
    }
  }
}

// grouped writes a count with thousands separators: 128,000.
function grouped(n) {
  return Number(n).toLocaleString("en-US");
}

// finePointer says whether the main pointer is not a touch screen (a
// mouse, or none at all): there, Enter sends and opening a chat focuses
// the composer.
function finePointer() {
  return !matchMedia("(pointer: coarse)").matches;
}
