// http.test.js — examples/http.js (Express + idem's Idempotency-Key middleware) against a real
// coordinator: concurrency, 422, 400 problems for every malformed key of the shared table,
// replays, 5xx retried, quoted = bare key, 255 characters, a body over the limit, and with the
// coordinator stopped 503 (fail-closed) / the handler runs (fail-open, journaled).
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const path = require('path');
const { IdemClient, keyGlobalId } = require('..');
const h = require('./helpers');

const table = JSON.parse(fs.readFileSync(path.join(h.SOURCE_DIR, 'client-lib', 'conformance', 'idempotency-key.json'), 'utf8'));
let db;
let coord;
let example;
let base;
let port;
let journal;
let dir;

test.before(async () => {
  db = h.createDatabase();
  coord = await h.startCoordinator(db.url);
  port = await h.freePort();
  dir = h.tmpDir('idem-node-http-');
  journal = path.join(dir, 'journal');
  example = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'http.js')], {
    env: { ...process.env, IDEM_ADDRESS: coord.address, PORT: String(port), IDEM_JOURNAL: journal,
      PAYMENT_DELAY_MS: '300', IDEM_DEADLINE_MS: '1500', IDEM_TENANT: 'default',
      IDEM_SERVICE: 'example-http' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  base = `http://127.0.0.1:${port}`;
  await h.until('the example to listen', async () => (await fetch(`${base}/stats`)).ok, 15000);
});

test.after(async () => {
  if (example && example.exitCode === null) {
    const gone = new Promise((r) => example.once('exit', r));
    example.kill('SIGTERM');
    await gone;
  }
  if (coord) await coord.stop();
  if (db) db.drop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

async function executions() {
  return (await (await fetch(`${base}/stats`)).json()).executions;
}

async function post(key, body, route = '/payments') {
  const headers = { 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  const r = await fetch(`${base}${route}`, { method: 'POST', headers, body });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

/** A request written byte for byte (header values fetch would refuse to send). */
function rawPost(keyValue, body) {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => {
      c.end(Buffer.concat([
        Buffer.from(`POST /payments HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n`, 'latin1'),
        Buffer.from(`Idempotency-Key: ${keyValue}\r\n`, 'latin1'),
        Buffer.from(`Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`, 'latin1'),
      ]));
    });
    const chunks = [];
    c.on('data', (d) => chunks.push(d));
    c.on('error', reject);
    c.on('end', () => {
      const s = Buffer.concat(chunks).toString('latin1');
      const [head, ...rest] = s.split('\r\n\r\n');
      const lines = head.split('\r\n');
      const headers = new Map(lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(lines[0].split(' ')[1]), headers, text: rest.join('\r\n\r\n') });
    });
  });
}

function assertProblem(r, status, anchor, retryable) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.headers.get('content-type'), 'application/problem+json');
  const p = JSON.parse(r.text);
  assert.equal(p.type, `docs/http-middleware.md#${anchor}`);
  assert.equal(p.status, status);
  assert.equal(p.retryable, retryable);
  assert.equal(typeof p.title, 'string');
  assert.equal(typeof p.detail, 'string');
  // Retry-After only on a retryable problem and only from the coordinator's hint: never made up
  const ra = r.headers.get('retry-after') ?? null;
  if (!retryable) assert.equal(ra, null);
  else if (ra !== null) assert.match(ra, /^[1-9][0-9]*$/);
  return p;
}

test('100 concurrent POSTs with one key run the handler once', async () => {
  const before = await executions();
  const rs = await Promise.all(Array.from({ length: 100 }, () => post('"concurrent-1"', '{"amount":100}')));
  assert.equal(await executions(), before + 1);
  const first = rs.filter((r) => r.status === 201 && !r.headers.get('idempotent-replayed'));
  assert.equal(first.length, 1);
  const body = JSON.parse(first[0].text);
  assert.equal(body.execution, before + 1);
  for (const r of rs) {
    if (r === first[0]) continue;
    if (r.status === 409) assertProblem(r, 409, 'in-progress', true);
    else {
      assert.equal(r.status, 201);
      assert.equal(r.headers.get('idempotent-replayed'), 'true');
      assert.equal(r.text, first[0].text);
    }
  }
  // after it finished, every retry is the stored answer: three retries, three replays
  for (let i = 0; i < 3; i++) {
    const r = await post('"concurrent-1"', '{"amount":100}');
    assert.equal(r.status, 201);
    assert.equal(r.headers.get('idempotent-replayed'), 'true');
    assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(r.text, first[0].text);
  }
  assert.equal(await executions(), before + 1);
  // the same key with another body: 422
  const other = await post('"concurrent-1"', '{"amount":101}');
  assertProblem(other, 422, 'fingerprint-mismatch', false);
  assert.equal(await executions(), before + 1);
});

test('no key → 400 problem; every malformed key of the table → 400 and the handler does not run', async () => {
  const before = await executions();
  const p = assertProblem(await post(undefined, '{}'), 400, 'key-missing', false);
  assert.match(p.detail, /missing/);
  for (const c of table.header) {
    if (!('error' in c) || c.header === null) continue;
    if (c.header.endsWith(' ')) continue; // HTTP parsers trim outer spaces: the table says so
    const r = await rawPost(c.header, '{}');
    if (/[\x00-\x08\x0a-\x1f\x7f]/.test(c.header)) {
      // a control character in a header value is refused by Node's HTTP parser itself
      assert.equal(r.status, 400, c.about);
      continue;
    }
    const pr = assertProblem(r, 400, 'key-malformed', false);
    assert.match(pr.detail, new RegExp(`rule ${c.error}`), c.about);
  }
  assert.equal(await executions(), before);
});

test('a quoted key runs once and the same text bare is replayed; 255 characters are accepted', async () => {
  const before = await executions();
  const a = await post('"quoted-then-bare"', '{"amount":5}');
  const b = await post('quoted-then-bare', '{"amount":5}');
  assert.equal(a.status, 201);
  assert.equal(b.headers.get('idempotent-replayed'), 'true');
  assert.equal(b.text, a.text);
  const long = await post('k'.repeat(255), '{"amount":6}');
  assert.equal(long.status, 201);
  assert.equal(long.headers.get('idempotent-replayed'), null);
  assertProblem(await post('k'.repeat(256), '{"amount":6}'), 400, 'key-malformed', false);
  assert.equal(await executions(), before + 2);
});

test('a handler 500 is stored as retryable: the next retry runs again', async () => {
  const before = await executions();
  const a = await post('"fails-1"', '{"fail":true}');
  const b = await post('"fails-1"', '{"fail":true}');
  assert.equal(a.status, 500);
  assert.equal(b.status, 500);
  assert.equal(b.headers.get('idempotent-replayed'), null);
  assert.equal(JSON.parse(b.text).execution, before + 2);
  assert.equal(await executions(), before + 2);
});

test('an answer over the body limit is replayed without its body, marked Idempotent-Body-Omitted', async () => {
  const a = await post('"big-1"', '{"big":70000}');
  assert.equal(a.status, 201);
  assert.equal(a.text.length, 70000);
  const b = await post('"big-1"', '{"big":70000}');
  assert.equal(b.status, 201);
  assert.equal(b.headers.get('idempotent-replayed'), 'true');
  assert.equal(b.headers.get('idempotent-body-omitted'), 'true');
  assert.equal(b.text, '');
});

test('coordinator stopped: a fail-closed route answers 503, a fail-open route runs the handler', async () => {
  const admin = IdemClient.connect({ address: coord.address });
  await admin.setPolicy({ service: 'example-http', operation: 'post--refunds', failureMode: 'fail-open' });
  admin.close();
  // both routes' policies are fetched (and cached by the example) while the coordinator runs
  assert.equal((await post('"before-stop-1"', '{}', '/refunds')).status, 201);
  assert.equal((await post('"before-stop-2"', '{}', '/payments')).status, 201);
  await coord.stop();
  const before = await executions();
  const closed = await post('"after-stop-1"', '{"amount":1}', '/payments');
  const p = assertProblem(closed, 503, 'coordinator-unavailable', true);
  assert.match(p.detail, /after-stop-1/);
  assert.equal(closed.headers.get('retry-after') ?? null, null, 'no coordinator answered: no Retry-After to pass on');
  assert.equal(await executions(), before);
  const open = await post('"after-stop-2"', '{"amount":2}', '/refunds');
  assert.equal(open.status, 201, open.text);
  assert.equal(await executions(), before + 1);
  const lines = fs.readFileSync(journal, 'utf8').split('\n').filter(Boolean);
  assert.equal(lines.length, 1);
  assert.ok(lines[0].includes(` client default ${keyGlobalId('after-stop-2')} example-http post--refunds forward succeeded 201 `), lines[0]);
});
