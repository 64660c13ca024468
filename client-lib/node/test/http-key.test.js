// http-key.test.js — the middleware's header parser, step key and fingerprint against the shared
// table client-lib/conformance/idempotency-key.json (every case: the key or the error word), the
// stored-response encoding and the problem documents' Retry-After rounding.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const {
  parseIdempotencyKey, keyGlobalId, authorizationScope, routeOperation, requestFingerprint, encodeStored, decodeStored,
  retryAfterSeconds, problem,
} = require('..');

const dir = process.env.IDEM_SOURCE_DIR ? path.join(process.env.IDEM_SOURCE_DIR, 'client-lib', 'conformance')
  : path.resolve(__dirname, '..', '..', 'conformance');
const table = JSON.parse(fs.readFileSync(path.join(dir, 'idempotency-key.json'), 'utf8'));

test('header: every case of the table', () => {
  assert.ok(table.header.length >= 28);
  for (const c of table.header) {
    const got = parseIdempotencyKey(c.header);
    const label = `${JSON.stringify(c.header)} (${c.about})`;
    if ('error' in c) {
      assert.ok(table.errors.includes(c.error), `unknown error word ${c.error}`);
      assert.deepEqual(got, { error: c.error }, label);
    } else {
      assert.deepEqual(got, { key: c.key }, label);
    }
  }
});

test('global id: every vector (scope, key)', () => {
  for (const c of table.global_id) assert.equal(keyGlobalId(c.key, c.scope), c.global_id, `${c.scope} ${c.key}`);
  assert.equal(keyGlobalId('abc'), table.global_id.find((c) => c.scope === '' && c.key === 'abc').global_id);
});

test("default scope: the Authorization header's SHA-256, empty without one", () => {
  assert.ok(table.scope_default.length >= 2);
  for (const c of table.scope_default) {
    const headers = c.authorization === null ? {} : { authorization: c.authorization };
    assert.equal(authorizationScope({ headers }), c.scope);
  }
});

test('operation: every vector', () => {
  for (const c of table.operation) assert.equal(routeOperation(c.method, c.path), c.operation, c.path);
});

test('fingerprint: every vector', () => {
  for (const c of table.fingerprint) {
    assert.equal(requestFingerprint(c.method, c.target, Buffer.from(c.body, 'utf8')).toString('hex'), c.sha256, c.target);
  }
});

test('stored responses: the JSON document, and the body left out over the limit', () => {
  const h = [['content-type', 'application/json'], ['x-a', '1']];
  const { doc, omitted } = encodeStored(201, h, Buffer.from('{"x":1}'), 100);
  assert.equal(omitted, false);
  assert.equal(doc.toString(), '{"status":201,"headers":[["content-type","application/json"],["x-a","1"]],"body_b64":"eyJ4IjoxfQ=="}');
  assert.deepEqual(decodeStored(doc), { status: 201, headers: h, body: Buffer.from('{"x":1}'), bodyOmitted: false });
  const big = encodeStored(200, h, Buffer.alloc(101), 100);
  assert.equal(big.omitted, true);
  assert.equal(decodeStored(big.doc).bodyOmitted, true);
  assert.equal(decodeStored(big.doc).body.length, 0);
  // a body under the option but whose document would pass 64 KiB is left out too
  assert.equal(encodeStored(200, h, Buffer.alloc(60000), 1 << 20).omitted, true);
  assert.ok(encodeStored(200, h, Buffer.alloc(60000), 1 << 20).doc.length <= 65536);
  assert.equal(decodeStored(Buffer.from('not json')), undefined);
});

test('problems: type from the base and anchor, Retry-After rounded up, at least 1', () => {
  const p = problem('docs/http-middleware.md', 'in-progress', 'd', 'k1');
  assert.match(p.instance, /^urn:uuid:[0-9a-f-]{36}$/);
  assert.notEqual(problem('b', 'in-progress', 'd').instance, p.instance);
  assert.deepEqual({ ...p, instance: undefined }, {
    type: 'docs/http-middleware.md#in-progress', title: 'Request in progress', status: 409, detail: 'd', retryable: true,
    instance: undefined, idempotency_key: 'k1',
  });
  assert.equal('idempotency_key' in problem('b', 'key-missing', 'd'), false);
  assert.equal(problem('https://x/y', 'key-malformed', 'd').type, 'https://x/y#key-malformed');
  assert.equal(problem('b', 'fingerprint-mismatch', 'd').status, 422);
  assert.equal(problem('b', 'coordinator-unavailable', 'd').retryable, true);
  assert.equal(problem('b', 'key-missing', 'd').retryable, false);
  assert.equal(retryAfterSeconds(0), 1);
  assert.equal(retryAfterSeconds(1), 1);
  assert.equal(retryAfterSeconds(1000), 1);
  assert.equal(retryAfterSeconds(1001), 2);
  assert.equal(retryAfterSeconds(29500), 30);
});
