// The tab's side of the shared stream worker (streamworker.js): one port
// to the worker, through which every EventStream of this tab subscribes.
// hub() is null where the browser has no SharedWorker (or it cannot be
// started); each tab then holds its own connections.

const workerURL = new URL("./streamworker.js", import.meta.url);
// The worker's name carries the version of the messages it speaks: a page
// of a newer UI never talks to an older worker that tabs left running.
const workerName = "parley-streams-2";

let shared; // undefined: not tried yet; null: unavailable; else the Hub

// randomId is a tab or subscription id. crypto.randomUUID needs a secure
// context; getRandomValues does not.
function randomId() {
  const b = crypto.getRandomValues(new Uint8Array(12));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

class Hub {
  constructor(worker) {
    this.port = worker.port;
    this.tab = randomId();
    this.handlers = new Map(); // sub id → function(msg)
    this.port.addEventListener("message", (e) => {
      const h = this.handlers.get(e.data && e.data.sub);
      if (h) h(e.data);
    });
    this.port.start();
    this.ready = this.hello();
    // A tab that closes says so; one that crashes releases its lock.
    addEventListener("pagehide", () => this.port.postMessage({ op: "bye" }));
  }

  // hello introduces the tab once it holds its lock (where Web Locks
  // exist: in secure contexts), which the worker waits on to learn that
  // the tab is gone.
  async hello() {
    if (navigator.locks) {
      await new Promise((held) => {
        navigator.locks.request(`parley-tab-${this.tab}`, () => {
          held();
          return new Promise(() => {}); // held while the tab lives
        }).catch(() => held());
      });
    }
    this.port.postMessage({ op: "hello", tab: this.tab });
  }

  // fail hands every subscription of the tab back to its EventStream
  // ({kind: "fallback"}), and makes later ones fall back at once.
  fail() {
    this.failed = true;
    const handlers = [...this.handlers.values()];
    this.handlers.clear();
    for (const h of handlers) h({ kind: "fallback" });
  }

  // subscribe follows url with token; onMessage gets the worker's messages
  // for it. It returns the subscription's {reconnect(), close()}.
  subscribe({ url, token, lastEventId }, onMessage) {
    const sub = `${this.tab}:${randomId()}`;
    if (this.failed) {
      queueMicrotask(() => onMessage({ kind: "fallback" }));
      return { reconnect: () => {}, close: () => {} };
    }
    this.handlers.set(sub, onMessage);
    let closed = false;
    this.ready.then(() => {
      if (!closed) this.port.postMessage({ op: "sub", sub, url, token, lastEventId });
    });
    return {
      reconnect: () => this.ready.then(() => { if (!closed) this.port.postMessage({ op: "reconnect", sub }); }),
      close: () => {
        if (closed) return;
        closed = true;
        this.handlers.delete(sub);
        this.ready.then(() => this.port.postMessage({ op: "unsub", sub }));
      },
    };
  }
}

// perTabKey, set to "per-tab" in local storage, keeps this browser's tabs
// to their own connections (for debugging a stream in a tab's DevTools).
const perTabKey = "parley.streams";

// hub returns this tab's Hub, or null where streams are not shared.
export function hub() {
  if (shared !== undefined) return shared;
  shared = null;
  if (typeof SharedWorker !== "function" || localStorage.getItem(perTabKey) === "per-tab") return shared;
  try {
    const w = new SharedWorker(workerURL, { type: "module", name: workerName });
    shared = new Hub(w);
    // A worker that cannot start: every stream of the tab goes on with a
    // connection of its own.
    w.addEventListener("error", (e) => {
      console.warn("the shared stream worker failed; this tab opens its own streams:", e.message || e);
      shared.fail();
    });
  } catch (err) {
    console.warn("no shared stream worker; this tab opens its own streams:", err);
  }
  return shared;
}
