// The shared stream worker: one SharedWorker per browser profile and origin
// holds the browser's stream connections and fans the events out to every
// tab that subscribed: every chat stream of a token over ONE multiplexed
// connection (streammux.js; 32 chats a connection), any other stream (the
// owner feed) over one connection per distinct token and URL. However
// many tabs are open on however many chats, the browser keeps two stream
// connections, and API requests never queue behind them (a browser opens
// at most six HTTP/1.1 connections to one server). streamhub.js is the
// tabs' side. A server without the multiplexed stream gets one connection
// per chat, as before it.
//
// Messages from a tab (its port):
//   {op: "hello", tab}                       a tab; a Web Lock "parley-tab-<tab>" is held while it lives
//   {op: "sub", sub, url, token, lastEventId} follow a stream (lastEventId undefined: no resume cursor)
//   {op: "unsub", sub}                       stop following it
//   {op: "reconnect", sub}                   open that stream's connection again now (the tab went online)
//   {op: "bye"}                              the tab is going away: drop its subscriptions
// Messages to a tab, each naming the subscription:
//   {sub, kind: "state", state}  "connecting" | "connected"
//   {sub, kind: "open"}           the stream (re)connected: what follows is sent from its start
//   {sub, kind: "event", type, data, id}
//   {sub, kind: "end", reason}    "unauthorized" | "gone": the stream stopped for good
//
// Resuming: a chat stream's events after a cursor are the durable messages
// (with ids) after it, the status and the step in progress. When a tab
// subscribes to a stream already open, the worker opens it again from the
// lowest cursor of its subscribers; each tab receives only the messages
// after its own cursor, and the status and step like after any reconnect.
// A stream without a cursor (the owner feed) is not reopened: the new tab
// is told it is open, and reads what it needs itself.

import { SSEConnection } from "./sseconn.js";
import { ChatMux, chatOf } from "./streammux.js";

const streams = new Map(); // token + "\n" + url → Stream
const muxes = new Map(); // token → ChatMux
const tabs = new Map(); // tab id → {port, subs: Set of sub ids}

// Stream is one connection shared by its subscribers.
class Stream {
  constructor(key, url, token) {
    this.key = key;
    this.url = url;
    this.token = token;
    this.subs = new Map(); // sub id → {port, lastEventId}
    this.conn = null;
    this.state = "connecting";
    this.opened = false; // the connection delivered "open" at least once
    this.reopen = false; // a reopen is scheduled
  }

  add(id, port, lastEventId) {
    const sub = { port, lastEventId };
    this.subs.set(id, sub);
    send(port, id, { kind: "state", state: this.state });
    if (!this.conn) {
      this.connect(cursor(this.subs));
      return;
    }
    if (lastEventId === undefined) {
      if (this.opened && this.state === "connected") send(port, id, { kind: "open" });
      return;
    }
    // Resume this subscriber too: open again from the lowest cursor, once
    // for the subscriptions of one turn of the event loop.
    if (this.reopen) return;
    this.reopen = true;
    queueMicrotask(() => {
      this.reopen = false;
      if (!this.conn || this.subs.size === 0) return;
      this.conn.lastEventId = cursor(this.subs) ?? "";
      this.conn.reconnectNow();
    });
  }

  remove(id) {
    this.subs.delete(id);
    if (this.subs.size > 0) return;
    if (this.conn) this.conn.close();
    streams.delete(this.key);
  }

  connect(lastEventId) {
    this.conn = new SSEConnection({
      url: this.url,
      token: this.token,
      lastEventId,
      onOpen: () => {
        this.opened = true;
        this.fan({ kind: "open" });
      },
      onState: (s) => {
        this.state = s;
        this.fan({ kind: "state", state: s });
      },
      onEvent: (type, data, id) => this.event(type, data, id),
      onEnd: (reason) => {
        this.fan({ kind: "end", reason });
        this.subs.clear();
        streams.delete(this.key);
      },
    });
  }

  // event hands one event to every subscriber, except a durable message to
  // a subscriber whose cursor is at or past it.
  event(type, data, id) {
    const n = id === null || id === undefined || id === "" ? NaN : Number(id);
    for (const [sid, sub] of this.subs) {
      if (!Number.isNaN(n)) {
        if (sub.lastEventId !== undefined && sub.lastEventId !== "" && Number(sub.lastEventId) >= n) continue;
        sub.lastEventId = id;
      }
      send(sub.port, sid, { kind: "event", type, data, id });
    }
  }

  fan(msg) {
    for (const [sid, sub] of this.subs) send(sub.port, sid, msg);
  }
}

// cursor is the lowest resume cursor of subs: "" (from the start) when one
// has none, undefined when none resumes at all.
function cursor(subs) {
  let low;
  for (const { lastEventId } of subs.values()) {
    if (lastEventId === undefined) continue;
    if (lastEventId === "") return "";
    if (low === undefined || Number(lastEventId) < Number(low)) low = lastEventId;
  }
  return low;
}

function send(port, sub, msg) {
  try {
    port.postMessage({ sub, ...msg });
  } catch (err) {
    // A port whose tab is gone: its "bye" or lock will drop it.
  }
}

function streamOf(sub) {
  for (const s of streams.values()) if (s.subs.has(sub)) return s;
  return null;
}

function muxOf(sub) {
  for (const m of muxes.values()) if (m.has(sub)) return m;
  return null;
}

function unsubscribe(sub) {
  const m = muxOf(sub);
  if (m) {
    m.remove(sub);
    return;
  }
  const s = streamOf(sub);
  if (s) s.remove(sub);
}

// follow adds subscription sub of port to url's stream: a chat's to its
// token's mux, unless the server has none; any other to its own.
function follow(sub, port, url, token, lastEventId) {
  const chat = chatOf(url);
  if (chat !== null) {
    let m = muxes.get(token);
    if (!m) {
      m = new ChatMux(token, send, (subs) => {
        for (const x of subs) follow(x.sub, x.port, x.url, token, x.lastEventId);
      }, (id) => fetch(`/api/v1/chats/${encodeURIComponent(id)}`, { headers: { Authorization: `Bearer ${token}` } }).then((r) => r.status));
      muxes.set(token, m);
    }
    if (!m.unsupported) {
      m.add(sub, port, chat, lastEventId);
      return;
    }
  }
  const key = `${token}\n${url}`;
  let s = streams.get(key);
  if (!s) {
    s = new Stream(key, url, token);
    streams.set(key, s);
  }
  s.add(sub, port, lastEventId);
}

function dropTab(id) {
  const tab = tabs.get(id);
  if (!tab) return;
  tabs.delete(id);
  for (const sub of tab.subs) unsubscribe(sub);
}

function message(port, tabRef, msg) {
  switch (msg.op) {
    case "hello": {
      tabRef.id = msg.tab;
      tabs.set(msg.tab, { port, subs: new Set() });
      // The tab holds this lock while it lives: it is granted here once
      // the tab is gone, closed or crashed, without a goodbye.
      if (globalThis.navigator && navigator.locks) {
        navigator.locks.request(`parley-tab-${msg.tab}`, () => dropTab(msg.tab)).catch(() => {});
      }
      break;
    }
    case "sub": {
      const tab = tabs.get(tabRef.id);
      if (!tab) return;
      tab.subs.add(msg.sub);
      follow(msg.sub, port, msg.url, msg.token, msg.lastEventId);
      break;
    }
    case "unsub": {
      const tab = tabs.get(tabRef.id);
      if (tab) tab.subs.delete(msg.sub);
      unsubscribe(msg.sub);
      break;
    }
    case "reconnect": {
      const m = muxOf(msg.sub);
      if (m) {
        m.reconnect(msg.sub);
        break;
      }
      const s = streamOf(msg.sub);
      if (s && s.conn) s.conn.reconnectNow();
      break;
    }
    case "bye":
      dropTab(tabRef.id);
      break;
  }
}

globalThis.addEventListener("connect", (e) => {
  const port = e.ports[0];
  const tabRef = { id: null };
  port.addEventListener("message", (ev) => message(port, tabRef, ev.data || {}));
  port.start();
});
