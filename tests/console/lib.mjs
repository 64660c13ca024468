// lib.mjs — what the console tests share: a coordinator of their own (Postgres-backed, from
// $IDEM_TEST_PG_URL, with --console and a tokens file), the libidem fixture (console_fixture),
// a small cookie-keeping HTTP client, and waiting on conditions with deadlines.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { request as httpsRequest } from 'node:https';

export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (scripts/test sets it)`);
  return v;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

export async function waitFor(what, fn, ms = 30000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try { const v = await fn(); if (v) return v; } catch (e) { last = e; }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? ': ' + last.message : ''}`);
    await new Promise(r => setTimeout(r, 50));
  }
}

export const tokens = () => ({
  admin: 'adm-' + randomBytes(16).toString('hex'),
  admin2: 'adm2-' + randomBytes(16).toString('hex'),
  service: 'svc-' + randomBytes(16).toString('hex'),
});

// Every coordinator started is killed when this process exits, whatever happened.
const children = new Set();
process.on('exit', () => { for (const c of children) try { c.kill('SIGKILL'); } catch {} });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(1));

// Starts idem-coordinator with --console on free ports; tenant is fresh. opts.tokens: false =
// development mode; opts.etcd, nodeId, prefix: high availability. Returns { grpc, url, tenant, tok, stop(), log() }.
export async function startCoordinator(opts = {}) {
  const bin = env('IDEM_COORDINATOR_BIN');
  // high availability raises the fence epoch in its database: a database of its own, so that
  // the shared test database stays unfenced for the suites after this one
  const pg = opts.same ? opts.same.pg : opts.etcd ? freshDatabase() : env('IDEM_TEST_PG_URL');
  const dir = mkdtempSync(join(tmpdir(), 'idem-console-'));
  const tenant = opts.same ? opts.same.tenant : 'tc-' + randomBytes(6).toString('hex');
  const tok = opts.same ? opts.same.tok : tokens(); // opts.same: the tokens of another node
  const args = ['--pg', pg, '--reaper-interval', '0'];
  if (opts.etcd) args.push('--etcd', opts.etcd, '--node-id', opts.nodeId, '--election-ttl', '2',
    '--election-prefix', opts.prefix);
  if (opts.tls) { // a CA and a server certificate for 127.0.0.1, as tests/security makes them
    const o = (...a) => execFileSync('openssl', a, { cwd: dir, stdio: 'ignore' });
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
    o('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=idem console test CA');
    o('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=idem console test');
    writeFileSync(join(dir, 'server.ext'), 'basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n');
    o('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', 'server.pem', '-days', '2', '-extfile', 'server.ext');
    args.push('--tls-cert', join(dir, 'server.pem'), '--tls-key', join(dir, 'server.key'));
  }
  if (opts.tokens !== false) {
    writeFileSync(join(dir, 'tokens'), `${tok.admin} ${tenant} admin\n${tok.admin2} ${tenant} admin\n` +
      `${tok.service} ${tenant} service\n`, { mode: 0o600 });
    args.push('--tokens', join(dir, 'tokens'));
  }
  for (let tries = 0; ; tries++) { // a free port is free until someone else binds it
    const gport = await freePort(), cport = await freePort();
    const logPath = join(dir, 'coordinator.log');
    const out = (await import('node:fs')).openSync(logPath, 'w');
    const child = spawn(bin, [...args, '--listen', `127.0.0.1:${gport}`, '--console', `127.0.0.1:${cport}`],
      { stdio: ['ignore', out, out] });
    let exited = null;
    children.add(child);
    child.on('exit', (code, sig) => { exited = code ?? sig; children.delete(child); });
    const url = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${cport}`;
    const ca = opts.tls ? readFileSync(join(dir, 'ca.pem')) : null;
    const log = () => readFileSync(logPath, 'utf8');
    try {
      await waitFor('the console and gRPC to answer', async () => {
        if (exited !== null) throw new Error(`coordinator exited (${exited}):\n${log()}`);
        const r = ca ? await httpsGet(url + '/style.css', ca) : await fetch(url + '/style.css');
        return r.status === 200 && log().includes('listening');
      });
    } catch (e) {
      child.kill('SIGKILL');
      if (tries < 4 && /address already in use|cannot listen/i.test(log())) continue;
      rmSync(dir, { recursive: true, force: true });
      throw e;
    }
    const stop = async () => {
      if (exited === null) {
        child.kill('SIGTERM');
        await waitFor('the coordinator to exit', () => exited !== null, 20000)
          .catch(() => child.kill('SIGKILL'));
      }
      if (exited !== 0) console.log(`coordinator exit ${exited}; its log:\n${log()}`);
      rmSync(dir, { recursive: true, force: true });
      return exited;
    };
    return { grpc: `127.0.0.1:${gport}`, url, tenant, tok, stop, log, dir, ca, pg };
  }
}

// A new database next to $IDEM_TEST_PG_URL's (same server and user): its URL.
function freshDatabase() {
  const base = env('IDEM_TEST_PG_URL');
  const name = 'idem_console_' + randomBytes(6).toString('hex');
  execFileSync('psql', ['-qX', base, '-c', `CREATE DATABASE ${name}`], { stdio: 'ignore' });
  const u = new URL(base);
  u.pathname = '/' + name;
  return u.toString();
}

// A private etcd (leader election) on free ports: { url, stop() }.
export async function startEtcd() {
  const dir = mkdtempSync(join(tmpdir(), 'idem-console-etcd-'));
  const cport = await freePort(), pport = await freePort();
  const url = `http://127.0.0.1:${cport}`, peer = `http://127.0.0.1:${pport}`;
  const child = spawn(process.env.IDEM_ETCD_BIN || '/usr/bin/etcd', ['--name', 'default',
    '--data-dir', join(dir, 'data'), '--listen-client-urls', url, '--advertise-client-urls', url,
    '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
    '--initial-cluster', `default=${peer}`, '--log-level', 'error'], { stdio: 'ignore' });
  let exited = null;
  children.add(child);
  child.on('exit', c => { exited = c; children.delete(child); });
  await waitFor('etcd to answer', async () => {
    if (exited !== null) throw new Error(`etcd exited (${exited})`);
    return (await fetch(url + '/health')).ok;
  }, 15000);
  return {
    url,
    stop: async () => {
      if (exited === null) child.kill('SIGTERM');
      await waitFor('etcd to exit', () => exited !== null, 10000).catch(() => child.kill('SIGKILL'));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// One HTTPS request verified against ca: { status, headers (lower-case names), text }.
export function httpsGet(url, ca, { method = 'GET', form, cookie } = {}) {
  return new Promise((resolve, reject) => {
    const body = form ? new URLSearchParams(form).toString() : undefined;
    const headers = body ? { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) } : {};
    if (cookie) headers.cookie = cookie;
    const req = httpsRequest(url, {
      method, ca, headers,
    }, res => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', d => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

// Runs console_fixture (libidem) and parses its JSON line.
export function fixture(grpc, token, ...args) {
  const out = execFileSync(env('CONSOLE_FIXTURE'), [grpc, token ?? '-', ...args], { encoding: 'utf8' });
  return JSON.parse(out);
}

// A cookie-keeping HTTP client (one session), no redirects followed.
export class Session {
  constructor(base) { this.base = base; this.cookies = {}; }
  async req(method, path, form) {
    const headers = {};
    const c = Object.entries(this.cookies).map(([k, v]) => `${k}=${v}`).join('; ');
    if (c) headers.cookie = c;
    let body;
    if (form) { // an object, or a string already encoded (bytes a browser would not send)
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = typeof form === 'string' ? form : new URLSearchParams(form).toString();
    }
    const r = await fetch(this.base + path, { method, headers, body, redirect: 'manual' });
    for (const sc of r.headers.getSetCookie()) {
      const [kv] = sc.split(';');
      const i = kv.indexOf('=');
      this.cookies[kv.slice(0, i)] = kv.slice(i + 1);
    }
    return { status: r.status, headers: r.headers, text: await r.text() };
  }
  get(path) { return this.req('GET', path); }
  post(path, form) { return this.req('POST', path, form); }
  async login(token) { // as a browser does: the form (its CSRF cookie and token), then the post
    const csrf = await this.csrf('/login');
    const r = await this.post('/login', { csrf, token });
    if (r.status !== 303) throw new Error(`login: status ${r.status}`);
    return r;
  }
  async csrf(path = '/') {
    const r = await this.get(path);
    const m = r.text.match(/name="csrf" value="([0-9a-f]{64})"/);
    if (!m) throw new Error(`no csrf token on ${path}`);
    return m[1];
  }
}

// The hidden inputs of the form with id `id` in html, their values HTML-unescaped (what a browser
// submits).
export function hiddenFields(html, id) {
  const form = html.slice(html.indexOf(`id="${id}"`));
  const end = form.indexOf('</form>');
  const out = {};
  const unesc = v => v.replace(/&#(\d+);/g, (_, d) => String.fromCodePoint(+d))
    .replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
  for (const m of form.slice(0, end).matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g))
    out[m[1]] = unesc(m[2]);
  return out;
}

// A tiny test runner: each case is reported; the process fails when one does.
export async function run(cases) {
  let failed = 0;
  for (const [name, fn] of cases) {
    const t0 = Date.now();
    try {
      await fn();
      console.log(`ok    ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL  ${name}: ${e.stack || e}`);
    }
  }
  console.log(failed ? `${failed} of ${cases.length} failed` : `all ${cases.length} passed`);
  return failed;
}

export function assert(cond, msg) { if (!cond) throw new Error('assertion failed: ' + msg); }
export function eq(a, b, msg) { if (a !== b) throw new Error(`${msg}: expected ${JSON.stringify(b)}, got ${JSON.stringify(a)}`); }
