// EventStream follows a Server-Sent Events stream of the API for the page:
// through the shared stream worker where the browser has SharedWorker
// (streamhub.js), so that all tabs together hold one connection per
// stream, or else with a connection of its own (sseconn.js). Either way it
// reconnects by itself and resumes after the last durable message seen.

import { SSEConnection } from "./sseconn.js";
import { hub } from "./streamhub.js";

export class EventStream {
  // opts: url, token, lastEventId (optional: a chat stream's resume
  // cursor), onOpen(), onEvent(type, data, id), onState("connecting" |
  // "connected"), onEnd(reason) for an end that is final ("unauthorized"
  // or "gone": 401 or 404; the stream stops).
  constructor(opts) {
    this.opts = opts;
    this.lastEventId = opts.lastEventId;
    const h = hub();
    if (!h) {
      this.conn = new SSEConnection(opts);
      return;
    }
    this.closed = false;
    this.sub = h.subscribe({ url: opts.url, token: opts.token, lastEventId: opts.lastEventId }, (m) => this.message(m));
    this.onOnline = () => this.sub.reconnect();
    addEventListener("online", this.onOnline);
  }

  close() {
    if (this.conn) {
      this.conn.close();
      return;
    }
    this.closed = true;
    removeEventListener("online", this.onOnline);
    this.sub.close();
  }

  // reconnectNow drops the connection and opens a new one at once.
  reconnectNow() {
    if (this.conn) this.conn.reconnectNow();
    else this.sub.reconnect();
  }

  message(m) {
    if (this.closed) return;
    const o = this.opts;
    switch (m.kind) {
      case "state":
        if (o.onState) o.onState(m.state);
        break;
      case "open":
        if (o.onOpen) o.onOpen();
        break;
      case "event":
        if (m.id !== null && m.id !== undefined && m.id !== "") this.lastEventId = m.id;
        try {
          o.onEvent(m.type, m.data, m.id);
        } catch (err) {
          // A fault of the page must not end the stream (nor skip the
          // events after this one): report it and read on.
          console.error(`handling the ${m.type} event:`, err);
        }
        break;
      case "end":
        this.close();
        if (o.onEnd) o.onEnd(m.reason);
        break;
      case "fallback":
        // The shared worker failed: go on with a connection of this tab's
        // own, after the last message seen.
        removeEventListener("online", this.onOnline);
        this.conn = new SSEConnection({ ...o, lastEventId: this.lastEventId });
        break;
    }
  }
}
