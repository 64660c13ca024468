// http-findings.test.js — the findings (docs/api.md §19) against the Express middleware and examples/http.js,
// over raw TCP on loopback against a real coordinator (docs/api.md §19):
//   - one key under /payments and /payments/ (or /p%61yments) ran twice;
//   - two Authorization lines: Node kept the first, so the scope differed from the joined line's;
//   - a replay sent whatever was stored (any header name, Transfer-Encoding beside
//     Content-Length, a status outside 200-599);
//   - the parser's own refusals (a lower-case method, Content-Length beside chunked, a head over
//     the limit) were a bare 400 without a problem document; 404 and 405 were Express's HTML and
//     every answer carried X-Powered-By.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const net = require('net');
const path = require('path');
const { IdemClient, keyGlobalId } = require('..');
const h = require('./helpers');

const spec = JSON.parse(fs.readFileSync(path.join(h.SOURCE_DIR, 'client-lib', 'conformance', 'http-middleware.json'), 'utf8'));
let db;
let coord;
let example;
let port;
let client;

test.before(async () => {
  db = h.createDatabase();
  coord = await h.startCoordinator(db.url);
  port = await h.freePort();
  example = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'http.js')], {
    env: { ...process.env, IDEM_ADDRESS: coord.address, PORT: String(port), PAYMENT_DELAY_MS: '0',
      IDEM_TENANT: 'default', IDEM_SERVICE: 'findings', IDEM_JOURNAL: path.join(h.tmpDir('idem-node-findings-'), 'journal') },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  await h.until('the example to listen', async () => (await fetch(`http://127.0.0.1:${port}/stats`)).ok, 15000);
  client = IdemClient.connect({ address: coord.address });
});

test.after(async () => {
  if (client) client.close();
  if (example && example.exitCode === null) {
    const gone = new Promise((r) => example.once('exit', r));
    example.kill('SIGTERM');
    await gone;
  }
  if (coord) await coord.stop();
  if (db) db.drop();
});

async function executions() {
  return (await (await fetch(`http://127.0.0.1:${port}/stats`)).json()).executions;
}

/** One request written byte for byte on its own connection; the answer as sent. */
function raw(method, target, lines, body = '') {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => {
      c.write(Buffer.from(`${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${lines.map((l) => `${l}\r\n`).join('')}Connection: close\r\n\r\n${body}`, 'latin1'));
    });
    const chunks = [];
    c.on('data', (d) => chunks.push(d));
    c.on('error', reject);
    c.on('close', () => {
      const s = Buffer.concat(chunks).toString('latin1');
      const [head, ...rest] = s.split('\r\n\r\n');
      const hl = head.split('\r\n');
      const headers = hl.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]);
      const get = (n) => headers.find(([k]) => k === n)?.[1];
      const text = rest.join('\r\n\r\n');
      let problem;
      if (get('content-type') === 'application/problem+json') problem = JSON.parse(text).type.split('#')[1];
      resolve({ status: Number(hl[0].split(' ')[1]), headers, get, text, problem });
    });
  });
}

const json = (b) => [`Content-Length: ${Buffer.byteLength(b)}`, 'Content-Type: application/json'];

test('one key under every spelling of /payments runs once', async () => {
  const before = await executions();
  const b = '{"amount":3}';
  for (const [i, t] of ['/payments', '/payments/', '/p%61yments', '/x/../payments', '//payments'].entries()) {
    const a = await raw('POST', t, ['Idempotency-Key: "spelling-1"', ...json(b)], b);
    assert.equal(a.status, 201, `${t}: ${a.text}`);
    assert.equal(a.get('idempotent-replayed') === 'true', i > 0, `${t}: replayed ${a.get('idempotent-replayed')}`);
  }
  assert.equal(await executions(), before + 1);
});

test('two Authorization lines are the scope of the joined line', async () => {
  const before = await executions();
  const b = '{"amount":4}';
  const two = await raw('POST', '/payments', ['Idempotency-Key: "auth-1"', 'Authorization: Bearer token-one', 'Authorization: Bearer token-two', ...json(b)], b);
  const joined = await raw('POST', '/payments', ['Idempotency-Key: "auth-1"', 'Authorization: Bearer token-one, Bearer token-two', ...json(b)], b);
  assert.equal(two.status, 201);
  assert.equal(joined.get('idempotent-replayed'), 'true', 'the joined line is the same caller');
  const first = await raw('POST', '/payments', ['Idempotency-Key: "auth-1"', 'Authorization: Bearer token-one', ...json(b)], b);
  assert.equal(first.get('idempotent-replayed'), undefined, 'the first line alone is another caller');
  assert.equal(await executions(), before + 2);
});

test('a replay sends only a valid stored answer: else 500 stored-answer-invalid, nothing of it sent', async () => {
  const b = '{}';
  let i = 0;
  for (const v of spec.stored_answer_vectors) {
    if (v.doc === '') continue; // what retention leaves; CompleteStep cannot plant it
    const key = `stored-${i++}`;
    const sk = { globalId: keyGlobalId(key, ''), service: 'findings', operation: 'post--payments', phase: 'forward' };
    const fp = crypto.createHash('sha256').update(`POST\n/payments\n${b}`).digest();
    const begun = await client.beginStep(sk, { fingerprint: fp });
    await client.completeStep(sk, begun.attempt, { outcome: 'succeeded', code: v.code, body: Buffer.from(v.doc, 'utf8') });
    const a = await raw('POST', '/payments', [`Idempotency-Key: "${key}"`, ...json(b)], b);
    const names = a.headers.map(([n]) => n);
    assert.ok(!(names.includes('content-length') && names.includes('transfer-encoding')), `${v.about}: both framings: ${names}`);
    assert.ok(!names.includes('set-cookie'), `${v.about}: Set-Cookie went out`);
    if (v.problem) {
      assert.equal(a.status, 500, `${v.about}: ${a.status} ${a.text}`);
      assert.equal(a.problem, v.problem, v.about);
      continue;
    }
    assert.equal(a.status, v.status, v.about);
    assert.equal(a.get('idempotent-replayed'), 'true', v.about);
    for (const [n, val] of v.headers) assert.equal(a.get(n.toLowerCase()), val, v.about);
  }
});

test("the server's own refusals are problem documents, and nothing names the framework", async () => {
  const b = '{}';
  const cases = [
    ['post', '/payments', ['Idempotency-Key: "r-1"', ...json(b)], b, 400, 'request-malformed'],
    ['POST', '/payments', ['Idempotency-Key: "r-2"', 'Content-Length: 2', 'Transfer-Encoding: chunked'], '2\r\n{}\r\n0\r\n\r\n', 400, 'body-malformed'],
    ['POST', '/payments', ['Idempotency-Key: "r-3"', 'Content-Length: -1'], '', 400, 'body-malformed'],
    ['POST', '/payments', ['Idempotency-Key: "r-4"', `X-Filler: ${'y'.repeat(30000)}`, ...json(b)], b, 431, 'header-too-large'],
    ['POST', '/payments', ['Idempotency-Key: "r-5\r\n x"', ...json(b)], b, 400, 'request-malformed'],
    ['POST', '/nowhere', ['Idempotency-Key: "r-6"', ...json(b)], b, 404, 'not-found'],
    ['GET', '/payments', [], '', 405, 'method-not-allowed'],
    ['POST', '/p%zz', ['Idempotency-Key: "r-7"', ...json(b)], b, 400, 'target-malformed'],
  ];
  const before = await executions();
  for (const [m, t, lines, body, status, problem] of cases) {
    const a = await raw(m, t, lines, body);
    assert.equal(a.status, status, `${m} ${t} ${lines[1] ?? ''}: ${a.status} ${a.text}`);
    assert.equal(a.problem, problem, `${m} ${t}: ${a.get('content-type')} ${a.text}`);
    assert.equal(a.get('x-powered-by'), undefined, `${m} ${t}: X-Powered-By`);
    assert.equal(a.get('server'), undefined, `${m} ${t}: Server`);
  }
  assert.equal(await executions(), before);
});

test('a 48-64 KiB answer keeps its Content-Type on replay', async () => {
  for (const n of [49152, 60000]) {
    const b = JSON.stringify({ big: n });
    const first = await raw('POST', '/payments', [`Idempotency-Key: "big-${n}"`, ...json(b)], b);
    const again = await raw('POST', '/payments', [`Idempotency-Key: "big-${n}"`, ...json(b)], b);
    assert.equal(first.status, 201);
    assert.equal(again.get('idempotent-replayed'), 'true');
    assert.match(again.get('content-type') ?? '', /^text\/plain/, `${n} bytes: ${again.get('content-type')}`);
  }
});
