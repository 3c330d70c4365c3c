// EventStream reads a Server-Sent Events stream with fetch, because the
// browser's EventSource cannot send an Authorization header. It reconnects
// by itself, with backoff, sending the last event id it saw as
// Last-Event-ID, so a resumed chat stream continues after the last durable
// message.

const minDelay = 500;
const maxDelay = 10000;

export class EventStream {
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
    window.addEventListener("online", this.onOnline);
    this.connect();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    window.removeEventListener("online", this.onOnline);
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
    let buf = "";
    let type = "";
    let data = [];
    let id = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (done || ctl.signal.aborted) return;
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (id !== null) this.lastEventId = id;
          if (data.length > 0) this.dispatch(type || "message", data.join("\n"), id);
          type = "";
          data = [];
          id = null;
          if (this.closed || ctl !== this.ctl) return;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") type = val;
        else if (field === "data") data.push(val);
        else if (field === "id") id = val;
      }
    }
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
    this.opts.onEvent(type, data, id);
    if (type === "resync") this.reconnectNow();
  }
}
