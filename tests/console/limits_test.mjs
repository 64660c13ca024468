// limits_test.mjs — the console under hostile load (docs/limits.md "Console"): sessions bound
// per token (and per client address in development mode), slow clients (a deadline for a whole
// request, a per-address connection cap, the page answering with 1,000 slow connections open),
// TLS 1.2 or newer, and the development-mode Host check. Against coordinators of its own; the
// figures it prints are the ones docs/limits.md quotes.
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { Agent, request } from 'node:http';
import { startCoordinator, Session, run, assert, eq, waitFor } from './lib.mjs';

process.on('unhandledRejection', e => { console.log(`FAIL  ${e.stack || e}`); process.exit(1); });
const co = await startCoordinator();
const dev = await startCoordinator({ tokens: false });
const tls = await startCoordinator({ tls: true });
const port = u => Number(new URL(u).port);

// One plain HTTP request from localAddress: { status, cookie }.
function get(base, path, { from = '127.0.0.1', cookie, host, agent, timeout = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const headers = {};
    if (cookie) headers.cookie = cookie;
    if (host) headers.host = host;
    const q = request({ host: '127.0.0.1', port: port(base), path, localAddress: from, headers, agent }, r => {
      r.resume();
      r.on('end', () => resolve({ status: r.statusCode, cookie: (r.headers['set-cookie'] || [])[0] }));
    }).on('error', reject);
    q.setTimeout(timeout, () => q.destroy(new Error(`no answer within ${timeout} ms`)));
    q.end();
  });
}

// n requests, `width` at a time.
async function many(n, width, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) await fn(next++);
  }));
}

// A connection from `from` that stays open until closed; .closedAt is set when the server ends it.
function open(from) {
  return new Promise((resolve, reject) => {
    const s = netConnect({ host: '127.0.0.1', port: port(co.url), localAddress: from });
    s.closedAt = null;
    s.on('close', () => { s.closedAt = Date.now(); });
    s.on('error', () => {});
    s.on('data', () => {});
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

const failed = await run([
  ['sessions: 10,000 logins with the service token leave the admin logged in', async () => {
    const admin = new Session(co.url);
    await admin.login(co.tok.admin);
    const first = new Session(co.url);
    await first.login(co.tok.service);
    const t0 = Date.now();
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    const form = new Session(co.url); // one login form: its CSRF cookie and token serve every post
    const csrf = await form.csrf('/login');
    const body = new URLSearchParams({ csrf, token: co.tok.service }).toString();
    const cookie = `idem_login=${form.cookies.idem_login}`;
    await many(10000, 16, () => new Promise((resolve, reject) => {
      request({ host: '127.0.0.1', port: port(co.url), path: '/login', method: 'POST', agent,
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': body.length, cookie } }, r => {
        r.resume();
        r.on('end', () => r.statusCode === 303 ? resolve() : reject(new Error(`login: ${r.statusCode}`)));
      }).on('error', reject).end(body);
    }));
    agent.destroy();
    const o = await admin.get('/');
    console.log(`  10,000 service logins in ${Date.now() - t0} ms; the admin's session: status ${o.status}`);
    eq(o.status, 200, "the admin's session after 10,000 logins with another token");
    assert(o.text.includes('· admin'), 'still the admin');
    eq((await first.get('/')).status, 303, "the service token's oldest session was the one evicted");
  }],
  ['sessions (development mode): 5,000 cookie-less requests from one address leave another address\'s session', async () => {
    const mine = await get(dev.url, '/?tenant=kept', { from: '127.0.0.2' });
    eq(mine.status, 200, 'first page');
    const cookie = mine.cookie.split(';')[0];
    const agent = new Agent({ keepAlive: true, maxSockets: 16, localAddress: '127.0.0.1' });
    await many(5000, 16, async () => eq((await get(dev.url, '/nowhere', { agent })).status, 404, 'cookie-less'));
    agent.destroy();
    const again = await get(dev.url, '/', { from: '127.0.0.2', cookie });
    eq(again.status, 200, 'page');
    eq(again.cookie, undefined, 'the session is still known (no new cookie)');
  }],
  ['slow clients: a request must arrive whole within the deadline, trickled headers or body', async () => {
    const t0 = Date.now();
    const hdr = await open('127.0.0.1'), body = await open('127.0.0.1');
    hdr.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    body.write('POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n');
    const tick = setInterval(() => {
      if (!hdr.closedAt) hdr.write(`X-Slow-${Date.now()}: 1\r\n`);
      if (!body.closedAt) body.write('a');
    }, 1000);
    try {
      await waitFor('the server to close both', () => hdr.closedAt && body.closedAt, 20000);
    } finally {
      clearInterval(tick);
      hdr.destroy();
      body.destroy();
    }
    const h = hdr.closedAt - t0, b = body.closedAt - t0;
    console.log(`  trickled headers closed after ${h} ms, trickled body after ${b} ms`);
    assert(h >= 9000 && b >= 9000, 'not before the deadline (10 s)');
  }],
  ['slow clients: one address may hold at most 64 connections', async () => {
    const socks = [];
    try {
      for (let i = 0; i < 84; i++) socks.push(await open('127.0.0.3'));
      await waitFor('the connections over the cap to be closed', () => socks.filter(s => s.closedAt).length >= 20, 5000);
      const closed = socks.filter(s => s.closedAt).length;
      console.log(`  84 connections from one address: ${closed} closed at once, ${84 - closed} kept`);
      eq(closed, 20, 'closed');
      eq((await get(co.url, '/login')).status, 200, 'another address is served');
    } finally {
      for (const s of socks) s.destroy();
    }
  }],
  ['slow clients: with 1,000 slow connections open the console answers in < 1 s', async () => {
    const admin = new Session(co.url);
    await admin.login(co.tok.admin);
    const cookie = `idem_session=${admin.cookies.idem_session}`;
    const socks = [];
    let tick;
    try {
      for (let i = 0; i < 1000; i++) { // 40 addresses of 25: all under the per-address cap
        const s = await open(`127.0.1.${10 + (i % 40)}`);
        s.write('GET / HTTP/1.1\r\n');
        socks.push(s);
      }
      tick = setInterval(() => { for (const s of socks) if (!s.closedAt) s.write(`X-Slow: ${Date.now()}\r\n`); }, 2000);
      const times = [];
      for (let i = 0; i < 5; i++) {
        const t = Date.now();
        const r = await get(co.url, '/', { cookie, timeout: 5000 });
        eq(r.status, 200, `page ${i}`);
        times.push(Date.now() - t);
      }
      const open_ = socks.filter(s => !s.closedAt).length;
      console.log(`  ${open_} slow connections open; the overview answered in ${times.join(', ')} ms`);
      eq(open_, 1000, 'the slow connections are all still open');
      assert(Math.max(...times) < 1000, `every page under 1 s: ${times}`);
    } finally {
      clearInterval(tick);
      for (const s of socks) s.destroy();
    }
  }],
  ['TLS: 1.0 and 1.1 refused, 1.2 and 1.3 accepted', async () => {
    const hello = v => new Promise(resolve => {
      const s = tlsConnect({ host: '127.0.0.1', port: port(tls.url), ca: tls.ca, servername: 'localhost',
        minVersion: v, maxVersion: v, ciphers: 'DEFAULT@SECLEVEL=0' });
      s.once('secureConnect', () => { const got = s.getProtocol(); s.destroy(); resolve(got); });
      s.once('error', e => { s.destroy(); resolve(`refused (${e.code || e.message})`); });
    });
    const got = {};
    for (const v of ['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3']) got[v] = await hello(v);
    console.log(`  ${JSON.stringify(got)}`);
    assert(got.TLSv1.startsWith('refused') && got['TLSv1.1'].startsWith('refused'), 'old versions refused');
    eq(got['TLSv1.2'], 'TLSv1.2', 'TLS 1.2');
    eq(got['TLSv1.3'], 'TLSv1.3', 'TLS 1.3');
  }],
  ['development mode: a bracketed Host must be an IPv6 address', async () => {
    const p = port(dev.url);
    eq((await get(dev.url, '/nowhere', { host: '[evil.example]' })).status, 403, '[evil.example]');
    eq((await get(dev.url, '/nowhere', { host: `[evil.example]:${p}` })).status, 403, '[evil.example]:port');
    eq((await get(dev.url, '/nowhere', { host: `[::1]x.evil.example:${p}` })).status, 403, 'text after ]');
    eq((await get(dev.url, '/nowhere', { host: `[::1]:${p}` })).status, 404, '[::1]:port');
    eq((await get(dev.url, '/nowhere', { host: '[::1]' })).status, 404, '[::1]');
  }],
]);

const codes = [await co.stop(), await dev.stop(), await tls.stop()];
if (codes.some(c => c !== 0)) { console.log(`coordinator exit: ${codes}`); process.exit(1); }
process.exit(failed ? 1 : 0);
