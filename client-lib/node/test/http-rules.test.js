// http-rules.test.js — every vector of docs/api.md §19 in
// client-lib/conformance/http-middleware.json against the middleware's own functions: the
// operation and fingerprint target from the request target, repeated headers (key, scope),
// methods, trace context, stored answers, the coordinator error table with every reason word,
// the example servers' problem table, and what Node's parser refuses (framing, lower-case
// methods, folded lines, an oversized head) answered as a problem document by the example's
// clientError hook. (framing_vectors and example_server are also sent to examples/http.js by
// test/http.test.js and by the differential test.)
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const {
  IdemClient, idempotency, normalizeTarget, fingerprintTarget, routeOperation, parseIdempotencyKey, authorizationScope,
  keptTrace, TRACE_MAX, validateStored, NEVER_KEPT, problemForError, SERVER_PROBLEMS, PROBLEMS, clientErrorProblem,
} = require('..');

const dir = process.env.IDEM_SOURCE_DIR ? path.join(process.env.IDEM_SOURCE_DIR, 'client-lib', 'conformance')
  : path.resolve(__dirname, '..', '..', 'conformance');
const spec = JSON.parse(fs.readFileSync(path.join(dir, 'http-middleware.json'), 'utf8'));

test('operation_vectors: path, operation, fingerprint target or target-malformed', () => {
  assert.ok(spec.operation_vectors.length >= 10);
  for (const v of spec.operation_vectors) {
    const label = `${v.method} ${JSON.stringify(v.target)}`;
    if (v.error) {
      assert.throws(() => normalizeTarget(v.target), undefined, label);
      continue;
    }
    const t = normalizeTarget(v.target);
    assert.equal(t.path, v.path, label);
    assert.equal(fingerprintTarget(t), v.fingerprint_target, label);
    assert.equal(routeOperation(v.method, v.target), v.operation, label);
  }
});

/** A request-like object with raw header lines, as Node hands them over. */
function fakeReq(lines) {
  const headers = {};
  const rawHeaders = [];
  for (const [n, v] of lines) {
    rawHeaders.push(n, v);
    const k = n.toLowerCase();
    if (k === 'authorization') headers[k] = headers[k] ?? v; // Node keeps the first
    else headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
  }
  return { headers, rawHeaders };
}

test('header_vectors: repeated key lines are one list, Authorization lines joined for the scope', () => {
  assert.ok(spec.header_vectors.length >= 3);
  for (const v of spec.header_vectors) {
    const req = fakeReq(v.lines);
    const got = parseIdempotencyKey(req.headers['idempotency-key']);
    if (v.key_error) assert.deepEqual(got, { error: v.key_error }, v.about);
    else assert.deepEqual(got, { key: v.key }, v.about);
    if (v.scope !== undefined) assert.equal(authorizationScope(req), v.scope, v.about);
  }
});

test('method_vectors: matched case-sensitively; a lower-case methods option and a never-kept header are refused', async () => {
  const client = IdemClient.connect({ address: '127.0.0.1:1' });
  try {
    const mw = idempotency({ client, service: 'rules', log: () => {} });
    for (const v of spec.method_vectors) {
      let nexted = false;
      const res = { setHeader() {}, end() {}, headersSent: false };
      mw({ method: v.method, headers: {}, rawHeaders: [], url: '/payments' }, res, () => { nexted = true; });
      assert.equal(!nexted, v.wrapped, `${v.method}: wrapped ${!nexted}, want ${v.wrapped}`);
    }
    assert.throws(() => idempotency({ client, service: 'rules', methods: ['post'] }), /methods/);
    for (const h of spec.defaults.never_kept) assert.throws(() => idempotency({ client, service: 'rules', keepHeaders: [h] }), /keepHeaders/, h);
    assert.deepEqual([...NEVER_KEPT].sort(), spec.defaults.never_kept.map((h) => h.toLowerCase()).sort());
  } finally {
    client.close();
  }
});

test('trace_vectors: what goes to the coordinator', () => {
  assert.equal(TRACE_MAX, spec.defaults.trace_max_bytes);
  for (const v of spec.trace_vectors) {
    const got = keptTrace(v.traceparent, v.tracestate);
    assert.equal(got.traceparent ?? null, v.keep_traceparent, v.about);
    assert.equal(got.tracestate ?? null, v.keep_tracestate, v.about);
  }
});

test('stored_answer_vectors: replayed as stored, or stored-answer-invalid', () => {
  for (const v of spec.stored_answer_vectors) {
    const doc = Buffer.from(v.doc, 'utf8');
    if (v.problem) {
      assert.throws(() => validateStored(doc, v.code, spec.defaults.keep_headers), undefined, v.about);
      continue;
    }
    const got = validateStored(doc, v.code, spec.defaults.keep_headers);
    assert.equal(got.status, v.status, v.about);
    assert.deepEqual(got.headers, v.headers, v.about);
    assert.equal(got.bodyOmitted, v.body_omitted, v.about);
    if (v.body_b64 !== undefined) assert.equal(got.body.toString('base64'), v.body_b64, v.about);
  }
});

test('coordinator_errors: every code of the table with every reason word and none', () => {
  const want = (code, reason) => spec.coordinator_errors.find((r) => (r.code === code || r.code === '*')
    && (r.reason === undefined || r.reason === reason)).problem;
  let n = 0;
  for (const row of spec.coordinator_errors) {
    const code = row.code === '*' ? 'INTERNAL' : row.code;
    for (const reason of ['', ...spec.reason_words]) {
      assert.equal(problemForError(code, reason), want(code, reason), `${code} ${JSON.stringify(reason)}`);
      n++;
    }
  }
  assert.ok(n > 200, `${n} pairs`);
});

test('problem tables: the middleware and the example server', () => {
  assert.equal(Object.keys(PROBLEMS).length, spec.problems.length);
  for (const p of spec.problems) assert.deepEqual(PROBLEMS[p.type], { status: p.status, title: p.title, retryable: p.retryable }, p.type);
  assert.equal(Object.keys(SERVER_PROBLEMS).length, spec.example_server.problems.length);
  for (const p of spec.example_server.problems) {
    assert.deepEqual(SERVER_PROBLEMS[p.type], { status: p.status, title: p.title, retryable: p.retryable }, p.type);
  }
  assert.equal(clientErrorProblem('HPE_UNEXPECTED_CONTENT_LENGTH'), 'body-malformed');
  assert.equal(clientErrorProblem('HPE_HEADER_OVERFLOW'), 'header-too-large');
  assert.equal(clientErrorProblem('HPE_INVALID_METHOD'), 'request-malformed');
});
