// helpers.js — what the SDK's tests share: a private database per test file, coordinators on
// free loopback ports (started and stopped by PID), polling with a deadline.
// Environment: IDEM_TEST_PG_URL (a database we may use; extra ones get unique names),
// IDEM_COORDINATOR_BIN (the built coordinator), IDEM_SOURCE_DIR, IDEMCTL_BIN (optional).
'use strict';
const { spawn, execFileSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const SOURCE_DIR = process.env.IDEM_SOURCE_DIR || path.resolve(__dirname, '..', '..', '..');
const COORDINATOR = process.env.IDEM_COORDINATOR_BIN || path.join(SOURCE_DIR, 'build', 'server', 'idem-coordinator');
const IDEMCTL = process.env.IDEMCTL_BIN || path.join(SOURCE_DIR, 'build', 'tools', 'idemctl', 'idemctl');
const PG_URL = process.env.IDEM_TEST_PG_URL || '';

function requireEnv(t) {
  if (!PG_URL) throw new Error('IDEM_TEST_PG_URL is not set');
  if (!fs.existsSync(COORDINATOR)) throw new Error(`no coordinator at ${COORDINATOR} (IDEM_COORDINATOR_BIN)`);
  return t;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls fn until it returns a truthy value (returned) or deadlineMs passes (throws). */
async function until(what, fn, deadlineMs = 10000, everyMs = 50) {
  const end = Date.now() + deadlineMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await sleep(everyMs);
  }
}

function dbUrl(name) {
  const u = new URL(PG_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A fresh database for this test file; drop() removes it. */
function createDatabase() {
  requireEnv();
  const name = `idem_node_${process.pid}_${crypto.randomBytes(4).toString('hex')}`;
  execFileSync('psql', [PG_URL, '-q', '-v', 'ON_ERROR_STOP=1', '-c', `CREATE DATABASE ${name}`], { stdio: 'pipe' });
  return {
    name,
    url: dbUrl(name),
    drop() {
      try {
        execFileSync('psql', [PG_URL, '-q', '-c', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`], { stdio: 'pipe' });
      } catch { /* best effort */ }
    },
  };
}

/** Starts a single-node coordinator on a free port; resolves once it leads with a healthy store. */
async function startCoordinator(pgUrl, extraArgs = [], port) {
  requireEnv();
  port = port || (await freePort());
  const address = `127.0.0.1:${port}`;
  const logPath = path.join(os.tmpdir(), `idem-node-test-${process.pid}-${port}.log`);
  const log = fs.openSync(logPath, 'w');
  const proc = spawn(COORDINATOR, ['--listen', address, '--pg', pgUrl, '--reaper-interval', '0', '--workers', '4', ...extraArgs],
    { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  let exited = false;
  proc.on('exit', () => { exited = true; });
  const c = {
    address, port, proc, logPath,
    log: () => fs.readFileSync(logPath, 'utf8'),
    async stop() {
      if (exited) return;
      const gone = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      const t = setTimeout(() => { if (!exited) proc.kill('SIGKILL'); }, 5000);
      await gone;
      clearTimeout(t);
    },
  };
  const { IdemClient } = require('..');
  const probe = IdemClient.connect({ address, deadlineMs: 500 });
  try {
    await until(`coordinator on ${address} to lead`, async () => {
      if (exited) throw new Error(`coordinator exited:\n${c.log()}`);
      const s = await probe.getStatus();
      return s.leader && s.storeOk;
    }, 20000, 100);
  } catch (e) {
    await c.stop();
    throw e;
  } finally {
    probe.close();
  }
  return c;
}

function tmpDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

module.exports = {
  SOURCE_DIR, COORDINATOR, IDEMCTL, PG_URL, freePort, sleep, until, createDatabase, startCoordinator, tmpDir,
};
