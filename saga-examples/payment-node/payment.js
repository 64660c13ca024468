#!/usr/bin/env node
'use strict';
// saga-payment-node — the order saga's payment participant in Node, a drop-in replacement of
// saga-examples/payment/payment.c: the same gRPC API (shop.v1.Payments: Charge, Refund, from
// saga-examples/proto), the same flags and SAGA_* environment (opts.js), the same tables in its
// own schema (--schema), and the same guarded step: idem-client's runStep (BeginStep, the
// action on PROCEED, CompleteStep, replay, wait, lease keep-alive) around the Postgres barrier
// (barrier.js). The SDK is required from client-lib/node (built by its deps.sh).
//
// Its own tables, in its own schema:
//   ledger   (id, global_id, customer, kind charge|refund, amount_cents, fence, at)
//   accounts (customer, charged_cents)   what each customer has been charged, net of refunds
//   idem_barrier                          the dedup rows (barrier.js, libidem_pg's table)
// The ledger deliberately has no unique constraint on (global_id, kind): exactly-once comes from
// the coordinator and the barrier, and the acceptance test would see a double charge.
// Step keys: (global_id, "payment", "charge", forward) and (…, compensation) for the refund. A
// charge over DECLINE_OVER_CENTS, or for a customer named "declined…", is declined: a definite
// failed, remembered by the barrier and replayed by the coordinator.
const crypto = require('node:crypto');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { Pool } = require('pg');
const { IdemClient } = require('../../client-lib/node');
const { parseOpts, crash, AFTER_BEGIN, AFTER_WRITE, AFTER_COMPLETE } = require('./opts');
const { barrierInit, barrierRun, CommitError } = require('./barrier');

const DECLINE_OVER_CENTS = 100000n;
const SCHEMA_SQL = `CREATE TABLE IF NOT EXISTS ledger (
 id bigserial PRIMARY KEY, global_id text NOT NULL, customer text NOT NULL,
 kind text NOT NULL CHECK (kind IN ('charge', 'refund')), amount_cents bigint NOT NULL,
 fence bigint NOT NULL, at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS ledger_global_id ON ledger (global_id);
CREATE TABLE IF NOT EXISTS accounts (
 customer text PRIMARY KEY, charged_cents bigint NOT NULL DEFAULT 0)`;

/** A pg pool on o.pg (a URL or a "key=value" conninfo) whose connections start in o.schema. */
function pgPool(o) {
  const conf = { max: o.threads, options: `-c search_path=${o.schema} -c client_min_messages=warning` };
  if (/^postgres(ql)?:\/\//.test(o.pg)) {
    conf.connectionString = o.pg;
  } else {
    const names = { host: 'host', hostaddr: 'host', port: 'port', user: 'user', password: 'password', dbname: 'database' };
    for (const m of o.pg.matchAll(/(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)/g)) {
      const v = m[2].startsWith("'") ? m[2].slice(1, -1).replace(/\\(.)/g, '$1') : m[2];
      if (names[m[1]]) conf[names[m[1]]] = v;
    }
  }
  const pool = new Pool(conf);
  pool.on('error', (e) => process.stderr.write(`payment: idle connection: ${e.message}\n`));
  return pool;
}

/** Creates the schema, the tables and idem_barrier, serialized between processes as payment.c does. */
async function setUp(pool, schema) {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('SELECT pg_advisory_xact_lock(7342190002)');
    await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await c.query('COMMIT');
    await c.query('SELECT pg_advisory_lock(7342190003)');
    try {
      await c.query(SCHEMA_SQL);
      await barrierInit(c);
    } finally {
      await c.query('SELECT pg_advisory_unlock(7342190003)');
    }
  } finally {
    c.release();
  }
}

const result = (outcome, code, status) => ({ outcome, code, body: Buffer.from(status) });
function retryable(what, e) {
  process.stderr.write(`payment: ${what}: ${e.message}\n`);
  return { outcome: 'retryable', code: 0 }; // rolled back: nothing happened
}

function chargeEffect(gid, customer, amount) {
  return async (db, attempt) => {
    if (BigInt(amount) > DECLINE_OVER_CENTS || customer.startsWith('declined'))
      return result('failed', 402, 'declined');
    try {
      await db.query(`INSERT INTO ledger (global_id, customer, kind, amount_cents, fence)
 VALUES ($1, $2, 'charge', $3, $4)`, [gid, customer, amount, String(attempt)]);
      await db.query(`INSERT INTO accounts (customer, charged_cents) VALUES ($1, $2)
 ON CONFLICT (customer) DO UPDATE SET charged_cents = accounts.charged_cents + EXCLUDED.charged_cents`,
      [customer, amount]);
    } catch (e) {
      return retryable('charge', e);
    }
    return result('succeeded', 200, 'charged');
  };
}

/** The compensation: refunds what the ledger says was charged for this saga. */
function refundEffect(gid) {
  return async (db, attempt) => {
    try {
      const r = await db.query(`SELECT customer, amount_cents::text AS amount FROM ledger
 WHERE global_id = $1 AND kind = 'charge' ORDER BY id LIMIT 1`, [gid]);
      if (r.rowCount === 0) return result('succeeded', 200, 'nothing_charged');
      const { customer, amount } = r.rows[0];
      await db.query(`INSERT INTO ledger (global_id, customer, kind, amount_cents, fence)
 VALUES ($1, $2, 'refund', $3, $4)`, [gid, customer, amount, String(attempt)]);
      await db.query('UPDATE accounts SET charged_cents = charged_cents - $2::bigint WHERE customer = $1',
        [customer, amount]);
    } catch (e) {
      return retryable('refund', e);
    }
    return result('succeeded', 200, 'refunded');
  };
}

function grpcError(code, message) {
  return Object.assign(new Error(message), { code });
}

/**
 * One guarded step: runStep (fingerprint = SHA-256 of the canonical request) whose action is the
 * barrier transaction between two crash points. Errors as sx_step_run: FAILED_PRECONDITION /
 * INVALID_ARGUMENT as they are, ABORTED, else UNAVAILABLE (try again).
 */
async function step(app, gid, phase, canonical, effect) {
  const { o, pool, idem } = app;
  const key = { globalId: gid, service: 'payment', operation: 'charge', phase };
  const where = `${key.service} ${key.operation}`;
  let appliedEarlier = false;
  let rep;
  try {
    rep = await idem.runStep(key, async (ctx) => {
      crash(o, AFTER_BEGIN, key.operation);
      let client;
      try {
        client = await pool.connect();
      } catch (e) {
        return retryable('database unavailable', e); // nothing written
      }
      let out;
      try {
        const br = await barrierRun(client, key, ctx.attempt, effect);
        out = br.rolledBack ? { outcome: 'retryable', code: 0 } : br.result;
        appliedEarlier = !!br.appliedEarlier;
        client.release();
      } catch (e) {
        process.stderr.write(`barrier: ${e.message}\n`);
        client.release(true); // the connection may be broken
        // a failed COMMIT may have committed: say so; anything else rolled back
        return { outcome: e instanceof CommitError ? 'unknown' : 'retryable', code: 0 };
      }
      crash(o, AFTER_WRITE, key.operation);
      return out;
    }, {
      fingerprint: crypto.createHash('sha256').update(canonical).digest(),
      deadlineMs: o.stepDeadlineMs, leaseMs: o.leaseMs, backoffBaseMs: 20, backoffMaxMs: 200,
    });
  } catch (e) {
    const c = e && e.code;
    if (c === 'STEP_FAILED') throw grpcError(grpc.status.UNAVAILABLE, `${where}: not done, try again`);
    const msg = `${where}: ${e && e.message}`;
    if (c === 'FAILED_PRECONDITION') throw grpcError(grpc.status.FAILED_PRECONDITION, msg);
    if (c === 'INVALID_ARGUMENT') throw grpcError(grpc.status.INVALID_ARGUMENT, msg);
    if (c === 'ABORTED') throw grpcError(grpc.status.ABORTED, msg);
    throw grpcError(grpc.status.UNAVAILABLE, msg);
  }
  if (rep.ran) crash(o, AFTER_COMPLETE, key.operation);
  const skipped = rep.decision === 'SKIP_NULL_COMPENSATION' || rep.decision === 'SKIP_ALREADY_COMPENSATED';
  return {
    status: skipped ? 'skipped' : Buffer.from(rep.result.body || '').subarray(0, 31).toString(),
    decision: rep.decision.toLowerCase(), attempt: rep.attempt, takeover: rep.takeover,
    ran: rep.ran, applied_earlier: appliedEarlier,
  };
}

function unary(fn) {
  return (call, cb) => {
    fn(call.request).then((r) => cb(null, r), (e) => cb({ code: e.code ?? grpc.status.INTERNAL,
      details: e.message }));
  };
}

async function main() {
  const o = parseOpts(process.argv.slice(2));
  const pool = pgPool(o);
  try {
    await setUp(pool, o.schema);
  } catch (e) {
    process.stderr.write(`payment: cannot set up schema ${o.schema}: ${e.message}\n`);
    process.exit(1);
  }
  let idem;
  try {
    idem = IdemClient.connect({ address: o.coordinator, tenant: o.tenant, deadlineMs: 3000 });
  } catch (e) {
    process.stderr.write(`cannot create the coordinator client: ${e.message}\n`);
    process.exit(1);
  }
  const app = { o, pool, idem };
  const def = protoLoader.loadSync('shop/v1/payments.proto', {
    includeDirs: [path.join(__dirname, '..', 'proto')], keepCase: true, longs: String,
    defaults: true,
  });
  const shop = grpc.loadPackageDefinition(def).shop.v1;
  const server = new grpc.Server();
  server.addService(shop.Payments.service, {
    Charge: unary(async (q) => {
      if (!q.global_id || !q.customer || !(BigInt(q.amount_cents || '0') > 0n))
        throw grpcError(grpc.status.INVALID_ARGUMENT,
          'global_id, customer and a positive amount_cents are required');
      const amount = String(BigInt(q.amount_cents));
      return step(app, q.global_id, 'forward', `charge\n${q.global_id}\n${q.customer}\n${amount}`,
        chargeEffect(q.global_id, q.customer, amount));
    }),
    Refund: unary(async (q) => {
      if (!q.global_id) throw grpcError(grpc.status.INVALID_ARGUMENT, 'global_id is required');
      return step(app, q.global_id, 'compensation', `refund\n${q.global_id}`, refundEffect(q.global_id));
    }),
  });
  server.bindAsync(o.listen, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) {
      process.stderr.write(`cannot listen on ${o.listen}\n`);
      process.exit(1);
    }
    process.stdout.write(`listening on ${o.listen}\n`);
  });
  let stopping = false;
  const stop = () => { // drain: running calls finish, then stop (at most 10 s)
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => server.forceShutdown(), 10000);
    server.tryShutdown(async () => {
      clearTimeout(force);
      idem.close();
      await pool.end().catch(() => {});
      process.exit(0);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => {
  process.stderr.write(`payment: ${e.stack || e}\n`);
  process.exit(1);
});
