// The Usage view (#/usage): the owner's usage today and this month
// against their limits (GET /api/v1/usage), so a budget is seen before it
// is reached; for the admin, any owner's usage and a form that sets that
// owner's limits (GET and PUT /api/v1/owners/{owner}/quotas). The top
// bar's warning (see UsageWatch) says when a limit is near.

import { $, h, setError, show } from "./dom.js";

// near is the share of a limit from which the top bar warns.
const near = 0.8;

// The limits that a period's usage counts against, and how to read them.
const metered = {
  day: [["spend_micros_per_day", "Spend", spendOf, money], ["tokens_per_day", "Tokens", tokensOf, tokens]],
  month: [["spend_micros_per_month", "Spend", spendOf, money], ["tokens_per_month", "Tokens", tokensOf, tokens]],
};

// The other limits, in words.
const others = [
  ["requests_per_second", "Requests per second"], ["burst", "Request burst"], ["max_running", "Chats running at once"],
  ["max_streams", "Open streams"], ["max_chats", "Chats"], ["max_file_bytes", "Stored file bytes"],
];

function spendOf(u) { return u.cost_micros || 0; }
function tokensOf(u) { return (u.input_tokens || 0) + (u.output_tokens || 0); }
function money(v) { return (v / 1e6).toFixed(2); }
function tokens(v) { return `${Number(v).toLocaleString("en-US")} tokens`; }
function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

// readUsage reads an owner's usage of both periods ("" for the caller's).
async function readUsage(api, owner) {
  const q = owner ? `&owner=${encodeURIComponent(owner)}` : "";
  const [day, month] = await Promise.all([api.get(`/api/v1/usage?period=day${q}`), api.get(`/api/v1/usage?period=month${q}`)]);
  return { day, month };
}

// closest is the metered limit nearest to being reached: its share used
// (0 when nothing is limited) and words for it.
function closest(usage) {
  let best = { share: 0, words: "" };
  for (const [period, u] of Object.entries(usage)) {
    for (const [key, name, of, fmt] of metered[period]) {
      const limit = (u.limits || {})[key] || 0;
      if (!limit) continue;
      const share = of(u.usage || {}) / limit;
      if (share > best.share) {
        const what = `${period === "day" ? "daily" : "monthly"} ${name.toLowerCase()} limit`;
        best = { share, words: share >= 1 ? `Your ${what} is reached` : `${Math.floor(share * 100)}% of your ${what} used`,
          detail: `${fmt(of(u.usage || {}))} of ${fmt(limit)}; resets ${when(u.resets_at)}` };
      }
    }
  }
  return best;
}

// UsageWatch keeps the top bar's warning: shown from near a limit on,
// read at sign-in and again (at most every few seconds) when a chat of
// the owner finishes a run.
export class UsageWatch {
  constructor(api) {
    this.api = api;
    this.last = 0;
    this.timer = 0;
  }

  async check() {
    this.last = Date.now();
    try {
      this.show(await readUsage(this.api, ""));
    } catch (err) {
      console.warn("could not read the usage:", err);
    }
  }

  // soon checks again, no more often than every 5 s.
  soon() {
    if (this.timer) return;
    const wait = Math.max(0, this.last + 5000 - Date.now());
    this.timer = setTimeout(() => {
      this.timer = 0;
      this.check();
    }, wait);
  }

  show(usage) {
    const c = closest(usage);
    const warn = $("#usage-warn");
    show(warn, c.share >= near);
    warn.dataset.reached = String(c.share >= 1);
    warn.textContent = c.words;
    warn.title = c.detail || "";
  }
}

export class UsageView {
  // watch is the top bar's UsageWatch, told of what this view reads.
  constructor(api, watch) {
    this.api = api;
    this.watch = watch;
    this.admin = false;
    this.owner = "";
    $("#usage-owner-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.owner = $("#usage-owner").value.trim();
      this.load();
    });
    $("#quota-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.save();
    });
  }

  // setOwner says whose token this page uses; the admin may look at
  // (and set the limits of) any owner.
  setOwner(owner) {
    this.self = owner;
    this.admin = owner === "admin";
    show($("#usage-owner-form"), this.admin);
  }

  show() {
    this.load();
  }

  hide() {}

  async load() {
    const owner = this.owner && this.owner !== this.self ? this.owner : "";
    setError($("#usage-error"), "");
    let usage;
    try {
      usage = await readUsage(this.api, owner);
    } catch (err) {
      setError($("#usage-error"), `Could not read the usage: ${err.message}`);
      return;
    }
    if (!owner) this.watch.show(usage);
    $("#usage-whose").textContent = usage.day.owner;
    $("#usage-periods").replaceChildren(this.period("Today (UTC)", "day", usage.day), this.period("This month (UTC)", "month", usage.month));
    const limits = usage.day.limits || {};
    $("#usage-others").replaceChildren(...others.map(([k, name]) =>
      h("tr", { dataset: { limit: k } }, h("th", { scope: "row" }, name), h("td", {}, limits[k] ? Number(limits[k]).toLocaleString("en-US") : "unlimited"))));
    show($("#quota-box"), this.admin);
    if (this.admin) await this.loadQuotas(usage.day.owner);
  }

  // period is the table of one period's metered limits.
  period(title, period, u) {
    const rows = metered[period].map(([key, name, of, fmt]) => {
      const used = of(u.usage || {});
      const limit = (u.limits || {})[key] || 0;
      const meter = limit ? h("meter", { min: "0", max: String(limit), value: String(Math.min(used, limit)), low: String(limit * near),
        high: String(limit * 0.95), optimum: "0", "aria-label": `${name} used ${period === "day" ? "today" : "this month"}` }) : null;
      return h("tr", { dataset: { limit: key, used: String(used), of: String(limit) } },
        h("th", { scope: "row" }, name),
        h("td", { class: "usage-figure" }, limit ? `${fmt(used)} / ${fmt(limit)}` : `${fmt(used)} (no limit)`),
        h("td", {}, meter));
    });
    return h("section", { class: "usage-period", dataset: { period } },
      h("h3", {}, title),
      h("table", { class: "usage-table" }, h("tbody", {}, rows)),
      h("p", { class: "muted" }, `Resets ${when(u.resets_at)}.`));
  }

  // loadQuotas fills the admin's form with owner's overrides, each
  // field's placeholder the server's default.
  async loadQuotas(owner) {
    let q;
    try {
      q = await this.api.get(`/api/v1/owners/${encodeURIComponent(owner)}/quotas`);
    } catch (err) {
      setError($("#quota-error"), `Could not read ${owner}'s limits: ${err.message}`);
      return;
    }
    this.quotaOwner = q.owner;
    $("#quota-whose").textContent = q.owner;
    setError($("#quota-error"), "");
    $("#quota-saved").textContent = "";
    const fields = Object.keys(q.defaults || {}).map((k) => {
      const id = `quota-${k}`;
      const v = (q.overrides || {})[k];
      return h("div", { class: "quota-field" },
        h("label", { for: id }, k),
        h("input", { id, name: k, type: "number", min: "0", step: "1", value: v == null ? "" : String(v),
          placeholder: `default ${q.defaults[k] || "unlimited"}` }));
    });
    $("#quota-fields").replaceChildren(...fields);
  }

  // save sends the form as the owner's whole set of overrides: an empty
  // field takes the default.
  async save() {
    const body = {};
    for (const input of $("#quota-fields").querySelectorAll("input")) {
      if (input.value.trim() !== "") body[input.name] = Number(input.value);
    }
    try {
      await this.api.put(`/api/v1/owners/${encodeURIComponent(this.quotaOwner)}/quotas`, body);
    } catch (err) {
      setError($("#quota-error"), err.message);
      return;
    }
    await this.load();
    $("#quota-saved").textContent = `Saved ${this.quotaOwner}'s limits.`;
  }
}
