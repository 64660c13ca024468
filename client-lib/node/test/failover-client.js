#!/usr/bin/env node
// failover-client.js — runs steps through idem-client's step helper (runStep) for the failover
// test (tests/sdk/failover.py) and the per-SDK figures (bench/sdk-bench). The same command line
// as client-lib/go/cmd/idem-failover-client and client-lib/python/tests/failover_client.py:
//
//   node test/failover-client.js --addresses LEADER,STANDBY --tenant T --ledger FILE --prefix P
//       --steps N --duration S [--repeat 3] [--workers 4] [--lease-ms 3000] [--bench]
//
// Failover mode: keys P-0 … P-(N-1), each run --repeat times (rounds in order, so that later
// rounds replay); --workers concurrent loops take the runs in turn. The action appends
// "KEY ATTEMPT" to the ledger and fsyncs it before returning, so the ledger counts every
// execution. A run that ends in an error is counted (errors by code) and run again until it
// settles or the --duration bound passes (then it is "unsettled").
//
// Bench mode (--bench): --workers (16 unless given) run a new key each, with an action that does
// nothing, for --duration seconds; the ledger is not written.
//
// Prints one JSON line: sdk, mode, runs, ran, replayed, takeovers, errors {code: n}, unsettled,
// elapsed_ms, and in bench mode pairs_per_s, p50_ms, p99_ms. Exits 0 when the summary was
// printed (the caller judges it), 2 on bad arguments. Needs the built package (npm run build).
'use strict';
const fs = require('fs');
const path = require('path');
const { IdemClient } = require(path.join(__dirname, '..'));

function usage(msg) {
  process.stderr.write(`failover-client.js: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const a = { addresses: '', tenant: '', ledger: '', prefix: '', steps: 0, duration: 30, repeat: 3,
    workers: 0, leaseMs: 3000, bench: false };
  const names = { '--addresses': 'addresses', '--tenant': 'tenant', '--ledger': 'ledger',
    '--prefix': 'prefix', '--steps': 'steps', '--duration': 'duration', '--repeat': 'repeat',
    '--workers': 'workers', '--lease-ms': 'leaseMs' };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--bench') { a.bench = true; continue; }
    const name = names[argv[i]];
    if (!name || i + 1 >= argv.length) usage(`unknown or incomplete argument ${argv[i]}`);
    const v = argv[++i];
    a[name] = typeof a[name] === 'number' ? Number(v) : v;
    if (typeof a[name] === 'number' && !Number.isFinite(a[name])) usage(`${argv[i - 1]}: not a number`);
  }
  if (!a.addresses || !a.tenant || !a.prefix) usage('--addresses, --tenant and --prefix are required');
  if (!a.bench && (!a.ledger || a.steps <= 0 || a.repeat <= 0))
    usage('failover mode needs --ledger, --steps > 0 and --repeat > 0');
  if (a.duration <= 0) usage('--duration must be > 0');
  if (a.workers <= 0) a.workers = a.bench ? 16 : 4;
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const client = IdemClient.connect({ address: a.addresses, tenant: a.tenant });
  const ledger = a.bench ? null : fs.openSync(a.ledger, 'a');
  const s = { sdk: 'node', mode: a.bench ? 'bench' : 'failover', runs: 0, ran: 0, replayed: 0,
    takeovers: 0, errors: {}, unsettled: 0 };
  const lat = [];
  const start = Date.now();
  const end = start + a.duration * 1000;
  const total = a.steps * a.repeat;
  let next = 0;

  async function worker() {
    for (;;) {
      const n = next++;
      let gid;
      if (a.bench) {
        if (Date.now() >= end) return;
        gid = `${a.prefix}-${n}`;
      } else {
        if (n >= total) return;
        gid = `${a.prefix}-${n % a.steps}`;
      }
      const key = { globalId: gid, service: 'failover', operation: 'step' };
      const action = (ctx) => {
        if (ledger !== null) {
          fs.writeSync(ledger, `${gid} ${ctx.attempt}\n`);
          fs.fsyncSync(ledger);
        }
        return { outcome: 'succeeded', code: 200, body: gid };
      };
      for (;;) {
        const left = end - Date.now();
        if (left <= 0) { s.unsettled++; break; }
        const t0 = process.hrtime.bigint();
        let rep;
        try {
          rep = await client.runStep(key, action, { deadlineMs: a.bench ? 10000 : Math.min(10000, left), leaseMs: a.leaseMs });
        } catch (e) {
          const code = e && e.code ? e.code : 'EXCEPTION';
          s.errors[code] = (s.errors[code] || 0) + 1;
          if (a.bench) break;
          continue;
        }
        lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
        s.runs++;
        if (rep.ran) s.ran++;
        if (rep.replayed) s.replayed++;
        if (rep.takeover) s.takeovers++;
        break;
      }
    }
  }

  await Promise.all(Array.from({ length: a.workers }, worker));
  const elapsed = Date.now() - start;
  s.elapsed_ms = elapsed;
  if (a.bench && lat.length > 0) {
    lat.sort((x, y) => x - y);
    s.pairs_per_s = s.runs / (elapsed / 1000);
    s.p50_ms = lat[Math.floor(0.50 * (lat.length - 1))];
    s.p99_ms = lat[Math.floor(0.99 * (lat.length - 1))];
  }
  if (ledger !== null) fs.closeSync(ledger);
  client.close();
  process.stdout.write(JSON.stringify(s) + '\n');
}

main().catch((e) => {
  process.stderr.write(`failover-client.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
