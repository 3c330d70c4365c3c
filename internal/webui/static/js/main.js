// The web UI's entry point: sign-in, the theme, and the hash routes
// "#/" (the chat list), "#/chats/<id>" (a conversation), "#/webhooks"
// (the owner's webhook endpoints), "#/agents[/<name>[/edit]]" and the
// other pages.

import { API, APIError, checkToken } from "./api.js";
import { $, setError, show } from "./dom.js";
import { ChatList } from "./chatlist.js";
import { Conversation } from "./conversation.js";
import { NewChatDialog } from "./newchat.js";
import { Webhooks } from "./webhooks.js";
import { listKeys } from "./keys.js";
import { SourcesView } from "./sources.js";
import { TokensView } from "./tokens.js";
import { UsageView, UsageWatch } from "./usage.js";
import { AgentsView } from "./agents.js";

const tokenKey = "parley.token";
const themeKey = "parley.theme";
const reasonKey = "parley.signed-out"; // why the last sign-out happened, shown once

// tokenFromInput is the token of what a person pasted into the sign-in
// form: a bare token, or a sign-in link ("http://host/#token=prl_…").
function tokenFromInput(text) {
  const m = /#token=([^&\s]+)/.exec(text);
  return m ? decodeURIComponent(m[1]) : text;
}

// takeTokenFromURL moves a token given in the URL fragment ("#token=…", the
// sign-in link parley serve prints) into storage and removes it from the
// address bar at once, so it does not stay on screen or in this page's
// history entry. The fragment is never sent to the server. It runs once, as
// the page loads: a link inside the page (one a model wrote, say) cannot
// swap the token. A link with another token than the one stored asks first.
function takeTokenFromURL() {
  const m = /^#token=([^&]+)/.exec(location.hash);
  if (!m) return;
  history.replaceState(null, "", location.pathname + location.search + "#/");
  const token = decodeURIComponent(m[1]);
  const stored = localStorage.getItem(tokenKey);
  if (stored && stored !== token && !confirm("This link signs in with another token than the one in use here. Switch to it?")) return;
  localStorage.setItem(tokenKey, token);
}

function applyTheme() {
  const saved = localStorage.getItem(themeKey);
  const dark = saved ? saved === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.dataset.theme = dark ? "dark" : "light";
  $("#theme").setAttribute("aria-label", dark ? "Switch to light theme" : "Switch to dark theme");
  $("#theme").title = $("#theme").getAttribute("aria-label");
}

function setupTheme() {
  applyTheme();
  $("#theme").addEventListener("click", () => {
    const dark = document.documentElement.dataset.theme === "dark";
    localStorage.setItem(themeKey, dark ? "light" : "dark");
    applyTheme();
  });
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", applyTheme);
}

let session = null; // {api, list, conversation, newChat, pages} once signed in

function showLogin(message) {
  document.body.dataset.signedIn = "false";
  show($("#app"), false);
  show($("#sign-out"), false);
  show($("#toggle-sidebar"), false);
  show($("#login-view"), true);
  setError($("#login-error"), message);
  $("#login-token").value = "";
  $("#login-token").focus();
}

// signOut forgets the token and starts the page afresh, so nothing of the
// session (streams, listeners, chats in memory) outlives it.
function signOut(message) {
  localStorage.removeItem(tokenKey);
  if (message) sessionStorage.setItem(reasonKey, message);
  location.replace(location.pathname + "#/");
  location.reload();
}

// start builds the signed-in page once; a sign-out reloads the page.
function start(token) {
  if (session) return;
  const refused = () => signOut("The server refused the token (it may have been revoked). Sign in again.");
  const api = new API(token, refused);
  const watch = new UsageWatch(api);
  const conversation = new Conversation(api, {
    onChat: (c) => {
      if (!session) return;
      session.list.upsert(c);
      // A run that ended has used what it used: the warning is read again.
      if (c.status === "waiting" || c.status === "error") watch.soon();
    },
    onGone: () => { location.hash = "#/"; },
    onOpen: (id) => { location.hash = `#/chats/${id}`; },
    onUnauthorized: refused,
  });
  const list = new ChatList(api, {
    onDeleted: (id) => { if (conversation.id === id) conversation.gone("This chat was deleted."); },
    onUnauthorized: refused,
  });
  const newChat = new NewChatDialog(api, {
    onCreated: (c) => {
      list.upsert(c);
      // What the server noted about the request (a tool glob that matches
      // nothing, say) is shown in the new chat.
      if (c.warnings && c.warnings.length) conversation.noteOnOpen(c.id, `Note: ${c.warnings.join("; ")}`);
      location.hash = `#/chats/${c.id}`;
    },
  });
  const webhooks = new Webhooks(api);
  // The views besides the conversation, by their route "#/<name>".
  const pages = { usage: new UsageView(api, watch), sources: new SourcesView(api), tokens: new TokensView(api, token),
    agents: new AgentsView(api, { onNewChat: (name) => newChat.open({ agent: name }) }) };
  session = { api, list, conversation, newChat, webhooks, pages, watch };
  showOwner(api, pages.usage, watch);
  document.body.dataset.signedIn = "true";
  show($("#login-view"), false);
  show($("#app"), true);
  show($("#sign-out"), true);
  show($("#toggle-sidebar"), true);
  show($("#webhooks-link"), true);
  show($("#page-nav"), true);
  list.start();
  route();
}

// showOwner says whose token this is, offers the admin's views to the
// admin (the server refuses them to anyone else in any case), and warns
// of a limit near.
async function showOwner(api, usageView, watch) {
  try {
    const u = await api.get("/api/v1/usage");
    $("#whoami").textContent = u.owner;
    show($("#nav-tokens"), u.owner === "admin");
    usageView.setOwner(u.owner);
  } catch (err) {
    console.warn("could not read the owner:", err);
  }
  watch.check();
}

function route() {
  if (!session) return;
  // "#/<page>", or "#/<page>/<rest>" for a page with views of its own.
  const p = /^#\/([a-z]+)(?:\/(.+))?$/.exec(location.hash);
  const page = p && Object.hasOwn(session.pages, p[1]) && p[1] !== "chats" ? p[1] : null;
  for (const [name, view] of Object.entries(session.pages)) {
    show($(`#${name}-view`), name === page);
    if (name === page) view.show(p[2] || "");
    else view.hide();
  }
  const m = /^#\/chats\/([^/?#]+)/.exec(location.hash);
  const id = m ? decodeURIComponent(m[1]) : null;
  const hooks = !id && !page && /^#\/webhooks\b/.test(location.hash);
  document.body.dataset.view = page ? "page" : id ? "chat" : hooks ? "webhooks" : "list";
  show($("#empty-view"), !id && !page && !hooks);
  session.webhooks.show(hooks);
  if (id) session.conversation.open(id);
  else session.conversation.close();
  session.list.markCurrent(id);
}

async function signIn(token) {
  try {
    await checkToken(token);
  } catch (err) {
    if (err instanceof APIError && err.status === 401) {
      showLogin("That token was refused.");
      return;
    }
    showLogin(`Could not check the token: ${err.message}`);
    return;
  }
  localStorage.setItem(tokenKey, token);
  start(token);
}

function main() {
  takeTokenFromURL();
  setupTheme();
  $("#login").addEventListener("submit", (e) => {
    e.preventDefault();
    const token = tokenFromInput($("#login-token").value.trim());
    if (token) signIn(token);
  });
  $("#sign-out").addEventListener("click", () => signOut(""));
  listKeys($("#chat-list"));
  $("#toggle-sidebar").addEventListener("click", () => {
    const open = document.body.dataset.sidebar !== "open";
    document.body.dataset.sidebar = open ? "open" : "closed";
    $("#toggle-sidebar").setAttribute("aria-expanded", String(open));
  });
  addEventListener("hashchange", () => {
    document.body.dataset.sidebar = "closed";
    $("#toggle-sidebar").setAttribute("aria-expanded", "false");
    route();
  });
  const reason = sessionStorage.getItem(reasonKey) || "";
  sessionStorage.removeItem(reasonKey);
  const token = localStorage.getItem(tokenKey);
  if (token) signIn(token);
  else showLogin(reason);
}

main();
