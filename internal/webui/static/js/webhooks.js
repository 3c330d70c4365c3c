// The webhooks page ("#/webhooks"): the owner's endpoints, a form to add
// one (its signing secret is shown once, with a copy button), enable,
// disable, rotate the secret, delete, and each endpoint's recent
// deliveries with a Redeliver button. Deliveries shown are read again
// every few seconds while the page is open.

import { $, h, setError, show } from "./dom.js";

const base = "/api/v1/webhooks";
const refreshEvery = 3000; // ms between reads of the open delivery lists
const deliveriesShown = 20;

export const eventTypes = [
  ["chat.created", "a chat is created"],
  ["chat.action_required", "a chat waits for a tool result or an approval"],
  ["chat.status_changed", "a chat's status changes"],
  ["chat.completed", "a run ends with the model's answer"],
  ["chat.failed", "a run stops with an error"],
  ["chat.title_changed", "a chat gets a new title"],
];

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

// plain turns an API error into words about webhooks.
function plain(err, doing) {
  const d = err.details || {};
  switch (err.code) {
    case "not_found":
      return `Could not ${doing}: it no longer exists (deleted in another tab?). Refresh the list.`;
    case "url_not_allowed":
      return `Could not ${doing}: this server does not send webhooks to private or local addresses ` +
        "(an admin can allow them with webhooks.allow_private). Use a public URL.";
    case "invalid_url":
      return `Could not ${doing}: the URL must be a full http:// or https:// address, like https://example.com/hook.`;
    case "too_many_webhooks":
      return `Could not ${doing}: you have the most endpoints allowed (${d.limit}). Delete one first.`;
    case "webhook_disabled":
      return `Could not ${doing}: the endpoint is disabled. Enable it first.`;
  }
  if (err.status === 0) return `Could not ${doing}: ${err.message}`;
  const field = err.details && err.details.field ? ` (${err.details.field})` : "";
  return `Could not ${doing}: ${err.message}${field}`;
}

// statusText says what happened to a delivery.
function statusText(d) {
  switch (d.status) {
    case "delivered":
      return `delivered ${when(d.delivered_at)}`;
    case "failed":
      return "failed, no more attempts";
    default:
      return d.next_attempt_at ? `pending, next attempt ${when(d.next_attempt_at)}` : "pending";
  }
}

export class Webhooks {
  constructor(api) {
    this.api = api;
    this.endpoints = new Map(); // id → endpoint
    this.open = new Set(); // ids whose deliveries are shown
    this.timer = 0;
    this.active = false;
    this.pendingDelete = null;
    this.dialog = $("#webhook-dialog");
    $("#webhook-events").replaceChildren(...eventTypes.map(([type, desc]) => h("label", { class: "check" },
      h("input", { type: "checkbox", name: "event", value: type }), " ", h("code", null, type), h("span", { class: "muted" }, ` — ${desc}`))));
    $("#webhook-new").addEventListener("click", () => this.openDialog());
    $("#webhook-cancel").addEventListener("click", () => this.dialog.close());
    $("#webhook-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.create();
    });
    $("#webhook-all").addEventListener("change", () => this.syncEvents());
    $("#webhook-secret-copy").addEventListener("click", () => this.copySecret());
    $("#webhook-secret-done").addEventListener("click", () => this.hideSecret());
    $("#webhooks-refresh").addEventListener("click", () => this.load());
    $("#webhook-confirm-dialog").addEventListener("close", () => {
      const id = this.pendingDelete;
      this.pendingDelete = null;
      if ($("#webhook-confirm-dialog").returnValue === "yes" && id) this.remove(id);
    });
  }

  // show starts (or stops) the page: reading the endpoints and keeping the
  // open delivery lists current.
  show(active) {
    this.active = active;
    show($("#webhooks-view"), active);
    clearInterval(this.timer);
    this.timer = 0;
    if (!active) {
      this.hideSecret();
      return;
    }
    this.load();
    this.timer = setInterval(() => this.refreshDeliveries(), refreshEvery);
  }

  error(message) {
    setError($("#webhooks-error"), message);
  }

  async load() {
    try {
      const res = await this.api.get(base);
      this.error("");
      this.endpoints = new Map((res.webhooks || []).map((w) => [w.id, w]));
      this.render();
    } catch (err) {
      this.error(plain(err, "read the endpoints"));
    }
  }

  render() {
    const list = $("#webhook-list");
    const items = [...this.endpoints.values()].map((w) => this.item(w));
    list.replaceChildren(...items);
    show($("#webhooks-empty"), items.length === 0);
    for (const id of this.open) {
      if (this.endpoints.has(id)) this.loadDeliveries(id);
      else this.open.delete(id);
    }
  }

  item(w) {
    const events = w.events.includes("*") ? "all events" : w.events.join(", ");
    // The server's reasons read "disabled by its owner", "disabled after 10
    // failed deliveries in a row", "the endpoint answered 410 Gone".
    const reason = w.disabled_reason || "";
    const state = !w.disabled ? "enabled" : reason.startsWith("disabled") ? reason : reason ? `disabled: ${reason}` : "disabled";
    const li = h("li", { class: "webhook", dataset: { webhookId: w.id, disabled: String(w.disabled) } },
      h("div", { class: "webhook-head" },
        h("code", { class: "webhook-url" }, w.url),
        h("span", { class: "webhook-state status-badge", dataset: { status: w.disabled ? "error" : "waiting" } }, state)),
      w.description ? h("p", { class: "webhook-desc" }, w.description) : null,
      h("p", { class: "muted webhook-events" }, `Sends ${events}.`),
      h("div", { class: "webhook-buttons" },
        h("button", { type: "button", class: "webhook-toggle", onclick: () => this.setDisabled(w.id, !w.disabled) },
          w.disabled ? "Enable" : "Disable"),
        h("button", { type: "button", class: "webhook-rotate", onclick: () => this.rotate(w.id) }, "Rotate secret"),
        h("button", { type: "button", class: "webhook-delete danger", onclick: () => this.confirmDelete(w) }, "Delete")),
      h("p", { class: "error webhook-error", role: "alert", hidden: true }));
    const details = h("details", { class: "deliveries", open: this.open.has(w.id) },
      h("summary", null, "Recent deliveries"),
      h("table", null,
        h("thead", null, h("tr", null, ["Event", "Chat", "Status", "Attempts", "Last HTTP status", ""].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", null)),
      h("p", { class: "muted deliveries-empty", hidden: true }, "Nothing sent yet."),
      h("button", { type: "button", class: "redeliver-failed", onclick: (e) => this.redeliverFailed(w.id, e.currentTarget) },
        "Redeliver what failed in the last 24 hours"));
    details.addEventListener("toggle", () => {
      if (details.open) {
        this.open.add(w.id);
        this.loadDeliveries(w.id);
      } else {
        this.open.delete(w.id);
      }
    });
    li.append(details);
    return li;
  }

  itemOf(id) {
    return $(`#webhook-list li[data-webhook-id="${CSS.escape(id)}"]`);
  }

  itemError(id, message) {
    const li = this.itemOf(id);
    if (li) setError($(".webhook-error", li), message);
    else this.error(message);
  }

  refreshDeliveries() {
    if (!this.active) return;
    for (const id of this.open) this.loadDeliveries(id);
  }

  async loadDeliveries(id) {
    let res;
    try {
      res = await this.api.get(`${base}/${encodeURIComponent(id)}/deliveries?limit=${deliveriesShown}`);
    } catch (err) {
      this.itemError(id, plain(err, "read the deliveries"));
      return;
    }
    const li = this.itemOf(id);
    if (!li) return;
    const rows = (res.deliveries || []).map((d) => h("tr", { class: "delivery", dataset: { deliveryId: d.id, status: d.status } },
      h("td", null, h("code", null, d.event_type)),
      h("td", null, d.chat_id ? h("a", { href: `#/chats/${encodeURIComponent(d.chat_id)}` }, d.chat_id) : ""),
      h("td", { class: "delivery-status", title: d.last_error || "" }, statusText(d),
        d.last_error ? h("span", { class: "delivery-error" }, ` (${d.last_error})`) : null),
      h("td", { class: "delivery-attempts" }, String(d.attempts)),
      h("td", { class: "delivery-code" }, d.last_status_code ? String(d.last_status_code) : "—"),
      h("td", null, h("button", { type: "button", class: "redeliver", onclick: (e) => this.redeliver(id, d.id, e.currentTarget) }, "Redeliver"))));
    $("tbody", li).replaceChildren(...rows);
    show($(".deliveries-empty", li), rows.length === 0);
  }

  syncEvents() {
    const all = $("#webhook-all").checked;
    for (const box of this.dialog.querySelectorAll('input[name="event"]')) box.disabled = all;
  }

  openDialog() {
    $("#webhook-form").reset();
    this.syncEvents();
    setError($("#webhook-form-error"), "");
    this.dialog.showModal();
    $("#webhook-url").focus();
  }

  async create() {
    const body = { url: $("#webhook-url").value.trim() };
    body.events = $("#webhook-all").checked ? ["*"]
      : [...this.dialog.querySelectorAll('input[name="event"]:checked')].map((b) => b.value);
    if (body.events.length === 0) {
      setError($("#webhook-form-error"), "Choose at least one event, or all of them.");
      return;
    }
    const desc = $("#webhook-description").value.trim();
    if (desc) body.description = desc;
    const button = $("#webhook-create");
    button.disabled = true;
    try {
      const w = await this.api.post(base, body);
      this.dialog.close();
      this.showSecret(w, "This is the new endpoint's signing secret.");
      await this.load();
    } catch (err) {
      setError($("#webhook-form-error"), plain(err, "add the endpoint"));
    } finally {
      button.disabled = false;
    }
  }

  showSecret(w, what) {
    $("#webhook-secret-what").textContent = `${what} It is shown only now: copy it into your receiver's configuration.`;
    $("#webhook-secret-url").textContent = w.url;
    $("#webhook-secret-value").value = w.secret;
    $("#webhook-secret-copy").textContent = "Copy";
    show($("#webhook-secret"), true);
    $("#webhook-secret-value").select();
  }

  hideSecret() {
    $("#webhook-secret-value").value = "";
    show($("#webhook-secret"), false);
  }

  async copySecret() {
    const input = $("#webhook-secret-value");
    const button = $("#webhook-secret-copy");
    try {
      await navigator.clipboard.writeText(input.value);
      button.textContent = "Copied";
    } catch {
      input.select();
      button.textContent = "Select and copy it by hand";
    }
  }

  async setDisabled(id, disabled) {
    try {
      const w = await this.api.patch(`${base}/${encodeURIComponent(id)}`, { disabled });
      this.endpoints.set(w.id, w);
      this.render();
    } catch (err) {
      this.itemError(id, plain(err, disabled ? "disable the endpoint" : "enable the endpoint"));
    }
  }

  async rotate(id) {
    try {
      const w = await this.api.post(`${base}/${encodeURIComponent(id)}/rotate-secret`);
      const until = w.previous_secret_expires_at ? ` The old secret also signs until ${when(w.previous_secret_expires_at)}.` : "";
      this.showSecret(w, `This is the endpoint's new signing secret.${until}`);
      this.endpoints.set(w.id, w);
      this.render();
    } catch (err) {
      this.itemError(id, plain(err, "rotate the secret"));
    }
  }

  confirmDelete(w) {
    this.pendingDelete = w.id;
    $("#webhook-confirm-text").textContent = `Delete the endpoint ${w.url}? Events not yet delivered to it are dropped.`;
    $("#webhook-confirm-dialog").returnValue = "";
    $("#webhook-confirm-dialog").showModal();
  }

  async remove(id) {
    try {
      await this.api.del(`${base}/${encodeURIComponent(id)}`);
    } catch (err) {
      if (err.status !== 404) {
        this.itemError(id, plain(err, "delete the endpoint"));
        return;
      }
    }
    this.endpoints.delete(id);
    this.open.delete(id);
    this.render();
  }

  async redeliver(id, deliveryID, button) {
    button.disabled = true;
    try {
      await this.api.post(`${base}/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(deliveryID)}/redeliver`);
      this.itemError(id, "");
      await this.loadDeliveries(id);
    } catch (err) {
      this.itemError(id, plain(err, "redeliver the event"));
    } finally {
      button.disabled = false;
    }
  }

  // redeliverFailed queues again, once each and in order, every event
  // whose delivery to the endpoint failed in the last 24 hours.
  async redeliverFailed(id, button) {
    button.disabled = true;
    try {
      const since = new Date(Date.now() - 24 * 3600 * 1000).toISOString();
      const res = await this.api.post(`${base}/${encodeURIComponent(id)}/redeliver-failed`, { since });
      this.itemError(id, "");
      button.textContent = `Queued ${res.redelivered} again`;
      await this.loadDeliveries(id);
    } catch (err) {
      this.itemError(id, plain(err, "redeliver what failed"));
    } finally {
      button.disabled = false;
    }
  }
}
