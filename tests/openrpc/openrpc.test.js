// rpc.discover, checked by validators we did not write: the document against the OpenRPC
// meta-schema (@open-rpc/schema-utils-js), every documented example's params against its
// method (MethodCallValidator), and every method called with its example on a running
// gateway, its answer checked against the documented result schema (ajv).
//
// Examples name a board "demo" and the token "demo-token"; a session id stands for one
// that session.create answered and a key for one that session.subscribe answered. The
// test puts the real ones in their place (fixture.sql made the board, the user, a view).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import schemaUtils from '@open-rpc/schema-utils-js';
import Ajv from 'ajv';

const { validateOpenRPCDocument, dereferenceDocument, MethodCallValidator } = schemaUtils;

const need = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run tests/openrpc/run.sh)`);
  return value;
};

let gateway;
let url;
let document;

before(async () => {
  gateway = spawn(need('GATEWAY_BIN'), [
    '--database-url', need('OPENRPC_DB_URL'),
    '--listen', '127.0.0.1:0',
    '--method-prefix', 'qik.',
    '--view-methods', 'stream.subscribe_public_live=public_live',
    '--guest-boards', 'demo',
  ], { stdio: ['ignore', 'pipe', 'inherit'] });
  process.on('exit', () => gateway.kill('SIGKILL'));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    gateway.stdout.on('data', (chunk) => {
      out += chunk;
      const match = out.match(/listening on http:\/\/[^:]+:(\d+)\//);
      if (match) resolve(Number(match[1]));
    });
    gateway.on('exit', (code) => reject(new Error(`the gateway exited (${code})`)));
  });
  url = `http://127.0.0.1:${port}/jsonrpc`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) break;
    } catch {}
    if (i > 200) throw new Error('the gateway never became ready');
    await new Promise((r) => setTimeout(r, 100));
  }
  document = (await call('rpc.discover', {})).result;
});

after(() => gateway?.kill('SIGTERM'));

async function call(method, params) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', method, params, id: 1 }),
  });
  return response.json();
}

test('the document is OpenRPC, says so, and the validator is not blind', () => {
  assert.equal(validateOpenRPCDocument(document), true);
  assert.match(document.openrpc, /^1\.2\.\d+$/);
  const broken = structuredClone(document);
  delete broken.info;
  assert.notEqual(validateOpenRPCDocument(broken), true, 'a document without info must fail');
  const wrongType = structuredClone(document);
  wrongType.methods[0].params = 'none';
  assert.notEqual(validateOpenRPCDocument(wrongType), true, 'params that are not a list must fail');
});

test('every name a client may call is documented, with every error code it may answer', () => {
  const names = document.methods.map((m) => m.name);
  for (const name of ['session.create', 'session.get_events', 'board.place', 'rpc.discover',
    'qik.session.create', 'qik.session.get_events', 'stream.subscribe_public_live',
    'qik.stream.subscribe_public_live']) {
    assert.ok(names.includes(name), `${name} in ${names}`);
  }
  for (const method of document.methods) {
    assert.ok(method.errors.some((e) => e.code === -32602), `${method.name} lists -32602`);
    for (const error of method.errors) assert.ok(error.message.length > 0);
  }
});

test('every documented method answers its example as its result schema says', async () => {
  const dereferenced = await dereferenceDocument(structuredClone(document));
  const paramsValidator = new MethodCallValidator(dereferenced);
  const ajv = new Ajv({ strict: false, allErrors: true });
  const created = (await call('session.create', [])).result;
  const live = { session: created, key: null };
  const order = ['session.create', 'session.authorize', 'session.subscribe', 'session.get_events',
    'session.set_presence', 'board.place', 'session.play_as_guest', 'board.tile_history', 'board.list', 'board.get',
    'session.unsubscribe', 'session.destroy', 'rpc.discover'];
  const own = dereferenced.methods.filter((m) => order.includes(m.name));
  assert.equal(own.length, order.length, 'each method of pgplace is documented');
  for (const name of order) {
    const method = own.find((m) => m.name === name);
    const [example] = method.examples;
    assert.ok(example, `${name} has an example`);
    const values = example.params.map((p) => p.value);
    const errors = paramsValidator.validate(name, values);
    assert.deepEqual(errors, [], `${name}: its example's params fit its params`);
    const params = Object.fromEntries(example.params.map((p) => [p.name, p.value]));
    if ('session' in params) params.session = live.session;
    if ('token' in params) params.token = need('DEMO_TOKEN');
    if ('key' in params) params.key = live.key;
    const answer = await call(name, params);
    assert.equal(answer.error, undefined, `${name}(${JSON.stringify(params)}): ${JSON.stringify(answer.error)}`);
    const validate = ajv.compile(method.result.schema);
    assert.ok(validate(answer.result),
      `${name}: ${JSON.stringify(answer.result).slice(0, 300)} fits its result schema: ${ajv.errorsText(validate.errors)}`);
    // The documented example result fits its own schema too.
    assert.ok(validate(example.result.value), `${name}: its example result fits: ${ajv.errorsText(validate.errors)}`);
    if (name === 'session.subscribe') live.key = answer.result[0];
  }
});

test('a result schema is not blind either', () => {
  const place = document.methods.find((m) => m.name === 'board.place');
  const validate = new Ajv({ strict: false }).compile(place.result.schema);
  assert.equal(validate({ placed: true, seq: 'one', next_allowed_at: 'soon' }), false);
});
