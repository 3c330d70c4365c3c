// The official openai Node client against parley's OpenAI-compatible facade.
// node_test.go runs it (through internal/testutil/nodetest, which finds the
// package with NODE_PATH, hence CommonJS) once per case, with the fake
// model scripted for that case:
//
//   PARLEY_URL    the facade's base URL (…/v1)
//   PARLEY_TOKEN  a parley token
//   CASE          text | tools | stream | server_tool | errors | image (Chat Completions)
//                 resp_text | resp_tools | resp_stream | resp_errors | resp_files (Responses)
//                 structured (both)
//   PARLEY_PNG    the image and file cases: a PNG, and
//   PARLEY_PDF    a PDF, in base64
//
// It exits non-zero with a message when an assertion fails, and prints a
// JSON object of what the Go side checks further.
'use strict';

const assert = require('node:assert/strict');
const { OpenAI, AuthenticationError, NotFoundError, BadRequestError } = require('openai');

const baseURL = process.env.PARLEY_URL;
const apiKey = process.env.PARLEY_TOKEN;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });

const weather = (strict) => ({
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'the weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' } },
      required: ['city'],
      additionalProperties: false,
    },
    ...(strict ? { strict: true } : {}),
  },
});

// onlyChoice checks the shape of a non-streamed completion and returns its choice.
function onlyChoice(res) {
  assert.equal(res.object, 'chat.completion');
  assert.match(res.id, /^chatcmpl-/);
  assert.equal(res.model, 'fake');
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0].index, 0);
  assert.equal(res.choices[0].message.role, 'assistant');
  return res.choices[0];
}

// streamed runs the SDK's stream helper over params and returns the final
// completion, checking the helper's events: exactly one finish_reason, the
// content deltas adding up to the content, one done event per tool call.
async function streamed(params) {
  const stream = client.chat.completions.stream(params);
  let finishes = 0;
  let content = '';
  const argsDone = [];
  const toolDeltas = [];
  stream.on('chunk', (chunk) => {
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const c of chunk.choices) {
      if (c.finish_reason) finishes++;
      for (const tc of c.delta?.tool_calls ?? []) toolDeltas.push(tc);
    }
  });
  stream.on('content.delta', ({ delta }) => { content += delta; });
  stream.on('tool_calls.function.arguments.done', (ev) => argsDone.push(ev));
  const final = await stream.finalChatCompletion();
  assert.equal(finishes, 1, `${finishes} chunks with a finish_reason`);
  assert.equal(final.choices.length, 1);
  const msg = final.choices[0].message;
  assert.equal(content, msg.content ?? '', 'content deltas do not add up to the final content');
  assert.equal(argsDone.length, (msg.tool_calls ?? []).length, 'tool call done events');
  return { final, argsDone, toolDeltas };
}


// respWeather is the client function in the Responses shape.
const respWeather = {
  type: 'function',
  name: 'get_weather',
  description: 'the weather in a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

// textOf joins the output_text parts of a response's message items.
function textOf(res) {
  return res.output.filter((it) => it.type === 'message')
    .flatMap((it) => it.content).filter((c) => c.type === 'output_text').map((c) => c.text).join('');
}

// checkResponse checks the shape of a finished response object.
function checkResponse(res) {
  assert.equal(res.object, 'response');
  assert.match(res.id, /^resp_/);
  assert.equal(res.status, 'completed');
  assert.equal(res.model, 'fake');
  for (const it of res.output) {
    assert.ok(['message', 'function_call'].includes(it.type), JSON.stringify(it));
    assert.equal(it.status, 'completed');
    assert.ok(it.id, JSON.stringify(it));
    if (it.type === 'message') assert.equal(it.role, 'assistant');
  }
  return res;
}

// respStreamed runs the SDK's Responses stream helper over params and
// returns the final response, checking the events: one response.created
// first, one response.completed, sequence numbers from 0 up by one, the
// text deltas adding up to the final text.
async function respStreamed(params) {
  const stream = client.responses.stream(params);
  const types = [];
  let text = '';
  let argDeltas = 0;
  stream.on('event', (ev) => {
    assert.equal(ev.sequence_number, types.length, `event ${types.length}: ${JSON.stringify(ev)}`);
    types.push(ev.type);
  });
  stream.on('response.output_text.delta', (ev) => { text += ev.delta; });
  stream.on('response.function_call_arguments.delta', () => { argDeltas++; });
  const final = checkResponse(await stream.finalResponse());
  assert.equal(types[0], 'response.created');
  assert.equal(types.filter((t) => t === 'response.created').length, 1);
  assert.equal(types.filter((t) => t === 'response.completed').length, 1);
  assert.equal(types[types.length - 1], 'response.completed');
  assert.equal(text, textOf(final), 'text deltas do not add up to the final text');
  return { final, types, argDeltas };
}

const cases = {
  async text() {
    const models = await client.models.list();
    assert.ok(models.data.some((m) => m.id === 'fake' && m.object === 'model'), JSON.stringify(models.data));

    const res = await client.chat.completions.create({
      model: 'fake',
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello' }],
    });
    const choice = onlyChoice(res);
    assert.equal(choice.finish_reason, 'stop');
    assert.equal(choice.message.content, 'Hello from the fake.');
    assert.ok(!choice.message.tool_calls?.length);
    assert.deepEqual(
      [res.usage.prompt_tokens, res.usage.completion_tokens, res.usage.total_tokens], [10, 4, 14]);
    return { id: res.id };
  },

  async tools() {
    const messages = [{ role: 'user', content: 'Weather in Paris?' }];
    const res = await client.chat.completions.create({ model: 'fake', messages, tools: [weather(false)] });
    const choice = onlyChoice(res);
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });

    messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: '{"sky":"sunny"}' });
    const res2 = await client.chat.completions.create({ model: 'fake', messages, tools: [weather(false)] });
    const choice2 = onlyChoice(res2);
    assert.equal(choice2.finish_reason, 'stop');
    assert.equal(choice2.message.content, 'Sunny in Paris.');
    assert.ok(!choice2.message.tool_calls?.length);
    return { call_id: call.id, first: res.id, second: res2.id };
  },

  async stream() {
    const messages = [{ role: 'user', content: 'Weather in Rome?' }];
    const params = { model: 'fake', messages, tools: [weather(true)], stream_options: { include_usage: true } };
    const { final, argsDone, toolDeltas } = await streamed(params);
    const choice = final.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, 'Let me check.');
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.equal(call.function.arguments, '{"city":"Rome"}');
    assert.equal(argsDone[0].name, 'get_weather');
    assert.equal(argsDone[0].index, 0);
    assert.equal(argsDone[0].arguments, '{"city":"Rome"}');
    assert.deepEqual(argsDone[0].parsed_arguments, { city: 'Rome' }); // strict: the helper parses them
    assert.ok(toolDeltas.length > 1, 'the arguments came in one delta: the test checks nothing of their accumulation');
    assert.deepEqual(toolDeltas.filter((d) => d.id).map((d) => [d.index, d.id, d.type, d.function?.name]),
      [[0, call.id, 'function', 'get_weather']]);
    assert.equal(final.usage?.total_tokens, 14, JSON.stringify(final.usage));

    messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: 'rain' });
    const second = await streamed({ model: 'fake', messages, tools: [weather(true)] });
    assert.equal(second.final.choices[0].finish_reason, 'stop');
    assert.equal(second.final.choices[0].message.content, 'Rainy in Rome.');
    assert.ok(!second.final.choices[0].message.tool_calls?.length);
    return { call_id: call.id };
  },

  async server_tool() {
    const messages = [{ role: 'user', content: 'What is the answer?' }];
    const res = await client.chat.completions.create({ model: 'fake', messages, tools: [weather(false)] });
    const choice = onlyChoice(res);
    assert.equal(choice.finish_reason, 'stop');
    assert.equal(choice.message.content, 'The answer is 42.');
    assert.ok(!choice.message.tool_calls?.length, JSON.stringify(choice.message));

    const { final, toolDeltas } = await streamed({ model: 'fake', messages, tools: [weather(false)] });
    assert.deepEqual(toolDeltas, [], 'a server-side call reached the stream');
    assert.equal(final.choices[0].finish_reason, 'stop');
    assert.equal(final.choices[0].message.content, 'Still 42.');
    assert.ok(!final.choices[0].message.tool_calls?.length);
    return {};
  },

  async errors() {
    const bad = new OpenAI({ baseURL, apiKey: 'not-a-parley-token', maxRetries: 0 });
    const body = { model: 'fake', messages: [{ role: 'user', content: 'hi' }] };
    await assert.rejects(bad.chat.completions.create(body), (e) => {
      assert.ok(e instanceof AuthenticationError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 401);
      assert.equal(e.type, 'authentication_error');
      assert.equal(e.code, 'invalid_api_key');
      return true;
    });
    await assert.rejects(bad.chat.completions.stream(body).finalChatCompletion(), (e) => {
      assert.ok(e instanceof AuthenticationError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 401);
      return true;
    });
    await assert.rejects(client.chat.completions.create({ ...body, model: 'no-such-model' }), (e) => {
      assert.ok(e instanceof NotFoundError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 404);
      assert.equal(e.code, 'model_not_found');
      assert.equal(e.param, 'model');
      return true;
    });
    await assert.rejects(client.chat.completions.create({ ...body, model: 'no-such-model', stream: true }), (e) => {
      assert.ok(e instanceof NotFoundError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 404);
      return true;
    });
    return {};
  },

  async resp_text() {
    const res = checkResponse(await client.responses.create({ model: 'fake', instructions: 'Be brief.', input: 'Say hello' }));
    assert.equal(res.output_text, 'Hello from the fake.');
    assert.equal(res.output.length, 1);
    assert.deepEqual([res.usage.input_tokens, res.usage.output_tokens, res.usage.total_tokens], [10, 4, 14]);
    const res2 = checkResponse(await client.responses.create({
      model: 'fake', previous_response_id: res.id, input: [{ role: 'user', content: 'Now bye' }],
    }));
    assert.equal(res2.output_text, 'Bye.');
    assert.notEqual(res2.id, res.id);
    return { id: res.id };
  },

  async resp_tools() {
    const res = checkResponse(await client.responses.create({ model: 'fake', input: 'Weather in Paris?', tools: [respWeather] }));
    assert.equal(res.output.length, 1);
    const call = res.output[0];
    assert.equal(call.type, 'function_call');
    assert.equal(call.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' });
    const res2 = checkResponse(await client.responses.create({
      model: 'fake', previous_response_id: res.id, tools: [respWeather],
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"sky":"sunny"}' }],
    }));
    assert.equal(res2.output_text, 'Sunny in Paris.');
    assert.ok(!res2.output.some((it) => it.type === 'function_call'));
    return { call_id: call.call_id };
  },

  async resp_stream() {
    const { final, types, argDeltas } = await respStreamed({ model: 'fake', input: 'Weather in Rome?', tools: [respWeather] });
    assert.equal(textOf(final), 'Let me check.');
    assert.deepEqual(final.output.map((it) => it.type), ['message', 'function_call']);
    const call = final.output[1];
    assert.equal(call.name, 'get_weather');
    assert.equal(call.arguments, '{"city":"Rome"}');
    assert.ok(argDeltas > 1, 'the arguments came in one delta: the test checks nothing of their accumulation');
    assert.ok(types.indexOf('response.output_item.added') < types.indexOf('response.output_text.delta'));
    assert.equal(types.filter((t) => t === 'response.function_call_arguments.done').length, 1);
    assert.equal(final.usage?.total_tokens, 14, JSON.stringify(final.usage));

    const second = await respStreamed({
      model: 'fake', previous_response_id: final.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: 'rain' }],
    });
    assert.equal(textOf(second.final), 'Rainy in Rome.');
    assert.deepEqual(second.final.output.map((it) => it.type), ['message']);
    return { call_id: call.call_id };
  },

  async resp_errors() {
    const bad = new OpenAI({ baseURL, apiKey: 'not-a-parley-token', maxRetries: 0 });
    await assert.rejects(bad.responses.create({ model: 'fake', input: 'hi' }), (e) => {
      assert.ok(e instanceof AuthenticationError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 401);
      return true;
    });
    await assert.rejects(client.responses.create({ model: 'fake', input: 'hi', previous_response_id: 'resp_nothing_1' }), (e) => {
      assert.ok(e instanceof NotFoundError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.param, 'previous_response_id');
      return true;
    });
    const res = await client.responses.create({ model: 'fake', input: 'Weather in Oslo?', tools: [respWeather] });
    assert.equal(res.output[0].type, 'function_call');
    await assert.rejects(client.responses.create({
      model: 'fake', previous_response_id: res.id,
      input: [{ type: 'function_call_output', call_id: 'call_zz', output: '1' }],
    }), (e) => {
      assert.ok(e instanceof BadRequestError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 400);
      assert.match(e.message, /call_zz/);
      assert.match(e.message, new RegExp(res.output[0].call_id));
      return true;
    });
    await assert.rejects(client.responses.stream({ model: 'fake', input: 'hi', previous_response_id: 'resp_nothing_1' }).finalResponse(), (e) => {
      assert.ok(e instanceof NotFoundError, `${e.constructor.name}: ${e.message}`);
      return true;
    });
    return {};
  },

  // image sends an image as a data URL part, then one whose data is not an
  // image, which parley refuses with a 400 naming the part.
  image: async () => {
    const res = await client.chat.completions.create({
      model: 'fake',
      messages: [{ role: 'user', content: [
        { type: 'text', text: 'What is in this picture?' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${process.env.PARLEY_PNG}` } },
      ] }],
    });
    const text = onlyChoice(res).message.content;
    await assert.rejects(client.chat.completions.create({
      model: 'fake',
      messages: [{ role: 'user', content: [
        { type: 'image_url', image_url: { url: `data:image/png;base64,${Buffer.from('not a png').toString('base64')}` } },
      ] }],
    }), (e) => {
      assert.ok(e instanceof BadRequestError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.param, 'messages[0].content[0].image_url.url');
      return true;
    });
    return { text };
  },

  // resp_files sends an input_image and an input_file (a PDF).
  resp_files: async () => {
    const res = await client.responses.create({
      model: 'fake',
      input: [{ role: 'user', content: [
        { type: 'input_text', text: 'Compare these.' },
        { type: 'input_image', image_url: `data:image/png;base64,${process.env.PARLEY_PNG}`, detail: 'auto' },
        { type: 'input_file', filename: 'report.pdf', file_data: `data:application/pdf;base64,${process.env.PARLEY_PDF}` },
      ] }],
    });
    assert.equal(res.status, 'completed');
    return { text: res.output_text };
  },

  // structured asks both APIs for JSON against a schema through the
  // client's parse helpers (response_format, text.format), which read the
  // answer's text as JSON; the model answers prose first each time.
  structured: async () => {
    const schema = {
      type: 'object',
      properties: { name: { type: 'string' }, age: { type: 'integer' } },
      required: ['name', 'age'],
      additionalProperties: false,
    };
    const completion = await client.chat.completions.parse({
      model: 'fake',
      messages: [{ role: 'user', content: 'Who wrote the first program?' }],
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    const parsed = onlyChoice(completion).message.parsed;
    assert.deepEqual(parsed, { name: 'Ada', age: 36 });
    const res = await client.responses.parse({
      model: 'fake',
      input: 'Who wrote the first program?',
      text: { format: { type: 'json_schema', name: 'person', schema, strict: true } },
    });
    assert.equal(res.status, 'completed');
    assert.deepEqual(res.output_parsed, { name: 'Ada', age: 36 });
    assert.equal(res.text.format.type, 'json_schema');
    return { completion: onlyChoice(completion).message.content, response: res.output_text };
  },
};

(async () => {
  const run = cases[process.env.CASE];
  if (!run) throw new Error(`unknown CASE ${JSON.stringify(process.env.CASE)}`);
  const out = await run();
  process.stdout.write(JSON.stringify(out) + '\n');
})().catch((e) => {
  console.error(`case ${process.env.CASE} failed:`, e);
  process.exit(1);
});
