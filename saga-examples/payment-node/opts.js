'use strict';
// opts.js — the command line of saga-examples/common/sx_svc.c in Node: the same flags, each also
// from SAGA_<FLAG> in the environment (the flag wins), the same defaults and refusals (usage on
// stderr, exit 2), and the crash points for fault injection (SIGKILL of this process).

const FLAGS = [
  ['--listen', 'SAGA_LISTEN'], ['--pg', 'SAGA_PG'], ['--schema', 'SAGA_SCHEMA'],
  ['--coordinator', 'SAGA_COORDINATOR'], ['--tenant', 'SAGA_TENANT'],
  ['--payments', 'SAGA_PAYMENTS'], ['--inventory', 'SAGA_INVENTORY'], ['--stock', 'SAGA_STOCK'],
  ['--threads', 'SAGA_THREADS'], ['--lease-ms', 'SAGA_LEASE_MS'], ['--crash', 'SAGA_CRASH'],
  ['--crash-rate', 'SAGA_CRASH_RATE'], ['--step-deadline-ms', 'SAGA_STEP_DEADLINE_MS'],
  ['--call-deadline-ms', 'SAGA_CALL_DEADLINE_MS'],
];
const POINTS = ['after_begin', 'after_write', 'after_complete'];
const PROG = 'saga-payment-node';

function usage(bad) {
  if (bad) process.stderr.write(`${PROG}: ${bad}\n`);
  process.stderr.write(
    `usage: ${PROG} --listen ADDR --pg URL --schema NAME --coordinator ADDR [--tenant T]\n` +
    '       [--threads N] [--lease-ms N] [--step-deadline-ms N] [--call-deadline-ms N]\n' +
    '       [--payments ADDR --inventory ADDR] [--stock sku=N,...]\n' +
    '       [--crash after_begin|after_write|after_complete[:OPERATION]] [--crash-rate P]\n');
  process.exit(2);
}

function num(flag, v, lo, hi) {
  const n = /^-?[0-9]+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < lo || n > hi) usage(`${flag}: not a number in [${lo}, ${hi}]: ${v}`);
  return n;
}

function apply(o, i, v) {
  const flag = FLAGS[i][0];
  switch (flag) {
    case '--threads': o.threads = num(flag, v, 1, 256); break;
    case '--lease-ms': o.leaseMs = num(flag, v, 0, 3600000); break;
    case '--step-deadline-ms': o.stepDeadlineMs = num(flag, v, 1, 3600000); break;
    case '--call-deadline-ms': o.callDeadlineMs = num(flag, v, 1, 3600000); break;
    case '--crash': {
      const c = v.indexOf(':');
      o.crashPoint = POINTS.indexOf(c < 0 ? v : v.slice(0, c));
      o.crashOperation = c < 0 ? '' : v.slice(c + 1);
      if (o.crashPoint < 0) usage('--crash: unknown point');
      break;
    }
    case '--crash-rate': {
      const r = v.trim() === '' ? NaN : Number(v);
      if (!(r >= 0 && r <= 1)) usage('--crash-rate: 0..1');
      o.crashRate = r;
      break;
    }
    default: o[flag.slice(2)] = v; // listen, pg, schema, coordinator, tenant, payments, inventory, stock
  }
}

function parseOpts(argv) {
  const o = { tenant: 'shop', threads: 8, leaseMs: 0, stepDeadlineMs: 10000, callDeadlineMs: 20000,
    crashPoint: -1, crashOperation: '', crashRate: 0 };
  FLAGS.forEach(([, env], i) => { if (process.env[env]) apply(o, i, process.env[env]); });
  for (let a = 0; a < argv.length; a++) {
    if (argv[a] === '--help') usage('');
    const i = FLAGS.findIndex(([f]) => f === argv[a]);
    if (i < 0) usage('unknown flag');
    if (a + 1 >= argv.length) usage('missing value');
    apply(o, i, argv[++a]);
  }
  if (!o.listen || !o.pg || !o.schema || !o.coordinator)
    usage('--listen, --pg, --schema and --coordinator are required');
  if (!/^[a-z0-9_]{1,63}$/.test(o.schema)) usage('--schema: 1-63 characters of [a-z0-9_]');
  return o;
}

const AFTER_BEGIN = 0, AFTER_WRITE = 1, AFTER_COMPLETE = 2;

/** SIGKILLs this process at point p when --crash or --crash-rate says so. */
function crash(o, p, operation) {
  let die = o.crashPoint === p && (!o.crashOperation || o.crashOperation === operation);
  if (o.crashRate > 0 && Math.random() < o.crashRate) die = true;
  if (!die) return;
  process.stderr.write(`fault injection: SIGKILL at ${POINTS[p]} of ${operation}\n`);
  process.kill(process.pid, 'SIGKILL');
}

module.exports = { parseOpts, crash, AFTER_BEGIN, AFTER_WRITE, AFTER_COMPLETE };
