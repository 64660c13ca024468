// http-middleware.test.js — the Express middleware over real HTTP on loopback against a real
// coordinator, driven by client-lib/conformance/http-middleware.json: its problem table and
// defaults, its request cases (chunked bodies, truncated and aborted uploads, limits, scope, a
// key vs its hashed text, methods, large answers), then 409, 500 coordinator-refused and 503 as
// problem documents (never next(err) or HTML), and a 200 MB answer that keeps this process's
// RSS under the file's bound over its baseline.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const http = require('http');
const net = require('net');
const { spawn } = require('child_process');
const path = require('path');
const express = require('express');
const { IdemClient, idempotency, PROBLEMS, keyGlobalId, authorizationScope, parseIdempotencyKey } = require('..');
const h = require('./helpers');

const spec = JSON.parse(fs.readFileSync(path.join(h.SOURCE_DIR, 'client-lib', 'conformance', 'http-middleware.json'), 'utf8'));
let db;
const cleanups = [];

test.before(() => { db = h.createDatabase(); });
test.after(async () => {
  for (const f of cleanups.reverse()) await f();
  if (db) db.drop();
});

/** The file's app behind the middleware, on a free port; logs collects the middleware's lines. */
async function rig(coord, token) {
  const client = IdemClient.connect({ address: coord.address, tenant: `node-mw-${process.pid}-${Date.now()}`, token, deadlineMs: 1000,
    journalPath: path.join(h.tmpDir('idem-node-mw-'), 'journal') });
  const r = { client, executions: 0, logs: [] };
  const app = express();
  app.get('/stats', (req, res) => res.json({ executions: r.executions }));
  app.use(idempotency({ client, service: 'node-mw', deadlineMs: 3000, log: (l) => r.logs.push(l) }));
  app.use(async (req, res) => {
    r.executions++;
    const delay = Number(req.headers['delay-ms'] || 0);
    if (delay) await h.sleep(delay);
    const n = req.headers['response-bytes'];
    if (n !== undefined) {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      const piece = Buffer.alloc(64 * 1024, 'x');
      let left = Number(n);
      while (left > 0) {
        const k = Math.min(left, piece.length);
        left -= k;
        if (!res.write(k === piece.length ? piece : piece.subarray(0, k))) await new Promise((ok) => res.once('drain', ok));
      }
      res.end();
      return;
    }
    res.status(201).json({ execution: r.executions, body_length: Buffer.isBuffer(req.rawBody) ? req.rawBody.length : 0 });
  });
  r.server = await new Promise((ok) => { const s = app.listen(0, '127.0.0.1', () => ok(s)); });
  r.port = r.server.address().port;
  cleanups.push(async () => {
    client.close();
    r.server.closeAllConnections?.();
    await new Promise((ok) => r.server.close(ok));
  });
  return r;
}

function bodyOf(q) {
  if (q.body !== undefined) return Buffer.from(q.body, 'utf8');
  if (q.body_bytes) return Buffer.alloc(q.body_bytes, 'x');
  return Buffer.alloc(0);
}

function headersOf(q) {
  const hd = { 'content-type': 'application/json', connection: 'close', ...(q.headers || {}) };
  if (q.key !== undefined) hd['idempotency-key'] = q.key;
  if (q.authorization !== undefined) hd.authorization = q.authorization;
  return hd;
}

/** An aborted upload, byte for byte: what the client has, then its side closed. */
function sendAborted(port, q) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    let head = `${q.method || 'POST'} ${q.path || '/echo'} HTTP/1.1\r\nHost: 127.0.0.1\r\n`;
    for (const [k, v] of Object.entries(headersOf(q))) head += `${k}: ${v}\r\n`;
    let rest;
    if (q.chunks) {
      head += 'Transfer-Encoding: chunked\r\n\r\n';
      rest = q.chunks.map((x) => `${Buffer.byteLength(x).toString(16)}\r\n${x}\r\n`).join('');
    } else {
      head += `Content-Length: ${q.content_length}\r\n\r\n`;
      rest = bodyOf(q).toString('latin1');
    }
    c.on('connect', () => c.end(Buffer.from(head + rest, 'latin1')));
    const got = [];
    c.on('data', (d) => got.push(d));
    c.on('error', () => {});
    c.on('close', () => {
      const s = Buffer.concat(got).toString('latin1');
      if (!s.startsWith('HTTP/1.1 ')) return resolve({ none: true });
      const [hdr, ...b] = s.split('\r\n\r\n');
      const lines = hdr.split('\r\n');
      const headers = Object.fromEntries(lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      const text = b.join('\r\n\r\n');
      resolve({ status: Number(lines[0].split(' ')[1]), headers, body: Buffer.from(text, 'latin1'), n: text.length });
    });
  });
}

/** A request (http.request: Content-Length or chunked); the answer's body counted, 1 MiB kept. */
function send(port, q) {
  if (q.abort) return sendAborted(port, q);
  return new Promise((resolve, reject) => {
    const body = bodyOf(q);
    const headers = headersOf(q);
    const chunks = q.chunks ? q.chunks.map((x) => Buffer.from(x, 'utf8')) : q.chunked ? [] : undefined;
    if (q.chunked && !q.chunks) for (let i = 0; i < body.length; i += 65536) chunks.push(body.subarray(i, i + 65536));
    if (chunks) headers['transfer-encoding'] = 'chunked';
    else headers['content-length'] = String(body.length);
    const req = http.request({ host: '127.0.0.1', port, method: q.method || 'POST', path: q.path || '/echo', headers, agent: false }, (res) => {
      const kept = [];
      let n = 0;
      res.on('data', (d) => { if (n < (1 << 20)) kept.push(d); n += d.length; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(kept), n }));
      res.on('error', reject);
    });
    req.on('error', (e) => { if (e.code !== 'EPIPE' && e.code !== 'ECONNRESET') reject(e); });
    if (chunks) { for (const c of chunks) req.write(c); req.end(); } else req.end(body);
  });
}

function checkProblem(what, a, word, key) {
  const want = spec.problems.find((p) => p.type === word);
  assert.ok(want, `${what}: ${word} is not in the file`);
  assert.equal(a.headers['content-type'], 'application/problem+json', `${what}: ${a.status} ${a.body}`);
  const p = JSON.parse(a.body.toString('utf8'));
  assert.equal(a.status, want.status, what);
  assert.equal(p.type, `${spec.defaults.problem_base}#${word}`, what);
  assert.equal(p.title, want.title, what);
  assert.equal(p.status, want.status, what);
  assert.equal(p.retryable, want.retryable, what);
  assert.ok(p.detail, what);
  assert.match(p.instance, /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, what);
  if (key !== undefined) assert.equal(p.idempotency_key, key, what);
  else assert.equal(p.idempotency_key, undefined, what);
  // Retry-After only on a retryable problem and only from the coordinator's hint: never made up
  if (!want.retryable) assert.equal(a.headers['retry-after'], undefined, `${what}: Retry-After ${a.headers['retry-after']}`);
  return p;
}

function keyOf(q) {
  if (q.key === undefined) return undefined;
  return parseIdempotencyKey(q.key).key;
}

test("the problem table, the defaults and the key-to-step vectors are the file's", () => {
  assert.equal(Object.keys(PROBLEMS).length, spec.problems.length);
  for (const p of spec.problems) assert.deepEqual(PROBLEMS[p.type], { status: p.status, title: p.title, retryable: p.retryable }, p.type);
  assert.deepEqual(spec.defaults.methods, ['POST', 'PATCH']);
  assert.equal(spec.defaults.request_body_max, 1048576);
  assert.equal(spec.defaults.stored_body_max, 65536);
  assert.equal(spec.defaults.coordinator_call_timeout_ms, 5000);
  for (const v of spec.key_to_step.vectors) {
    const headers = v.authorization === null ? {} : { authorization: v.authorization };
    assert.equal(keyGlobalId(v.key, authorizationScope({ headers })), v.global_id, v.key);
  }
});

test('every request case of the file', async (t) => {
  const coord = await h.startCoordinator(db.url);
  cleanups.push(() => coord.stop());
  const r = await rig(coord);
  for (const c of spec.cases) {
    await t.test(c.name, async () => {
      let i = 0;
      for (const { request: q, expect: e } of c.requests) {
        const what = `${c.name}: request ${++i}`;
        const before = r.executions;
        const a = await send(r.port, q);
        if (e.ran !== undefined) assert.equal(r.executions - before, e.ran ? 1 : 0, `${what}: executions (${a.status} ${a.body})`);
        if (a.none) {
          assert.ok(e.answer_optional, `${what}: no answer`);
          t.diagnostic(`${what}: the server closed without an answer`);
          continue;
        }
        assert.equal(a.status, e.status, `${what}: ${a.body}`);
        if (e.problem) checkProblem(what, a, e.problem, keyOf(q));
        if (e.replayed !== undefined) assert.equal(a.headers['idempotent-replayed'] === 'true', e.replayed, what);
        assert.equal(a.headers['idempotent-body-omitted'] === 'true', !!e.body_omitted, what);
        if (e.body_length !== undefined) assert.equal(a.n, e.body_length, what);
      }
    });
  }
});

test('409 while running and 503 with the coordinator stopped are problem documents', async () => {
  const coord = await h.startCoordinator(db.url);
  cleanups.push(() => coord.stop());
  const r = await rig(coord);
  const first = send(r.port, { key: 'slow-1', body: '{}', headers: { 'delay-ms': '1500' } });
  await h.until('the first request to run', () => r.executions === 1, 10000, 10);
  checkProblem('in progress', await send(r.port, { key: 'slow-1', body: '{}' }), 'in-progress', 'slow-1');
  assert.equal((await first).status, 201);
  await coord.stop();
  const down = await send(r.port, { key: 'down-1', body: '{}' });
  checkProblem('stopped', down, 'coordinator-unavailable', 'down-1');
  assert.equal(down.headers['retry-after'], undefined, `stopped: a made-up Retry-After ${down.headers['retry-after']}`);
  assert.equal(r.executions, 1);
});

test('a coordinator refusing the token is a 500 coordinator-refused problem, logged once per answer', async () => {
  const dir = h.tmpDir('idem-node-mw-tokens-');
  const tokens = path.join(dir, 'tokens');
  fs.writeFileSync(tokens, 'right-token-0123456789 node-mw-tenant service\n', { mode: 0o600 });
  // startCoordinator's probe has no token: spawn it here and wait for the refusal through the
  // middleware (503 until it listens)
  const port = await h.freePort();
  const proc = spawn(h.COORDINATOR, ['--listen', `127.0.0.1:${port}`, '--pg', db.url, '--reaper-interval', '0', '--workers', '4', '--tokens', tokens],
    { stdio: 'ignore' });
  const exited = new Promise((ok) => proc.once('exit', ok));
  cleanups.push(async () => { if (proc.exitCode === null && proc.signalCode === null) { proc.kill('SIGTERM'); await exited; } });
  const coord = { address: `127.0.0.1:${port}` };
  const r = await rig(coord, 'wrong-token-0123456789');
  const a = await h.until('a refusal (not 503)', async () => {
    const x = await send(r.port, { key: 'refused-1', body: '{}' });
    return x.status !== 503 ? x : undefined;
  }, 20000, 100);
  checkProblem('bad token', a, 'coordinator-refused', 'refused-1');
  assert.equal(r.executions, 0);
  assert.equal(r.logs.filter((l) => l.includes('coordinator-refused')).length, 1, r.logs.join('\n'));
});

function status(field) {
  const m = fs.readFileSync('/proc/self/status', 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return Number(m[1]) * 1024;
}

test('a 200 MB answer streams: RSS stays under the bound over the baseline, the replay has no body', async () => {
  const coord = await h.startCoordinator(db.url);
  cleanups.push(() => coord.stop());
  const r = await rig(coord);
  const n = spec.large_response.bytes;
  assert.equal((await send(r.port, { key: 'rss-warm', body: '{}', headers: { 'response-bytes': '100000' } })).status, 200);
  global.gc?.();
  fs.writeFileSync('/proc/self/clear_refs', '5'); // the peak (VmHWM) starts again from here
  const base = status('VmRSS');
  const a = await send(r.port, { key: 'rss-1', body: '{}', headers: { 'response-bytes': String(n) } });
  const peak = status('VmHWM');
  assert.equal(a.status, 200);
  assert.equal(a.n, n);
  test.diagnostic?.(`a ${n}-byte answer: RSS baseline ${base >> 20} MB, peak ${peak >> 20} MB (+${(peak - base) >> 20} MB)`);
  console.log(`# a ${n}-byte answer: RSS baseline ${base >> 20} MB, peak ${peak >> 20} MB (+${(peak - base) >> 20} MB)`);
  assert.ok(peak - base < spec.large_response.rss_over_baseline_max, `peak RSS ${peak - base} bytes over the baseline`);
  const b = await send(r.port, { key: 'rss-1', body: '{}', headers: { 'response-bytes': String(n) } });
  assert.equal(b.headers['idempotent-replayed'], 'true');
  assert.equal(b.headers['idempotent-body-omitted'], 'true');
  assert.equal(b.n, 0);
});
