// trace.test.js — trace context against a real coordinator (docs/api.md §22): a parent span, a
// step run under it, the idem.step span found as its child in @opentelemetry/sdk-trace-base's
// in-memory exporter, and the parent's trace id on the step (LookupStep, `idemctl step`); the
// replay, lease-extension, waiting and takeover events; and a request with a traceparent through
// the Express middleware leaving its trace id on the step; and, with @opentelemetry/api not
// loadable, an explicit traceparent still sent.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('child_process');
const fs = require('fs');
const api = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const express = require('express');
const { IdemClient, STEP_SPAN, STEP_EVENTS, idempotency, keyGlobalId, routeOperation } = require('..');
const h = require('./helpers');

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('test');
let db;
let coord;
let client;

test.before(async () => {
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  db = h.createDatabase();
  coord = await h.startCoordinator(db.url);
  client = IdemClient.connect({ address: coord.address, tenant: 'node-trace', tracerProvider: provider });
});

test.after(async () => {
  if (client) client.close();
  if (coord) await coord.stop();
  if (db) db.drop();
  await provider.shutdown();
});

const stepSpans = () => exporter.getFinishedSpans().filter((s) => s.name === STEP_SPAN);
const events = (s) => s.events.map((e) => e.name);

test('idem.step is the parent span\'s child; the parent\'s trace id is on the step (LookupStep, idemctl)', async () => {
  exporter.reset();
  const { globalId } = await client.beginSaga();
  const key = { globalId, service: 'pay', operation: 'charge' };
  let inAction;
  const parent = await tracer.startActiveSpan('checkout', async (span) => {
    try {
      const rep = await client.runStep(key, async () => {
        inAction = api.trace.getSpanContext(api.context.active());
        await h.sleep(1300); // two lease extensions (every third of 1500 ms)
        return { outcome: 'succeeded', body: 'ok' };
      }, { leaseMs: 1500 });
      assert.equal(rep.ran, true);
      return span;
    } finally {
      span.end();
    }
  });
  const tid = parent.spanContext().traceId;
  const steps = stepSpans();
  assert.equal(steps.length, 1, `idem.step spans: ${steps.length}`);
  const st = steps[0];
  assert.equal(st.spanContext().traceId, tid);
  assert.equal(st.parentSpanContext?.spanId, parent.spanContext().spanId, 'idem.step is not the parent\'s child');
  assert.equal(inAction.spanId, st.spanContext().spanId, 'the action does not run in idem.step');
  assert.deepEqual(
    [st.attributes['idem.service'], st.attributes['idem.operation'], st.attributes['idem.global_id'],
      st.attributes['idem.decision'], st.attributes['idem.attempt']],
    ['pay', 'charge', globalId, 'PROCEED', 1]);
  assert.ok(events(st).includes(STEP_EVENTS.leaseExtended), `events: ${events(st)}`);

  const rec = await client.lookup(key);
  assert.equal(rec.beginTraceId, tid);
  assert.equal(rec.completeTraceId, tid);
  assert.ok(fs.existsSync(h.IDEMCTL), `no idemctl at ${h.IDEMCTL} (IDEMCTL_BIN)`);
  const out = execFileSync(h.IDEMCTL, ['--addr', coord.address, '--tenant', 'node-trace', 'step', globalId, 'pay', 'charge'],
    { encoding: 'utf8' });
  assert.ok(out.includes(tid), `idemctl step does not print ${tid}:\n${out}`);

  // again under another parent: a replay, with its event
  await tracer.startActiveSpan('retry', async (span) => {
    const rep = await client.runStep(key, () => ({ outcome: 'succeeded', body: 'again' }));
    span.end();
    assert.equal(rep.replayed, true);
  });
  const replay = stepSpans()[1];
  assert.equal(replay.attributes['idem.decision'], 'REPLAY');
  assert.ok(events(replay).includes(STEP_EVENTS.replay), `events: ${events(replay)}`);
});

test('idem.step events: waiting while another attempt holds the step, then its takeover', async () => {
  exporter.reset();
  const { globalId } = await client.beginSaga();
  const key = { globalId, service: 'pay', operation: 'hold' };
  // never completed: its lease runs out (long enough that the run surely finds it in progress)
  const b = await client.beginStep(key, { leaseMs: 1500 });
  assert.equal(b.decision, 'PROCEED');
  const rep = await tracer.startActiveSpan('parent', async (span) => {
    try {
      return await client.runStep(key, () => ({ outcome: 'succeeded' }),
        { inProgress: 'backoff', deadlineMs: 15000, backoffBaseMs: 20, backoffMaxMs: 100 });
    } finally {
      span.end();
    }
  });
  assert.equal(rep.takeover, true);
  assert.equal(rep.attempt, 2);
  const [st] = stepSpans();
  assert.ok(events(st).includes(STEP_EVENTS.waiting) && events(st).includes(STEP_EVENTS.takeover), `events: ${events(st)}`);
  assert.equal(st.attributes['idem.attempt'], 2);
});

test('a request with a traceparent through the Express middleware leaves its trace id on the step', async () => {
  // a client without a tracer provider: @opentelemetry/api's global no-op one
  const plain = IdemClient.connect({ address: coord.address, tenant: 'node-trace-http' });
  const app = express();
  app.post('/pay', idempotency({ client: plain, service: 'shop' }), (req, res) => res.status(201).json({ ok: true }));
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
  try {
    const base = `http://127.0.0.1:${server.address().port}`;
    const tid = '0af7651916cd43dd8448eb211c80319c';
    const post = (key, tp) => fetch(`${base}/pay`, {
      method: 'POST', body: '{}',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, ...(tp ? { traceparent: tp } : {}) },
    });
    let r = await post('order-1', `00-${tid}-b7ad6b7169203331-01`);
    assert.equal(r.status, 201);
    const op = routeOperation('POST', '/pay');
    const rec = await plain.lookup({ globalId: keyGlobalId('order-1'), service: 'shop', operation: op });
    assert.equal(rec.beginTraceId, tid);
    assert.equal(rec.completeTraceId, tid);
    // a malformed traceparent is ignored, never an error
    r = await post('order-2', '00-nothex-01');
    assert.equal(r.status, 201);
    const rec2 = await plain.lookup({ globalId: keyGlobalId('order-2'), service: 'shop', operation: op });
    assert.equal(rec2.beginTraceId, '');
  } finally {
    server.close();
    plain.close();
  }
});

test('an explicit traceparent is checked: a malformed one is INVALID_ARGUMENT naming the field', async () => {
  const key = { globalId: (await client.beginSaga()).globalId, service: 'pay', operation: 'bad' };
  await assert.rejects(client.runStep(key, () => ({ outcome: 'succeeded' }), { traceparent: '00-abc' }),
    (e) => e.code === 'INVALID_ARGUMENT' && /traceparent/.test(e.message));
});

test('without @opentelemetry/api an explicit traceparent still ends on the step', async () => {
  // a child process in which require('@opentelemetry/api') fails, as in an application without it
  const tid = '5e0c63257de34c92bf9efcd03927272e';
  const script = `
    const Module = require('module');
    const resolve = Module._resolveFilename;
    Module._resolveFilename = function (req, ...rest) {
      if (req === '@opentelemetry/api') throw Object.assign(new Error('not installed'), { code: 'MODULE_NOT_FOUND' });
      return resolve.call(this, req, ...rest);
    };
    try { require('@opentelemetry/api'); process.exit(3); } catch { /* as intended: not loadable */ }
    const { IdemClient } = require(${JSON.stringify(require.resolve('..'))});
    (async () => {
      const c = IdemClient.connect({ address: ${JSON.stringify(coord.address)}, tenant: 'node-trace-noapi' });
      const { globalId } = await c.beginSaga();
      const key = { globalId, service: 'pay', operation: 'noapi' };
      await c.runStep(key, () => ({ outcome: 'succeeded' }), { traceparent: '00-${tid}-00f067aa0ba902b7-01' });
      const rec = await c.lookup(key);
      c.close();
      process.stdout.write(JSON.stringify([rec.beginTraceId, rec.completeTraceId]));
    })().catch((e) => { console.error(e); process.exit(1); });`;
  const out = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 });
  assert.deepEqual(JSON.parse(out), [tid, tid]);
});
