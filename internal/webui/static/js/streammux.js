// ChatMux carries the chat streams of one token over one connection: the
// multiplexed stream GET /api/v1/chats/streams?chat=<id>[:<after>]&…,
// whose events are those of each chat's own stream (/chats/{id}/stream)
// with the chat's id in their data's chat_id, and no SSE id. Adding or
// removing a chat opens the connection again with the new set, each chat
// resumed after the lowest cursor of its subscribers; the worker
// (streamworker.js) tracks the cursors from the message events. A
// connection takes at most maxChats chats: more take more connections.
//
// A server without that route (it answers 404 for a chat named
// "streams") makes the mux hand every chat back to the worker, which then
// follows each on its own connection (onUnsupported).

import { SSEConnection } from "./sseconn.js";

export const maxChats = 32;

const muxPath = "/api/v1/chats/streams";

// chatOf is the chat id of a chat stream's URL, null for another stream.
export function chatOf(url) {
  const m = /^\/api\/v1\/chats\/([^/?#]+)\/stream$/.exec(url);
  return m ? decodeURIComponent(m[1]) : null;
}

// Group is one multiplexed connection and the chats it carries.
class Group {
  constructor(mux) {
    this.mux = mux;
    this.chats = new Map(); // chat id → ChatSubs
    this.conn = null;
    this.state = "connecting";
    this.due = false; // a (re)connect is scheduled
  }

  // url is the stream's address with every chat and its cursor, read at
  // each (re)connect so a reconnect resumes where the chats are now.
  url() {
    const q = [...this.chats].map(([id, c]) => {
      const after = c.cursor();
      return "chat=" + encodeURIComponent(id) + (after ? ":" + encodeURIComponent(after) : "");
    });
    return `${muxPath}?${q.join("&")}`;
  }

  // changed opens the connection again with the chats now in the group,
  // once for all the changes of one turn of the event loop.
  changed() {
    if (this.due) return;
    this.due = true;
    queueMicrotask(() => {
      this.due = false;
      if (this.chats.size === 0) {
        if (this.conn) this.conn.close();
        this.conn = null;
        this.mux.groups.delete(this);
        return;
      }
      if (this.conn) {
        this.conn.reconnectNow();
        return;
      }
      const group = this;
      this.conn = new SSEConnection({
        get url() { return group.url(); },
        token: this.mux.token,
        onOpen: () => { for (const c of this.chats.values()) c.fan({ kind: "open" }); },
        onState: (s) => {
          this.state = s;
          for (const c of this.chats.values()) c.fan({ kind: "state", state: s });
        },
        onEvent: (type, data) => this.event(type, data),
        onEnd: (reason) => this.ended(reason),
      });
    });
  }

  event(type, data) {
    const id = data && data.chat_id;
    const c = id !== undefined && this.chats.get(id);
    if (!c) return; // a chat this group no longer carries
    const m = type === "message" && data.message;
    c.event(type, data, m && m.id !== undefined ? String(m.id) : null);
    // A chat too slow to keep up is told to resync and no longer carried:
    // open the connection again with it, from its cursor.
    if (type === "resync") this.changed();
  }

  // ended: a 401 ends every chat; a 404 is a server without the route,
  // or a chat that is gone, which the mux tells apart.
  ended(reason) {
    this.conn = null;
    const chats = [...this.chats.values()];
    this.chats.clear();
    this.mux.groups.delete(this);
    if (reason === "unauthorized") {
      for (const c of chats) c.end("unauthorized");
      return;
    }
    this.mux.notFound(chats);
  }
}

// ChatSubs are the subscribers of one chat.
class ChatSubs {
  constructor(id, group, send) {
    this.id = id;
    this.group = group;
    this.send = send;
    this.subs = new Map(); // sub id → {port, lastEventId}
  }

  // cursor is the lowest resume cursor of the subscribers, "" for none.
  cursor() {
    let low = "";
    for (const { lastEventId } of this.subs.values()) {
      if (lastEventId === undefined || lastEventId === "") return "";
      if (low === "" || Number(lastEventId) < Number(low)) low = lastEventId;
    }
    return low;
  }

  // event hands one event to every subscriber, except a durable message to
  // a subscriber whose cursor is at or past it.
  event(type, data, id) {
    const n = id === null ? NaN : Number(id);
    for (const [sid, sub] of this.subs) {
      if (!Number.isNaN(n)) {
        if (sub.lastEventId !== undefined && sub.lastEventId !== "" && Number(sub.lastEventId) >= n) continue;
        sub.lastEventId = id;
      }
      this.send(sub.port, sid, { kind: "event", type, data, id });
    }
  }

  fan(msg) {
    for (const [sid, sub] of this.subs) this.send(sub.port, sid, msg);
  }

  end(reason) {
    this.fan({ kind: "end", reason });
    this.subs.clear();
  }
}

export class ChatMux {
  // send(port, sub, msg) posts to a tab; onUnsupported(subs) hands the
  // subscriptions of chats back to the worker when the server has no
  // multiplexed stream ([{sub, port, url, lastEventId}]).
  constructor(token, send, onUnsupported, readChat) {
    this.token = token;
    this.send = send;
    this.onUnsupported = onUnsupported;
    this.readChat = readChat; // async (id) → HTTP status of GET /chats/{id}
    this.groups = new Set();
  }

  has(sub) {
    return this.chatOfSub(sub) !== null;
  }

  chatOfSub(sub) {
    for (const g of this.groups) for (const c of g.chats.values()) if (c.subs.has(sub)) return c;
    return null;
  }

  add(sub, port, chatId, lastEventId) {
    let c = null;
    for (const g of this.groups) c = c || g.chats.get(chatId) || null;
    if (!c) {
      let g = [...this.groups].find((x) => x.chats.size < maxChats);
      if (!g) {
        g = new Group(this);
        this.groups.add(g);
      }
      c = new ChatSubs(chatId, g, this.send);
      g.chats.set(chatId, c);
      c.subs.set(sub, { port, lastEventId });
      this.send(port, sub, { kind: "state", state: "connecting" });
      g.changed();
      return;
    }
    c.subs.set(sub, { port, lastEventId });
    this.send(port, sub, { kind: "state", state: c.group.state });
    // Resume this subscriber too: the group opens again from the chat's
    // lowest cursor.
    c.group.changed();
  }

  remove(sub) {
    const c = this.chatOfSub(sub);
    if (!c) return;
    c.subs.delete(sub);
    if (c.subs.size > 0) return;
    c.group.chats.delete(c.id);
    c.group.changed();
  }

  reconnect(sub) {
    const c = this.chatOfSub(sub);
    if (c && c.group.conn) c.group.conn.reconnectNow();
  }

  // notFound sorts the chats of a connection answered 404: those that are
  // gone end; if none is, the server has no multiplexed stream, and every
  // chat goes back to a connection of its own; else the rest carry on.
  async notFound(chats) {
    const statuses = await Promise.all(chats.map((c) => this.readChat(c.id).catch(() => 0)));
    const gone = chats.filter((c, i) => statuses[i] === 404);
    const left = chats.filter((c, i) => statuses[i] !== 404);
    for (const c of gone) c.end("gone");
    if (gone.length === 0) {
      this.unsupported = true;
      const subs = [];
      for (const c of left) {
        for (const [sub, s] of c.subs) subs.push({ sub, port: s.port, url: `/api/v1/chats/${encodeURIComponent(c.id)}/stream`, lastEventId: s.lastEventId });
      }
      this.onUnsupported(subs);
      return;
    }
    for (const c of left) for (const [sub, s] of c.subs) this.add(sub, s.port, c.id, s.lastEventId);
  }
}
