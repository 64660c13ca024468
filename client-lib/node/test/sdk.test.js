// sdk.test.js — the SDK against a real coordinator (a private database, a single node on a free
// loopback port): sagas, raw calls, the step helper's lease keep-alive and lost lease, waiting
// and its cancellation, error values, and a fail-open journal that idemctl reconcile replays.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { IdemClient, IdemError } = require('..');
const h = require('./helpers');

let db;
let coord;
let client;

test.before(async () => {
  db = h.createDatabase();
  coord = await h.startCoordinator(db.url);
  client = IdemClient.connect({ address: coord.address, tenant: 'node-sdk' });
});

test.after(async () => {
  if (client) client.close();
  if (coord) await coord.stop();
  if (db) db.drop();
});

async function saga() {
  return (await client.beginSaga({ sagaType: 'test' })).globalId;
}

test('sagas and raw calls: BeginSaga with a request id, Begin/Complete/Lookup/GetSaga', async () => {
  const a = await client.beginSaga({ requestId: 'req-1', sagaType: 'order', labels: { who: 'node' } });
  const b = await client.beginSaga({ requestId: 'req-1', sagaType: 'order' });
  assert.equal(a.created, true);
  assert.equal(b.created, false);
  assert.equal(b.globalId, a.globalId);
  const key = { globalId: a.globalId, service: 'pay', operation: 'charge' };
  const begun = await client.beginStep(key, { fingerprint: 'f' });
  assert.equal(begun.decision, 'PROCEED');
  assert.equal(begun.attempt, 1);
  const rec = await client.completeStep(key, 1, { outcome: 'failed', code: 402, body: 'declined' });
  assert.equal(rec.state, 'failed');
  const looked = await client.lookup(key);
  assert.equal(looked.result.body.toString(), 'declined');
  assert.equal(looked.fingerprint.toString(), 'f');
  const s = await client.getSaga(a.globalId);
  assert.equal(s.sagaType, 'order');
  assert.deepEqual(s.labels, { who: 'node' });
  assert.equal(s.steps.length, 1);
  assert.equal(s.steps[0].key.operation, 'charge');
  await assert.rejects(client.lookup({ ...key, operation: 'nothing' }), (e) => e instanceof IdemError && e.code === 'NOT_FOUND' && e.reason === 'not-found');
});

test('runStep: replay, and errors as values with code and reason', async () => {
  const key = { globalId: await saga(), service: 'pay', operation: 'charge' };
  let runs = 0;
  const act = () => { runs++; return { outcome: 'succeeded', code: 201, body: `run ${runs}` }; };
  const r1 = await client.runStep(key, act, { fingerprint: 'f1' });
  const r2 = await client.runStep(key, act, { fingerprint: 'f1' });
  assert.equal(runs, 1);
  assert.equal(r1.ran, true);
  assert.equal(r2.replayed, true);
  assert.equal(r2.result.body.toString(), 'run 1');
  assert.equal(r2.result.code, 201);
  await assert.rejects(client.runStep(key, act, { fingerprint: 'f2' }),
    (e) => e.code === 'FAILED_PRECONDITION' && e.reason === 'fingerprint-mismatch' && e.grpcCode === 9);
  // retryable releases the key: STEP_FAILED with the report, then the next run is attempt 2
  const k2 = { ...key, operation: 'refund' };
  await assert.rejects(client.runStep(k2, () => ({ outcome: 'retryable', code: 503 })),
    (e) => e.code === 'STEP_FAILED' && e.report.ran === true && e.report.attempt === 1);
  assert.equal((await client.runStep(k2, () => ({ outcome: 'succeeded' }))).attempt, 2);
});

test('runStep extends the lease while a long action runs (without it the step is taken over)', async () => {
  for (const extend of [true, false]) {
    const key = { globalId: await saga(), service: 'pay', operation: 'slow' };
    let other;
    const r = await client.runStep(key, async () => {
      await h.sleep(1200); // four leases long
      try {
        other = await client.beginStep(key, {});
      } catch (e) {
        other = e;
      }
      return { outcome: 'succeeded', body: 'slow' };
    }, { leaseMs: 300, extendLease: extend }).catch((e) => e);
    if (extend) {
      assert.equal(r.ran, true, `run failed: ${r.message}`);
      assert.equal(r.attempt, 1);
      assert.ok(other instanceof IdemError && other.code === 'ABORTED' && other.reason === 'in-progress',
        `another caller must see the step in progress, got ${other && (other.code || other.decision)}`);
    } else {
      // the lease ran out: the other caller took over, and this attempt's completion is fenced
      assert.equal(other.decision, 'PROCEED');
      assert.equal(other.takeover, true);
      assert.ok(r instanceof IdemError && r.code === 'ABORTED' && r.reason === 'lease-lost', String(r.code));
    }
  }
});

test('runStep reports a lost lease and aborts the action\'s signal', async () => {
  const key = { globalId: await saga(), service: 'pay', operation: 'lost' };
  let sawAbort = false;
  const t0 = Date.now();
  const run = client.runStep(key, async (ctx) => {
    // an operator settles the step while the action still runs
    await client.resolveStep(key, { outcome: 'failed', code: 1, body: 'by hand', reason: 'test' });
    await new Promise((resolve) => {
      const t = setTimeout(resolve, 5000);
      ctx.signal.addEventListener('abort', () => { sawAbort = true; clearTimeout(t); resolve(); });
    });
    return { outcome: 'succeeded', body: 'late' };
  }, { leaseMs: 300 });
  await assert.rejects(run, (e) => e.code === 'ABORTED' && e.reason === 'lease-lost' && e.report.ran === true);
  assert.equal(sawAbort, true);
  assert.ok(Date.now() - t0 < 3000);
  assert.equal((await client.lookup(key)).result.body.toString(), 'by hand');
});

test('runStep waits for a step in progress; an AbortSignal cancels the wait', async () => {
  const key = { globalId: await saga(), service: 'pay', operation: 'held' };
  const b = await client.beginStep(key, { leaseMs: 30000 });
  const ac = new AbortController();
  const t0 = Date.now();
  setTimeout(() => ac.abort(), 300);
  let ran = false;
  await assert.rejects(client.runStep(key, () => { ran = true; return {}; }, { signal: ac.signal }),
    (e) => e.code === 'CANCELLED');
  assert.ok(Date.now() - t0 < 2000, 'cancellation must not wait for the deadline');
  assert.equal(ran, false);
  // waiting (wait_ms): the other caller's result arrives without a retry
  const waiting = client.runStep(key, () => { ran = true; return {}; });
  await h.sleep(300);
  await client.completeStep(key, b.attempt, { outcome: 'succeeded', body: 'other' });
  const r = await waiting;
  assert.equal(r.replayed, true);
  assert.equal(r.beginRetries, 0);
  assert.equal(r.result.body.toString(), 'other');
  assert.equal(ran, false);
  // the run's deadline bounds the wait: ABORTED / in-progress (or the call's DEADLINE_EXCEEDED) in time
  const k2 = { ...key, operation: 'held2' };
  await client.beginStep(k2, { leaseMs: 30000 });
  const t1 = Date.now();
  await assert.rejects(client.runStep(k2, () => { ran = true; return {}; }, { deadlineMs: 600 }),
    (e) => e.code === 'DEADLINE_EXCEEDED' || (e.code === 'ABORTED' && e.reason === 'in-progress'));
  const took = Date.now() - t1;
  assert.ok(took >= 500 && took < 2000, `took ${took} ms`);
  assert.equal(ran, false);
});

/** A stand-in node on a free loopback port: every Coordinator call goes to handler(call, cb). */
async function fakeNode(handler) {
  const grpc = require('@grpc/grpc-js');
  const { services } = require('../dist/proto');
  const server = new grpc.Server();
  const def = services().Coordinator.service;
  const handlers = {};
  for (const m of Object.keys(def)) handlers[m] = handler;
  server.addService(def, handlers);
  const port = await new Promise((resolve, reject) => server.bindAsync('127.0.0.1:0',
    grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  return { address: `127.0.0.1:${port}`, stop: () => server.forceShutdown() };
}

test('a CANCELLED the caller did not cause (a draining node\'s gRPC) is a lost try; the caller\'s own is final', async () => {
  const grpc = require('@grpc/grpc-js');
  // gRPC core of a node whose shutdown has begun kills each call with CANCELLED, no idem-reason
  let drained = 0;
  const draining = await fakeNode((_call, cb) => {
    drained++;
    cb({ code: grpc.status.CANCELLED, details: 'server is shutting down' });
  });
  let started;
  const reached = new Promise((r) => { started = r; });
  const hanging = await fakeNode(() => started()); // answers nothing: the caller cancels
  const c1 = IdemClient.connect({ address: [draining.address, coord.address], tenant: 'node-lost-try' });
  const c2 = IdemClient.connect({ address: [draining.address, coord.address], tenant: 'node-lost-try' });
  const c3 = IdemClient.connect({ address: [hanging.address, coord.address], tenant: 'node-lost-try' });
  try {
    // repeatable: repeated on the next node, which runs it
    const key = { globalId: 'lost-try-1', service: 'pay', operation: 'charge' };
    const r = await c1.runStep(key, () => ({ outcome: 'succeeded', code: 200, body: 'next node' }));
    assert.equal(r.ran, true);
    assert.ok(drained > 0, 'the draining node was not called');

    // BeginSaga without a request id is not repeatable: its lost try is the answer, outcome unknown
    const before = drained;
    await assert.rejects(c2.beginSaga({ sagaType: 'test' }),
      (e) => e instanceof IdemError && e.code === 'CANCELLED' && e.outcomeUnknown === true && e.reason === '');
    assert.equal(drained - before, 1);

    // the caller's own cancellation stays final, nothing unknown about it
    const ac = new AbortController();
    reached.then(() => ac.abort());
    await assert.rejects(c3.lookup({ globalId: 'lost-try-2', service: 'pay', operation: 'charge' },
      { signal: ac.signal, deadlineMs: 10000 }),
      (e) => e instanceof IdemError && e.code === 'CANCELLED' && !e.outcomeUnknown);
  } finally {
    c1.close();
    c2.close();
    c3.close();
    draining.stop();
    hanging.stop();
  }
});

test('fail-open: with the coordinator gone a fail-open step runs, is journaled, and idemctl reconcile replays it', async () => {
  const own = h.createDatabase();
  const port = await h.freePort();
  let c2 = await h.startCoordinator(own.url, [], port);
  const dir = h.tmpDir('idem-node-journal-');
  const journal = path.join(dir, 'journal');
  const cl = IdemClient.connect({ address: c2.address, tenant: 'shop', journalPath: journal, deadlineMs: 500 });
  try {
    await cl.setPolicy({ service: 'open', operation: '*', failureMode: 'fail-open' });
    const gid = (await cl.beginSaga()).globalId;
    const key = { globalId: gid, service: 'open', operation: 'pay' };
    await cl.prefetchPolicy('open', 'pay');
    await cl.prefetchPolicy('closed', 'pay');
    await c2.stop();
    const r = await cl.runStep(key, (ctx) => ({ outcome: 'succeeded', code: 7, body: `unguarded=${ctx.unguarded}` }),
      { fingerprint: Buffer.from([1, 2, 3]), deadlineMs: 1500 });
    assert.equal(r.decision, 'PROCEED_UNGUARDED');
    assert.equal(r.unguarded && r.journaled, true);
    let closedRan = false;
    await assert.rejects(cl.runStep({ ...key, service: 'closed' }, () => { closedRan = true; return {}; }, { deadlineMs: 1000 }),
      (e) => ['UNAVAILABLE', 'DEADLINE_EXCEEDED'].includes(e.code));
    assert.equal(closedRan, false);
    const lines = fs.readFileSync(journal, 'utf8').split('\n').filter(Boolean);
    assert.equal(lines.length, 1);
    assert.match(lines[0], new RegExp(`^idem1 \\d+ client shop ${gid} open pay forward succeeded 7 010203 unguarded%3Dtrue$`));
    // the coordinator is back: idemctl reconcile records the journaled run, and it replays
    c2 = await h.startCoordinator(own.url, [], port);
    if (fs.existsSync(h.IDEMCTL)) {
      execFileSync(h.IDEMCTL, ['--addr', c2.address, '--tenant', 'shop', 'reconcile', journal], { stdio: 'pipe' });
      let ran = false;
      const again = await cl.runStep(key, () => { ran = true; return {}; }, { fingerprint: Buffer.from([1, 2, 3]) });
      assert.equal(ran, false);
      assert.equal(again.replayed, true);
      assert.equal(again.result.body.toString(), 'unguarded=true');
      assert.equal(again.result.code, 7);
    } else {
      test.diagnostic(`no idemctl at ${h.IDEMCTL}: reconcile not checked`);
    }
  } finally {
    cl.close();
    await c2.stop();
    own.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
