// A webhook receiver written as a user would write one, with the official
// npm "standardwebhooks" package, driving a real parley:
//
//  1. it listens on 127.0.0.1, and creates an endpoint for chat.completed
//     and chat.action_required pointing at itself;
//  2. it creates a chat with a message and waits for its chat.completed;
//  3. it creates a chat with a dynamic tool and waits for its
//     chat.action_required;
//  4. it rotates the secret, answers the tool call, and waits for that
//     chat's chat.completed, which both the old and the new secret verify.
//
// Every request is verified with Webhook.verify over the raw body; the same
// request with one byte of the body changed must be refused. It prints one
// JSON object: the events it accepted (deduplicated on webhook-id), how
// many requests it got, and what went wrong (nothing, when all is well).
// PARLEY_URL and PARLEY_TOKEN name the server.

const http = require("node:http");
const { Webhook } = require("standardwebhooks");

const base = process.env.PARLEY_URL;
const token = process.env.PARLEY_TOKEN;
const waitMs = 20000;

const out = { events: [], requests: 0, duplicates: 0, problems: [] };
const seen = new Map(); // webhook-id → the event accepted
let verifiers = []; // [name, Webhook]: each must verify every request
let wakeUp = () => {};

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

function receive(req, res) {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    out.requests++;
    const body = Buffer.concat(chunks);
    const id = req.headers["webhook-id"];
    let event;
    for (const [name, wh] of verifiers) {
      try {
        event = wh.verify(body, req.headers);
      } catch (err) {
        out.problems.push(`${id}: the ${name} secret did not verify: ${err.message}`);
        res.writeHead(400).end();
        return;
      }
      const tampered = Buffer.from(body);
      tampered[tampered.length - 2] ^= 1;
      try {
        wh.verify(tampered, req.headers);
        out.problems.push(`${id}: a changed body verified with the ${name} secret`);
      } catch {
        // refused, as it must be
      }
    }
    if (seen.has(id)) {
      out.duplicates++;
    } else {
      const e = { webhook_id: id, type: event.type, timestamp: event.timestamp, data: event.data,
        signatures: req.headers["webhook-signature"].split(" ").length, verified_with: verifiers.map(([n]) => n) };
      seen.set(id, e);
      out.events.push(e);
    }
    res.writeHead(204).end();
    wakeUp();
  });
}

// waitFor resolves with the first accepted event that matches, or rejects
// after waitMs.
function waitFor(what, match) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${what} within ${waitMs} ms`)), waitMs);
    const check = () => {
      const e = out.events.find(match);
      if (e) {
        clearTimeout(timer);
        wakeUp = () => {};
        resolve(e);
      }
    };
    wakeUp = check;
    check();
  });
}

async function main() {
  const server = http.createServer(receive);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}/hook`;
  try {
    const ep = await api("POST", "/api/v1/webhooks", { url, events: ["chat.completed", "chat.action_required"], description: "node" });
    out.endpoint_id = ep.id;
    verifiers = [["first", new Webhook(ep.secret)]];

    const a = await api("POST", "/api/v1/chats", { title: "node completed", message: "Say hello." });
    out.completed_chat = a.id;
    await waitFor("chat.completed", (e) => e.type === "chat.completed" && e.data.id === a.id);

    const b = await api("POST", "/api/v1/chats", {
      title: "node action", message: "Look it up.",
      dynamic_tools: [{ name: "lookup", description: "Look something up",
        input_schema: { type: "object", properties: { q: { type: "string" } } } }],
    });
    out.action_chat = b.id;
    const act = await waitFor("chat.action_required", (e) => e.type === "chat.action_required" && e.data.id === b.id);

    const rotated = await api("POST", `/api/v1/webhooks/${ep.id}/rotate-secret`);
    out.previous_secret_expires_at = rotated.previous_secret_expires_at;
    verifiers = [["first", verifiers[0][1]], ["rotated", new Webhook(rotated.secret)]];
    const call = act.data.required_action.tool_calls[0];
    await api("POST", `/api/v1/chats/${b.id}/tool-results`, { results: [{ tool_call_id: call.tool_call_id, output: "found" }] });
    await waitFor("chat.completed after the rotation", (e) => e.type === "chat.completed" && e.data.id === b.id);
  } catch (err) {
    out.problems.push(String(err && err.stack || err));
  }
  server.close();
  process.stdout.write(JSON.stringify(out));
}

main();
