// SSEConnection reads a Server-Sent Events stream with fetch, because the
// browser's EventSource cannot send an Authorization header. It reconnects
// by itself, with backoff, sending the last event id it saw as
// Last-Event-ID, so a resumed chat stream continues after the last durable
// message. It runs in a page or in the shared stream worker
// (streamworker.js), so it uses nothing of the window.

const minDelay = 500;
const maxDelay = 10000;
// The server writes at least a keep-alive comment every 15 s: a stream
// silent for longer than this is dead (a laptop that slept, a network that
// changed) and is opened again.
const silentLimit = 45000;

export class SSEConnection {
  // opts: url, token, lastEventId (optional), onOpen(), onEvent(type, data, id),
  // onState("connecting" | "connected"), onEnd(reason) for an end that is
  // final ("unauthorized" or "gone": 401 or 404; the stream stops).
  constructor(opts) {
    this.opts = opts;
    this.lastEventId = opts.lastEventId ?? "";
    this.delay = minDelay;
    this.closed = false;
    this.timer = null;
    this.ctl = null;
    this.onOnline = () => this.reconnectNow();
    globalThis.addEventListener("online", this.onOnline);
    this.connect();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    globalThis.removeEventListener("online", this.onOnline);
    if (this.ctl) this.ctl.abort();
  }

  // reconnectNow drops the connection and opens a new one at once.
  reconnectNow() {
    if (this.closed) return;
    clearTimeout(this.timer);
    if (this.ctl) this.ctl.abort();
    this.delay = minDelay;
    this.connect();
  }

  state(s) {
    if (this.opts.onState) this.opts.onState(s);
  }

  async connect() {
    if (this.closed) return;
    const ctl = new AbortController();
    this.ctl = ctl;
    this.state("connecting");
    const headers = { Authorization: `Bearer ${this.opts.token}`, Accept: "text/event-stream" };
    if (this.lastEventId !== "") headers["Last-Event-ID"] = this.lastEventId;
    try {
      const res = await fetch(this.opts.url, { headers, signal: ctl.signal, cache: "no-store" });
      if (res.status === 401 || res.status === 404) {
        this.end(res.status === 401 ? "unauthorized" : "gone");
        return;
      }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      this.state("connected");
      if (this.opts.onOpen) this.opts.onOpen();
      await this.read(res.body, ctl);
    } catch (err) {
      if (ctl.signal.aborted) return;
    }
    if (this.closed || ctl !== this.ctl) return;
    this.retryLater();
  }

  retryLater() {
    this.state("connecting");
    const wait = this.delay * (0.75 + Math.random() / 2);
    this.delay = Math.min(this.delay * 2, maxDelay);
    this.timer = setTimeout(() => this.connect(), wait);
  }

  end(reason) {
    this.close();
    if (this.opts.onEnd) this.opts.onEnd(reason);
  }

  async read(body, ctl) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    const ev = { type: "", data: [], id: null }; // the event being read
    let buf = "";
    let watchdog = 0;
    const heard = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => ctl.abort(), silentLimit);
    };
    try {
      heard();
      for (;;) {
        const { value, done } = await reader.read();
        if (done || ctl.signal.aborted) return;
        heard();
        buf += value;
        // A line ends at \n, \r\n or \r; a \r last in the buffer waits,
        // as the \n of its \r\n may come in the next chunk.
        let nl;
        while ((nl = buf.search(/\r\n|\n|\r(?=.)/s)) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
          this.line(line, ev);
          if (this.closed || ctl !== this.ctl) return;
        }
      }
    } finally {
      clearTimeout(watchdog);
    }
  }

  // line takes one line of the stream into ev, dispatching ev at the blank
  // line that ends it.
  line(line, ev) {
    if (line === "") {
      if (ev.id !== null) this.lastEventId = ev.id;
      const { type, data, id } = ev;
      ev.type = "";
      ev.data = [];
      ev.id = null;
      if (data.length > 0) this.dispatch(type || "message", data.join("\n"), id);
      return;
    }
    if (line.startsWith(":")) return; // a comment: keep-alive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let val = colon < 0 ? "" : line.slice(colon + 1);
    if (val.startsWith(" ")) val = val.slice(1);
    if (field === "event") ev.type = val;
    else if (field === "data") ev.data.push(val);
    else if (field === "id") ev.id = val;
  }

  dispatch(type, raw, id) {
    this.delay = minDelay;
    let data = null;
    try {
      data = JSON.parse(raw);
    } catch {
      data = raw;
    }
    if (type === "unauthorized") {
      this.end("unauthorized");
      return;
    }
    try {
      this.opts.onEvent(type, data, id);
    } catch (err) {
      // A fault of the page must not end the stream (nor skip the events
      // after this one): report it and read on.
      console.error(`handling the ${type} event:`, err);
    }
    if (type === "resync") this.reconnectNow();
  }
}
