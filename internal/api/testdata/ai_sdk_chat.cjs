// The Vercel AI SDK (npm "ai") against parley's UI message stream:
// AbstractChat (the class behind useChat) with DefaultChatTransport, and
// the SDK's own readers over raw streams. aisdk_node_test.go runs it once
// per case, with the fake model scripted for that case:
//
//   PARLEY_URL    parley's base URL
//   PARLEY_TOKEN  a parley token
//   GATE_URL      (resume, stop, reload_queued) POST here to let the held model turn finish
//   CASE          text | client_tool | server_tool | approvals | regenerate | resume | error |
//                 resume_new | stop | fork | reload_queued
//
// It exits non-zero with a message when an assertion fails, and prints a
// JSON object of what the Go side checks further.
'use strict';

const assert = require('node:assert/strict');
const {
  AbstractChat, DefaultChatTransport, readUIMessageStream, parseJsonEventStream, uiMessageChunkSchema,
  lastAssistantMessageIsCompleteWithToolCalls, lastAssistantMessageIsCompleteWithApprovalResponses,
} = require('ai');

const base = process.env.PARLEY_URL;
const headers = { Authorization: `Bearer ${process.env.PARLEY_TOKEN}` };
const api = `${base}/api/v1/ai-sdk/chat`;

// MemoryState is a ChatState kept in memory, as a UI framework would keep it.
class MemoryState {
  constructor(messages = []) { this.status = 'ready'; this.error = undefined; this.messages = messages; }
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot(x) { return structuredClone(x); }
}

class Chat extends AbstractChat {
  constructor(opts) { super({ ...opts, state: new MemoryState(opts.messages) }); }
}

function newChat(id, extra = {}) {
  const errors = [];
  const chat = new Chat({
    id,
    transport: new DefaultChatTransport({ api, headers, body: extra.body, fetch: extra.fetch }),
    onError: (e) => errors.push(e.message),
    ...extra.chat,
  });
  return { chat, errors };
}

// raw posts a body and checks every chunk with the SDK's schema, returning them.
async function raw(body) {
  const res = await fetch(api, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
  const [a, b] = res.body.tee();
  const chunks = [];
  const reader = parseJsonEventStream({ stream: a, schema: uiMessageChunkSchema }).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    assert.ok(value.success, `chunk fails the schema: ${JSON.stringify(value.rawValue)} ${value.error}`);
    chunks.push(value.value);
  }
  // The whole run through the SDK's reader, which throws on a bad order.
  const whole = parseJsonEventStream({ stream: b, schema: uiMessageChunkSchema }).pipeThrough(new TransformStream({
    transform(v, c) { c.enqueue(v.value); },
  }));
  let last;
  for await (const m of readUIMessageStream({ stream: whole, terminateOnError: true })) last = m;
  return { chunks, message: last };
}

const text = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
const tools = (m) => m.parts.filter((p) => p.type === 'dynamic-tool');

const cases = {
  async text() {
    const { chunks, message } = await raw({ id: 'c-text', trigger: 'submit-message', parley: { title: 't' },
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] });
    assert.deepEqual(chunks.map((c) => c.type).filter((t) => t !== 'text-delta'),
      ['start', 'start-step', 'text-start', 'text-end', 'finish-step', 'finish']);
    assert.equal(text(message), 'Hello from parley.');
    assert.equal(chunks.at(-1).finishReason, 'stop');
    const { chat, errors } = newChat('c-text');
    await chat.sendMessage({ text: 'again' });
    assert.deepEqual(errors, []);
    assert.equal(chat.status, 'ready');
    assert.equal(text(chat.lastMessage), 'Second answer.');
    const seeded = await (await fetch(`${api}/c-text/messages`, { headers })).json();
    assert.equal(seeded.length, 4);
    assert.equal(text(seeded[3]), 'Second answer.');
    return { message_id: chunks[0].messageId };
  },

  async client_tool() {
    const calls = [];
    let chat;
    ({ chat } = newChat('c-client', {
      body: { parley: { title: 't', dynamic_tools: [{ name: 'get_weather', description: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }] } },
      chat: {
        sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
        onToolCall: ({ toolCall }) => {
          calls.push(toolCall.toolCallId);
          chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: { sky: 'sunny' } });
        },
      },
    }));
    await chat.sendMessage({ text: 'weather in Paris?' });
    await waitReady(chat);
    assert.deepEqual(calls, ['call_w']);
    const m = chat.lastMessage;
    assert.equal(m.role, 'assistant');
    assert.equal(tools(m)[0].state, 'output-available');
    assert.equal(text(m), 'Sunny in Paris.');
    assert.equal(chat.messages.length, 2);
    return {};
  },

  async server_tool() {
    const { chat, errors } = newChat('c-server', { body: { parley: { title: 't' } } });
    await chat.sendMessage({ text: 'what time is it?' });
    assert.deepEqual(errors, []);
    const t = tools(chat.lastMessage);
    assert.equal(t.length, 1);
    assert.equal(t[0].state, 'output-available');
    assert.equal(t[0].toolName, 'clock');
    assert.equal(t[0].providerExecuted, true);
    assert.equal(text(chat.lastMessage), 'It is noon.');
    return {};
  },

  async approvals() {
    const out = {};
    for (const approved of [true, false]) {
      const { chat, errors } = newChat(`c-approve-${approved}`, {
        body: { parley: { title: 't', approve: ['add'] } },
        chat: { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses },
      });
      await chat.sendMessage({ text: 'add 1 and 2' });
      let part = tools(chat.lastMessage)[0];
      assert.equal(part.state, 'approval-requested');
      await chat.addToolApprovalResponse({ id: part.approval.id, approved, reason: approved ? undefined : 'no' });
      await waitReady(chat);
      assert.deepEqual(errors, []);
      part = tools(chat.lastMessage)[0];
      out[approved ? 'approved' : 'denied'] = part.state;
      out[approved ? 'approved_text' : 'denied_text'] = text(chat.lastMessage);
    }
    return out;
  },

  async regenerate() {
    const { chat, errors } = newChat('c-regen', { body: { parley: { title: 't' } } });
    await chat.sendMessage({ text: 'tell me' });
    assert.equal(text(chat.lastMessage), 'First.');
    await chat.regenerate();
    assert.deepEqual(errors, []);
    assert.equal(chat.messages.length, 2);
    assert.equal(text(chat.lastMessage), 'Second.');
    return {};
  },

  async resume() {
    // The first client starts a run the fake model holds mid-answer.
    const first = newChat('c-resume', { body: { parley: { title: 't' } } });
    const sent = first.chat.sendMessage({ text: 'slow one' });
    await until(() => first.chat.lastMessage?.role === 'assistant' && text(first.chat.lastMessage).length > 0);
    // A second client resumes the run; once its stream is open the model goes on.
    const second = newChat('c-resume', {
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        if (String(url).endsWith('/stream')) await fetch(process.env.GATE_URL, { method: 'POST' });
        return res;
      },
    });
    await second.chat.resumeStream();
    await sent;
    assert.deepEqual(second.errors, []);
    assert.equal(text(second.chat.lastMessage), 'A slow answer, in full.');
    assert.equal(text(first.chat.lastMessage), 'A slow answer, in full.');
    const none = await fetch(`${api}/c-resume/stream`, { headers });
    assert.equal(none.status, 204);
    return {};
  },

  async error() {
    const { chunks } = await raw({ id: 'c-error', trigger: 'submit-message', parley: { title: 't' },
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] }).catch((e) => ({ chunks: null, err: e }));
    assert.equal(chunks, null); // terminateOnError: the SDK's reader threw on the error chunk
    const { chat, errors } = newChat('c-error');
    await chat.sendMessage({ text: 'again' });
    assert.equal(errors.length, 1);
    const bad = await fetch(api, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'c-error', messages: [{ id: 'x', role: 'system', parts: [] }] }) });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.code, 'invalid_field');
    return { error: errors[0] };
  },
  // useChat({resume: true}) on a chat the app has not sent to yet: the
  // resume on mount finds nothing to resume, and the first send works.
  async resume_new() {
    const { chat, errors } = newChat('c-new', { body: { parley: { title: 't' } } });
    await chat.resumeStream();
    assert.deepEqual(errors, []);
    assert.equal(chat.status, 'ready');
    await chat.sendMessage({ text: 'hi' });
    assert.deepEqual(errors, []);
    assert.equal(chat.status, 'ready');
    assert.equal(text(chat.lastMessage), 'Hello, new chat.');
    return {};
  },

  // The docs' Stop button, as written there, stops a run the model holds.
  async stop() {
    const PARLEY = base;
    const token = process.env.PARLEY_TOKEN;
    const chatId = 'c-stop';
    const { chat, errors } = newChat(chatId, { body: { parley: { title: 't' } } });
    const sent = chat.sendMessage({ text: 'a long one' });
    await until(() => chat.lastMessage?.role === 'assistant' && text(chat.lastMessage).length > 0);
    const stop = () =>
      fetch(`${PARLEY}/api/v1/ai-sdk/chat/${chatId}/interrupt`, {
        method: 'POST', headers: { Authorization: `Bearer ${token}` },
      });
    const res = await stop();
    assert.equal(res.status, 200);
    await sent;
    assert.deepEqual(errors, []);
    assert.equal(chat.status, 'ready');
    const none = await fetch(`${api}/${chatId}/stream`, { headers });
    assert.equal(none.status, 204);
    return {};
  },

  // A fork of the app's chat leaves the app's conversation where it was.
  async fork() {
    const { chat, errors } = newChat('c-fork', { body: { parley: { title: 't' } } });
    await chat.sendMessage({ text: 'first' });
    const list = await (await fetch(`${base}/api/v1/chats?label=ai-sdk-chat:c-fork`, { headers })).json();
    assert.equal(list.chats.length, 1);
    const original = list.chats[0].id;
    const msgs = (await (await fetch(`${base}/api/v1/chats/${original}/messages`, { headers })).json()).messages;
    const res = await fetch(`${base}/api/v1/chats/${original}/fork`, {
      method: 'POST', headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ message_id: msgs.at(-1).id }),
    });
    assert.equal(res.status, 201);
    const fork = await res.json();
    await chat.sendMessage({ text: 'second' });
    assert.deepEqual(errors, []);
    assert.equal(text(chat.lastMessage), 'Second.');
    const seeded = await (await fetch(`${api}/c-fork/messages`, { headers })).json();
    assert.equal(seeded.length, 4);
    return { original, fork: fork.id };
  },

  // A page reloads while a message of its chat is queued behind a run:
  // seeded from the messages route and resuming, it shows the queued
  // message and then its answer.
  async reload_queued() {
    const first = newChat('c-queue', { body: { parley: { title: 't' } } });
    const sent = first.chat.sendMessage({ text: 'slow one' });
    await until(() => first.chat.lastMessage?.role === 'assistant' && text(first.chat.lastMessage).length > 0);
    // The page sends another message while the answer streams: parley queues it.
    const queuedPost = fetch(api, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'c-queue', trigger: 'submit-message',
        messages: [{ id: 'u2', role: 'user', parts: [{ type: 'text', text: 'queued one' }] }] }) });
    const id = (await (await fetch(`${base}/api/v1/chats?label=ai-sdk-chat:c-queue`, { headers })).json()).chats[0].id;
    await untilAsync(async () => (await (await fetch(`${base}/api/v1/chats/${id}/queued`, { headers })).json()).queued.length === 1);
    // The reload: seeded from the messages route, then resumed; the held
    // answer goes on once the resumed stream is open.
    const seeded = await (await fetch(`${api}/c-queue/messages`, { headers })).json();
    assert.deepEqual(seeded.map((m) => `${m.role}:${text(m)}`), ['user:slow one', 'user:queued one']);
    const reloaded = newChat('c-queue', {
      chat: { messages: seeded },
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        if (String(url).endsWith('/stream')) await fetch(process.env.GATE_URL, { method: 'POST' });
        return res;
      },
    });
    await reloaded.chat.resumeStream();
    assert.deepEqual(reloaded.errors, []);
    assert.deepEqual(reloaded.chat.messages.map((m) => `${m.role}:${text(m)}`),
      ['user:slow one', 'user:queued one', 'assistant:The queued answer.']);
    await sent;
    await (await queuedPost).text();
    // A later reload shows every message and answer.
    const all = await (await fetch(`${api}/c-queue/messages`, { headers })).json();
    assert.deepEqual(all.map((m) => `${m.role}:${text(m)}`),
      ['user:slow one', 'assistant:A slow answer, in full.', 'user:queued one', 'assistant:The queued answer.']);
    return {};
  },
};

// untilAsync is until for a condition that must be fetched.
async function untilAsync(cond) {
  const end = Date.now() + 10000;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function waitReady(chat) {
  await until(() => chat.status === 'ready' || chat.status === 'error');
}

// until waits for cond, checking it on every turn of the event loop that a
// stream's progress makes; it gives up after 10 s.
async function until(cond) {
  const end = Date.now() + 10000;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 5));
  }
}

cases[process.env.CASE]().then((out) => {
  process.stdout.write(JSON.stringify(out));
}, (err) => {
  console.error(err);
  process.exit(1);
});
