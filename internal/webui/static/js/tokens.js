// The Tokens view (#/tokens, the admin only): every owner's API tokens,
// a form that creates one (shown once, with a copy button and a sign-in
// link), and revocation after a confirmation. It uses GET/POST
// /api/v1/tokens and DELETE /api/v1/tokens/{id}.

import { $, h, setError, show } from "./dom.js";

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

// signInLink is the address that signs this UI in with token.
export function signInLink(token) {
  return `${location.origin}${location.pathname}#token=${encodeURIComponent(token)}`;
}

// copy puts text on the clipboard: the Clipboard API where the page may
// use it (a secure context), else the selected field's text.
async function copy(text, field) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  field.select();
  if (!document.execCommand("copy")) throw new Error("the browser refused to copy");
}

export class TokensView {
  // ownToken is the token this page is signed in with: revoking it signs
  // the page out, which the confirmation says.
  constructor(api, ownToken) {
    this.api = api;
    this.ownID = (/^prl_([^_]+)_/.exec(ownToken) || [])[1] || "";
    this.pending = null; // the token the revoke dialog asks about
    $("#token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.create();
    });
    for (const [button, field] of [["#token-copy", "#token-secret"], ["#token-copy-link", "#token-link"]]) {
      $(button).addEventListener("click", async () => {
        try {
          await copy($(field).value, $(field));
          $("#token-copied").textContent = "Copied.";
        } catch (err) {
          $("#token-copied").textContent = `Not copied (${err.message}): select the text and copy it.`;
        }
      });
    }
    $("#revoke-dialog").addEventListener("close", () => {
      const tok = this.pending;
      this.pending = null;
      if ($("#revoke-dialog").returnValue === "yes" && tok) this.revoke(tok);
    });
  }

  show() {
    this.load();
  }

  hide() {
    // The secret is shown only until the person leaves the view.
    $("#token-secret").value = "";
    $("#token-link").value = "";
    show($("#token-new"), false);
  }

  async load() {
    try {
      const res = await this.api.get("/api/v1/tokens");
      setError($("#tokens-error"), "");
      this.render(res.tokens || []);
    } catch (err) {
      setError($("#tokens-error"), `Could not read the tokens: ${err.message}`);
    }
  }

  render(tokens) {
    $("#tokens-body").replaceChildren(...tokens.map((t) =>
      h("tr", { dataset: { tokenId: t.id, revoked: t.revoked_at ? "true" : "false" } },
        h("td", { class: "token-owner" }, t.owner),
        h("td", { class: "token-name" }, t.name || ""),
        h("td", null, h("code", null, t.id), t.id === this.ownID ? h("span", { class: "muted" }, " (this browser)") : null),
        h("td", null, when(t.created_at)),
        h("td", { class: "token-revoked" }, t.revoked_at ? when(t.revoked_at) : "—"),
        h("td", null, t.revoked_at ? null
          : h("button", { type: "button", class: "danger revoke", "aria-label": `Revoke ${t.owner}'s token ${t.name || t.id}`,
            onclick: () => this.confirmRevoke(t) }, "Revoke")))));
    show($("#tokens-empty"), tokens.length === 0);
  }

  async create() {
    const owner = $("#token-owner").value.trim();
    const name = $("#token-name").value.trim();
    setError($("#token-form-error"), "");
    $("#token-create").disabled = true;
    try {
      const t = await this.api.post("/api/v1/tokens", { owner, name });
      $("#token-new-owner").textContent = t.owner;
      $("#token-secret").value = t.token;
      $("#token-link").value = signInLink(t.token);
      $("#token-copied").textContent = "";
      show($("#token-new"), true);
      $("#token-form").reset();
      await this.load();
    } catch (err) {
      setError($("#token-form-error"), err.message);
    } finally {
      $("#token-create").disabled = false;
    }
  }

  confirmRevoke(t) {
    this.pending = t;
    const own = t.id === this.ownID ? " This browser is signed in with it: you will be signed out." : "";
    $("#revoke-text").textContent = `Revoke ${t.owner}'s token ${t.name ? `"${t.name}" ` : ""}(${t.id})? ` +
      `Requests with it are refused from now on, and its open streams end.${own}`;
    $("#revoke-dialog").returnValue = "";
    $("#revoke-dialog").showModal();
  }

  async revoke(t) {
    try {
      await this.api.del(`/api/v1/tokens/${encodeURIComponent(t.id)}`);
      setError($("#tokens-error"), "");
    } catch (err) {
      setError($("#tokens-error"), `Could not revoke ${t.id}: ${err.message}`);
    }
    await this.load();
  }
}
