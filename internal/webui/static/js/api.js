// The public HTTP API, with the bearer token. Every call returns the
// decoded JSON or throws an APIError carrying the server's error body.

import { quotaMessage } from "./quota.js";

export class APIError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(quotaMessage(status, e) || e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || "";
    this.details = e.details || {};
  }
}

export class API {
  // onUnauthorized is called when the server refuses the token (401).
  constructor(token, onUnauthorized) {
    this.token = token;
    this.onUnauthorized = onUnauthorized || (() => {});
  }

  headers(extra) {
    return { Authorization: `Bearer ${this.token}`, ...extra };
  }

  async request(method, path, body) {
    const init = { method, headers: this.headers() };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (err) {
      throw new APIError(0, { error: { code: "network", message: `The server could not be reached (${err.message}).` } });
    }
    if (res.status === 204) return null;
    let data = null;
    const text = await res.text();
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = { error: { code: "bad_response", message: text.slice(0, 200) } };
      }
    }
    if (!res.ok) {
      const err = new APIError(res.status, data);
      if (res.status === 401) this.onUnauthorized(err);
      throw err;
    }
    return data;
  }

  get(path) { return this.request("GET", path); }
  post(path, body) { return this.request("POST", path, body ?? {}); }
  patch(path, body) { return this.request("PATCH", path, body); }
  put(path, body) { return this.request("PUT", path, body); }
  del(path) { return this.request("DELETE", path); }

  chatPath(id, rest = "") { return `/api/v1/chats/${encodeURIComponent(id)}${rest}`; }
}

// checkToken asks the server whether token is valid: the models route
// needs a token and changes nothing.
export async function checkToken(token) {
  const api = new API(token);
  await api.get("/api/v1/models");
  return api;
}
