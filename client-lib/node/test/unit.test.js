// unit.test.js — the SDK's checks that need no coordinator: bad input is an INVALID_ARGUMENT
// naming the field and no call is made (the client points at a port where nothing listens, so
// a call would end UNAVAILABLE, not INVALID_ARGUMENT); the journal line is libidem's format.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { IdemClient, IdemError, journalLine, encodeField } = require('..');

const DEAD = '127.0.0.1:1'; // nothing listens there

function invalidField(field) {
  return (e) => {
    assert.ok(e instanceof IdemError, `not an IdemError: ${e}`);
    assert.equal(e.code, 'INVALID_ARGUMENT');
    assert.equal(e.field, field);
    assert.match(e.message, new RegExp(`^${field.replace('.', '\\.')}: `));
    return true;
  };
}

test('connect: a malformed address, tenant or TLS file names the field', () => {
  for (const a of ['', 'localhost', 'host:', 'host:0', 'host:70000', 'a b:1', 'h:1,', ':50051']) {
    if (a === 'h:1,') { assert.doesNotThrow(() => IdemClient.connect({ address: a }).close()); continue; }
    assert.throws(() => IdemClient.connect({ address: a }), invalidField('address'), a);
  }
  assert.throws(() => IdemClient.connect({ address: [] }), invalidField('address'));
  assert.throws(() => IdemClient.connect({ address: DEAD, tenant: 'a b' }), invalidField('tenant'));
  assert.throws(() => IdemClient.connect({ address: DEAD, tlsCa: '/nonexistent/ca.pem' }), invalidField('tlsCa'));
  assert.throws(() => IdemClient.connect({ address: DEAD, tlsCert: __filename }), invalidField('tlsKey'));
  const c = IdemClient.connect({ address: ['127.0.0.1:1', '[::1]:2', 'coord-2.example:50051'] });
  assert.equal(c.transport.endpoints, 3);
  c.close();
});

test('calls: empty key parts, a body over 64 KiB, a long fingerprint: an error naming the field, no call', async () => {
  const c = IdemClient.connect({ address: DEAD, deadlineMs: 3000 });
  const key = { globalId: 'g-1', service: 'pay', operation: 'charge' };
  const t0 = Date.now();
  await assert.rejects(c.lookup({ ...key, globalId: '' }), invalidField('key.globalId'));
  await assert.rejects(c.lookup({ ...key, service: '' }), invalidField('key.service'));
  await assert.rejects(c.lookup({ ...key, operation: '' }), invalidField('key.operation'));
  await assert.rejects(c.lookup({ ...key, service: 'Pay' }), invalidField('key.service'));
  await assert.rejects(c.lookup({ ...key, globalId: 'x'.repeat(129) }), invalidField('key.globalId'));
  await assert.rejects(c.lookup({ ...key, phase: 'sideways' }), invalidField('key.phase'));
  await assert.rejects(c.completeStep(key, 1, { outcome: 'succeeded', body: Buffer.alloc(65537) }), invalidField('body'));
  await assert.rejects(c.completeStep(key, 1, { outcome: 'done' }), invalidField('outcome'));
  await assert.rejects(c.completeStep(key, 0, { outcome: 'succeeded' }), invalidField('attempt'));
  await assert.rejects(c.beginStep(key, { fingerprint: Buffer.alloc(65) }), invalidField('fingerprint'));
  await assert.rejects(c.beginStep(key, { waitMs: 60001 }), invalidField('waitMs'));
  await assert.rejects(c.getSaga(''), invalidField('globalId'));
  await assert.rejects(c.beginSaga({ requestId: '' }), invalidField('requestId'));
  let ran = false;
  await assert.rejects(c.runStep({ ...key, operation: '' }, () => { ran = true; return {}; }), invalidField('key.operation'));
  await assert.rejects(c.runStep(key, () => { ran = true; return {}; }, { fingerprint: 'f'.repeat(65) }), invalidField('fingerprint'));
  assert.equal(ran, false);
  assert.ok(Date.now() - t0 < 1000, 'validation must not wait on the network');
  // and a real call to the same client does go out (and fails as a call does)
  await assert.rejects(c.lookup(key, { deadlineMs: 300 }), (e) => ['UNAVAILABLE', 'DEADLINE_EXCEEDED'].includes(e.code));
  c.close();
});

test('cancellation: an aborted signal stops a call at once with CANCELLED', async () => {
  const c = IdemClient.connect({ address: DEAD, deadlineMs: 10000 });
  const ac = new AbortController();
  const t0 = Date.now();
  setTimeout(() => ac.abort(), 100);
  await assert.rejects(c.lookup({ globalId: 'g', service: 's', operation: 'o' }, { signal: ac.signal }),
    (e) => e instanceof IdemError && e.code === 'CANCELLED');
  assert.ok(Date.now() - t0 < 2000);
  await assert.rejects(c.lookup({ globalId: 'g', service: 's', operation: 'o' }, { signal: AbortSignal.abort() }),
    (e) => e.code === 'CANCELLED');
  c.close();
});

test('journal: libidem line format (idem.h), percent-encoded fields, "-" for empty', () => {
  const key = { globalId: 'order:42', service: 'pay', operation: 'charge', phase: 'forward' };
  const line = journalLine(1700000000123, 'client', 'default', key, Buffer.from([0xab, 0x01]),
    { outcome: 'succeeded', code: 201, body: Buffer.from('{"ok": 1}\n'), completedUnixMs: 0 });
  assert.equal(line, 'idem1 1700000000123 client default order:42 pay charge forward succeeded 201 ab01 %7B%22ok%22:%201%7D%0A\n');
  const empty = journalLine(5, 'server', 't', { ...key, phase: 'compensation' }, Buffer.alloc(0),
    { outcome: 'unknown', code: -1, body: Buffer.alloc(0), completedUnixMs: 0 });
  assert.equal(empty, 'idem1 5 server t order:42 pay charge compensation unknown -1 - -\n');
  assert.equal(encodeField('-'), '%2D');
  assert.equal(encodeField('a-b/c_d.e:f'), 'a-b/c_d.e:f');
  assert.equal(encodeField('é'), '%C3%A9');
});
