// http_test.mjs — the console's HTTP layer without a browser (fast): status codes, security
// headers, cookies, escaping, filters and paging, CSRF and role refusals, the two-step
// resolution, policies, an expired result's body, logout, development mode, records no
// attempt finished (null compensation, abandoned forward) said as such. Against a
// coordinator of its own.
import { startCoordinator, startEtcd, fixture, Session, run, assert, eq, httpsGet, waitFor, hiddenFields, env } from './lib.mjs';
import { execFileSync } from 'node:child_process';

process.on('unhandledRejection', e => { console.log(`FAIL  ${e.stack || e}`); process.exit(1); });
const co = await startCoordinator();
const dev = await startCoordinator({ tokens: false });
const tls = await startCoordinator({ tls: true });
const { tok } = co;
const scene = fixture(co.grpc, tok.admin, 'scene');
const gid = scene.gid;
const stepPath = (svc, op) => `/steps/${gid}/${svc}/${op}/forward`;
const admin = new Session(co.url);
const stateOf = (svc, op) => fixture(co.grpc, tok.admin, 'state', gid, svc, op).state;
const auditCount = () => fixture(co.grpc, tok.admin, 'audit', gid).entries;
const stateOf2 = g => fixture(co.grpc, tok.admin, 'state', g, 'shipping', 'book').state;

function securityHeaders(r, what) {
  assert((r.headers.get('content-security-policy') || '').startsWith("default-src 'self'"), `${what}: CSP`);
  eq(r.headers.get('x-frame-options'), 'DENY', `${what}: X-Frame-Options`);
  eq(r.headers.get('x-content-type-options'), 'nosniff', `${what}: X-Content-Type-Options`);
}

const failed = await run([
  ['without a session: pages send to /login, a POST is refused', async () => {
    const anon = new Session(co.url);
    const r = await anon.get('/');
    eq(r.status, 303, 'GET /');
    eq(r.headers.get('location'), '/login', 'redirect');
    securityHeaders(r, 'redirect');
    eq((await anon.post(stepPath('payment', 'charge') + '/resolve', { outcome: 'succeeded', reason: 'x' })).status, 403, 'POST');
    const l = await anon.get('/login');
    eq(l.status, 200, 'GET /login');
    securityHeaders(l, '/login');
  }],
  ['a wrong token is refused without saying why, and never echoed or logged', async () => {
    const bodies = [];
    for (const t of ['short', 'x'.repeat(40), tok.admin.slice(0, -1) + 'z']) {
      const s = new Session(co.url);
      const r = await s.post('/login', { csrf: await s.csrf('/login'), token: t });
      eq(r.status, 401, `login with ${t.length} chars`);
      assert(!(r.headers.get('set-cookie') || '').includes('idem_session'), 'no session cookie on a refusal');
      assert(r.text.includes('Login refused.'), 'says refused');
      assert(!r.text.includes(t), 'the token is not echoed');
      bodies.push(r.text.replace(/name="csrf" value="[0-9a-f]+"/, ''));
    }
    assert(bodies.every(b => b === bodies[0]), 'every refusal reads the same');
  }],
  ['login CSRF: a login posted without the form\'s cookie, or with another token, is refused (issue 31 #2)', async () => {
    const s = new Session(co.url);
    const bare = await s.post('/login', { token: tok.admin }); // as another site would post it
    eq(bare.status, 403, 'no login cookie, no CSRF token');
    assert(bare.text.includes('The login form had expired'), 'says why');
    assert(!(bare.headers.get('set-cookie') || '').includes('idem_session='), 'no session');
    const csrf = await s.csrf('/login');
    eq((await s.post('/login', { csrf: csrf.replace(/^./, c => c === 'a' ? 'b' : 'a'), token: tok.admin })).status, 403, 'a CSRF token that does not match the cookie');
    delete s.cookies.idem_login;
    eq((await s.post('/login', { csrf, token: tok.admin })).status, 403, 'the token without its cookie');
    eq((await s.get('/')).status, 303, 'still logged out');
  }],
  ['login rate limit: 10 failed logins from one address, then 429 even for the right token (issue 31 #2)', async () => {
    const own = await startCoordinator(); // its own limits: the other cases log in from 127.0.0.1 too
    try {
      const s = new Session(own.url);
      for (let i = 0; i < 10; i++) {
        const r = await s.post('/login', { csrf: await s.csrf('/login'), token: 'wrong-' + 'x'.repeat(30) });
        eq(r.status, 401, `failed login ${i + 1}`);
      }
      const r = await s.post('/login', { csrf: await s.csrf('/login'), token: own.tok.admin });
      eq(r.status, 429, 'the 11th login, even with the right token');
      assert(/Too many failed logins from your address: try again in \d+ s/.test(r.text), 'says when');
      assert(!(r.headers.get('set-cookie') || '').includes('idem_session='), 'no session');
    } finally {
      eq(await own.stop(), 0, 'drained');
    }
  }],
  ['login: a random session id in an HttpOnly SameSite=Strict cookie, never the token', async () => {
    const r = await admin.login(tok.admin);
    const c = r.headers.get('set-cookie');
    assert(/^idem_session=[0-9a-f]{64}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=28800$/.test(c), `cookie: ${c}`);
    assert(!c.includes(tok.admin), 'the token is not in the cookie');
    assert(!co.log().includes(tok.admin), 'the token is not in the log');
    const o = await admin.get('/');
    eq(o.status, 200, 'overview');
    securityHeaders(o, 'overview');
    assert(o.text.includes(co.tenant) && o.text.includes('· admin'), 'tenant and role shown');
  }],
  ['the overview counts stuck steps per service and operation', async () => {
    const o = await admin.get('/');
    assert(/<td>payment<\/td><td>charge<\/td><td class="num"><a[^>]*>1<\/a><\/td><td class="num stuckword"><a href="\/steps\?lease_expired=1&amp;service=payment&amp;operation=charge">1<\/a>/.test(o.text), 'payment/charge: 1 in progress, 1 expired');
    assert(/<td>shipping<\/td><td>book<\/td>.*state=unknown&amp;service=shipping&amp;operation=book">1<\/a>/.test(o.text), 'shipping/book: 1 unknown');
  }],
  ['every value is escaped: a hostile body and label render as text', async () => {
    const r = await admin.get(`/sagas/${gid}`);
    eq(r.status, 200, 'saga page');
    assert(r.text.includes('&lt;img src=x onerror=alert(1)&gt;'), 'the body as text');
    assert(r.text.includes('&lt;script&gt;window.__xss=1;alert(&#39;label&#39;)&lt;/script&gt;'), 'the label as text');
    assert(!r.text.includes('<img') && !/<script/i.test(r.text), 'no element from the data');
  }],
  ['steps: the ListSteps filters and paging with next_page_token', async () => {
    const ex = await admin.get('/steps?lease_expired=1');
    assert(ex.text.includes('stuck: lease expired') && ex.text.includes('>charge<'), 'expired lease listed');
    assert(!ex.text.includes('>book<'), 'the unknown step is not an expired lease');
    const un = await admin.get(`/steps?state=unknown&global_id=${gid}`);
    assert(un.text.includes('stuck: outcome unknown') && un.text.includes('>book<'), 'unknown listed');
    const seen = new Set();
    let path = `/steps?global_id=${gid}&page_size=1`, pages = 0;
    while (path && pages < 10) {
      const p = await admin.get(path);
      eq(p.status, 200, `page ${pages}`);
      for (const m of p.text.matchAll(/href="(\/steps\/[^"]+)"/g)) seen.add(m[1]);
      const next = p.text.match(/id="next" href="([^"]+)"/);
      path = next ? next[1].replaceAll('&amp;', '&') : null;
      pages++;
    }
    eq(seen.size, 4, 'four steps over the pages');
    eq(pages, 4, 'one step a page');
    eq((await admin.get('/steps?state=nonsense')).status, 400, 'a bad state word');
    const missing = await admin.get('/sagas/no-such-saga');
    eq(missing.status, 404, 'an unknown saga');
    assert(missing.text.includes(`looked in tenant ${co.tenant}`) && missing.text.includes('?tenant=NAME'),
      'the 404 names the tenant it looked in and how to pick another');
    eq((await admin.get('/nowhere')).status, 404, 'an unknown page');
  }],
  ['POSTs without the CSRF token, with another session\'s, or by a service token change nothing', async () => {
    const other = new Session(co.url);
    await other.login(tok.admin2);
    const otherCsrf = await other.csrf();
    const svc = new Session(co.url);
    await svc.login(tok.service);
    const svcCsrf = await svc.csrf();
    const form = { outcome: 'succeeded', code: '200', body: 'x', reason: 'r', confirm: 'yes' };
    const target = stepPath('shipping', 'book') + '/resolve';
    eq((await admin.post(target, form)).status, 403, 'no csrf');
    eq((await admin.post(target, { ...form, csrf: '' })).status, 403, 'empty csrf');
    eq((await admin.post(target, { ...form, csrf: otherCsrf })).status, 403, "another session's csrf");
    const s = await svc.post(target, { ...form, csrf: svcCsrf });
    eq(s.status, 403, 'service role');
    assert(s.text.includes('may read only'), 'says the role may read only');
    eq((await svc.post('/policies', { csrf: svcCsrf, service: 'a', operation: '*', mode: 'fail-open', retention_s: '60', lease_ms: '1000' })).status, 403, 'service: policies');
    const page = await svc.get(stepPath('shipping', 'book'));
    assert(!page.text.includes('id="resolve"'), 'no resolve form for a service token');
    eq(stateOf('shipping', 'book'), 'unknown', 'state unchanged');
    eq(auditCount(), 0, 'no audit row');
  }],
  ['resolve: a confirmation that says what will change, then the change, audited as the token', async () => {
    const csrf = await admin.csrf(stepPath('shipping', 'book'));
    const form = { csrf, outcome: 'failed', code: '409', body: 'carrier says: never booked', reason: 'carrier support ticket 1234' };
    const c = await admin.post(stepPath('shipping', 'book') + '/resolve', form);
    eq(c.status, 200, 'confirmation');
    assert(/goes from <span class="state s-unknown">unknown<\/span> to <span class="state s-failed">failed/.test(c.text), 'says unknown -> failed');
    eq(stateOf('shipping', 'book'), 'unknown', 'nothing changed before the confirmation');
    const d = await admin.post(stepPath('shipping', 'book') + '/resolve', { ...form, confirm: 'yes' });
    eq(d.status, 303, 'resolved');
    eq(d.headers.get('location'), `/sagas/${gid}?resolved=1`, 'to the saga');
    eq(stateOf('shipping', 'book'), 'failed', 'new state');
    const saga = await admin.get(`/sagas/${gid}`);
    assert(saga.text.includes(`<td>${co.tenant}/admin</td><td>resolve</td>`), 'audit actor = the token identity');
    assert(saga.text.includes('carrier support ticket 1234'), 'the reason');
    const b = fixture(co.grpc, tok.admin, 'begin', gid, 'shipping', 'book');
    eq(b.decision, 'replay', 'BeginStep replays');
    eq(b.code, 409, 'code');
    eq(b.body, 'carrier says: never booked', 'body');
    // the same resolution again is its repeat: answered as done, nothing written (docs/api.md §12)
    const audited = auditCount();
    const again = await admin.post(stepPath('shipping', 'book') + '/resolve', { ...form, confirm: 'yes' });
    eq(again.status, 303, 'the same resolution again: its repeat');
    eq(auditCount(), audited, 'the repeat adds no audit row');
    // another resolution of the settled step is refused, and changes nothing
    const other = { ...form, outcome: 'succeeded', code: '200', body: 'booked after all', confirm: 'yes' };
    eq((await admin.post(stepPath('shipping', 'book') + '/resolve', other)).status, 409, 'a settled step');
    eq(stateOf('shipping', 'book'), 'failed', 'still failed');
    eq(auditCount(), audited, 'the refusal adds no audit row');
  }],
  ['resolve: a binary body reviewed as hex is the body stored, byte for byte (issue 26 #7)', async () => {
    const g = fixture(co.grpc, tok.admin, 'scene').gid;
    const path = `/steps/${g}/shipping/book/forward`;
    const csrf = await admin.csrf(path);
    // bytes no browser form would send as text: invalid UTF-8, NUL, C0, then text
    const raw = `csrf=${csrf}&outcome=failed&code=7&body=%FF%00%01%C3%28%0Dok&reason=binary+body`;
    const c = await admin.post(path + '/resolve', raw);
    eq(c.status, 200, 'the confirmation');
    assert(c.text.includes('ff0001c3 280d6f6b'), 'the body reviewed as hex');
    const hidden = hiddenFields(c.text, 'confirm');
    eq(hidden.body_hex, 'ff0001c3280d6f6b', 'the confirmation carries the exact bytes');
    eq((await admin.post(path + '/resolve', hidden)).status, 303, 'resolved as a browser resubmits it');
    const step = await admin.get(path);
    const m = step.text.match(/<pre class="body hex"[^>]*>([^<]*)<\/pre>/);
    assert(m, 'the stored body is shown as hex');
    eq(m[1].replace(/\s/g, ''), 'ff0001c3280d6f6b', 'the stored body is the one reviewed');
    const g2 = fixture(co.grpc, tok.admin, 'scene').gid;
    const p2 = `/steps/${g2}/shipping/book/forward/resolve`;
    const bad = await admin.post(p2, { csrf, outcome: 'failed', code: '1', body_hex: 'abc', reason: 'r', confirm: 'yes' });
    eq(bad.status, 400, 'odd hex');
    assert(bad.text.includes('body_hex: expected hex digits'), 'names body_hex');
    eq(stateOf2(g2), 'unknown', 'nothing changed');
  }],
  ['a NUL byte in a reason or a tenant is refused by name, not cut (issue 26 #8)', async () => {
    const g = fixture(co.grpc, tok.admin, 'scene').gid;
    const path = `/steps/${g}/shipping/book/forward/resolve`;
    const csrf = await admin.csrf('/');
    const r = await admin.post(path, `csrf=${csrf}&outcome=failed&code=1&body=&reason=ok%00hidden&confirm=yes`);
    eq(r.status, 400, 'a reason with a NUL');
    assert(r.text.includes('reason: contains a NUL byte'), `names the reason: ${r.text.slice(0, 300)}`);
    eq(stateOf2(g), 'unknown', 'nothing changed');
    const s = new Session(dev.url);
    const t = await s.get('/steps?tenant=default%00other');
    eq(t.status, 400, 'a development-mode tenant with a NUL');
    assert(t.text.includes('tenant: contains a NUL byte'), 'names the tenant');
  }],
  ['a multi-line reason from the textarea (CRLF) is kept with LF line breaks (issue 26 #9)', async () => {
    const g = fixture(co.grpc, tok.admin, 'scene').gid;
    const path = `/steps/${g}/shipping/book/forward`;
    const csrf = await admin.csrf(path);
    const c = await admin.post(path + '/resolve', { csrf, outcome: 'failed', code: '1', body: '', reason: 'line one\r\nline two' });
    eq(c.status, 200, 'the confirmation');
    const d = await admin.post(path + '/resolve', hiddenFields(c.text, 'confirm'));
    eq(d.status, 303, `resolved: ${d.text.slice(0, 300)}`);
    const saga = await admin.get(`/sagas/${g}`);
    assert(saga.text.includes('<td>line one\nline two</td>'), 'the reason kept with LF');
  }],
  ['a 20,000-step saga is paged: linear work, every step on exactly one page (issue 26 #6)', async () => {
    const g = fixture(co.grpc, tok.admin, 'finished', 'bulk', 'op-0', 'first').gid;
    const n = 20000;
    execFileSync('psql', ['-qX', '-v', 'ON_ERROR_STOP=1', env('IDEM_TEST_PG_URL'), '-c',
      `INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt, fingerprint,
         outcome, code, body, completed_ms, created_ms, updated_ms, lease_expires_ms, expires_ms, result_expires_ms)
       SELECT tenant, global_id, service, 'op-' || i, phase, state, attempt, fingerprint, outcome, code,
         body, completed_ms, created_ms + i, updated_ms, lease_expires_ms, expires_ms, result_expires_ms
       FROM idem_steps, generate_series(1, ${n - 1}) i
       WHERE tenant = '${co.tenant}' AND global_id = '${g}'`], { stdio: 'pipe' });
    const seen = new Set();
    let path = `/sagas/${g}`, pages = 0, firstMs = 0;
    while (path) {
      const r = await admin.get(path);
      eq(r.status, 200, `page ${pages + 1}`);
      const ms = +(r.headers.get('server-timing') || '').replace(/^app;dur=/, '');
      if (!pages) firstMs = ms;
      const ops = [...r.text.matchAll(/<tr><td class="num">\d+<\/td><td>bulk<\/td><td>(op-\d+)<\/td>/g)].map(m => m[1]);
      assert(ops.length > 0 && ops.length <= 1000, `page ${pages + 1}: ${ops.length} rows (a page holds at most 1,000)`);
      for (const o of ops) { assert(!seen.has(o), `${o} on two pages`); seen.add(o); }
      const next = r.text.match(/<a id="next" href="([^"]+)"/);
      path = next ? next[1].replace(/&amp;/g, '&') : null;
      if (++pages > 40) throw new Error('more pages than steps allow');
    }
    eq(seen.size, n, 'every step on exactly one page');
    console.log(`      20,000-step saga: ${pages} pages, first page ${firstMs} ms server time`);
  }],
  ['policies: an admin sets and deletes', async () => {
    const csrf = await admin.csrf('/policies');
    eq((await admin.post('/policies', { csrf, service: 'payment', operation: '*', mode: 'fail-open', retention_s: '3600', lease_ms: '5000' })).status, 303, 'set');
    let p = await admin.get('/policies');
    assert(/<td>payment<\/td><td>\*<\/td><td>fail-open<\/td><td class="num">3600<\/td>/.test(p.text), 'listed');
    eq((await admin.post('/policies', { csrf, service: 'Bad!', operation: '*', mode: 'fail-open', retention_s: '3600', lease_ms: '5000' })).status, 400, 'invalid');
    // keys kept longer than bodies (docs/api.md §12): listed; shorter than the retention refused, naming the field
    eq((await admin.post('/policies', { csrf, service: 'payment', operation: '*', mode: 'fail-open', retention_s: '3600', key_retention_s: '86400', lease_ms: '5000' })).status, 303, 'set with key retention');
    p = await admin.get('/policies');
    assert(/<td class="num">3600<\/td><td class="num">86400<\/td><td class="num">5000<\/td>/.test(p.text), 'key retention listed');
    const short = await admin.post('/policies', { csrf, service: 'payment', operation: '*', mode: 'fail-open', retention_s: '3600', key_retention_s: '60', lease_ms: '5000' });
    eq(short.status, 400, 'key retention below the retention');
    assert(short.text.includes('key_retention_s'), 'the message names key_retention_s');
    eq((await admin.post('/policies/delete', { csrf, service: 'payment', operation: '*' })).status, 303, 'delete');
    p = await admin.get('/policies');
    assert(!p.text.includes('<td>payment</td>'), 'gone');
  }],
  ['a result past its retention (docs/api.md §12): the step and saga pages say the body expired, outcome and code kept', async () => {
    const csrf = await admin.csrf('/policies');
    eq((await admin.post('/policies', { csrf, service: 'mail', operation: '*', mode: 'fail-closed', retention_s: '1', key_retention_s: '3600', lease_ms: '5000' })).status, 303, 'set');
    const g = fixture(co.grpc, tok.admin, 'finished', 'mail', 'send', 'receipt mailed to c-42').gid;
    const page = `/steps/${g}/mail/send/forward`;
    // the database clock decides when the body goes: wait for it
    const step = await waitFor('the body to expire', async () => {
      const r = await admin.get(page);
      return r.status === 200 && r.text.includes('class="muted expired"') && r;
    }, 15000);
    assert(step.text.includes('succeeded, code 200'), 'step page: outcome and code kept');
    assert(!step.text.includes('receipt mailed'), 'step page: no body');
    assert(!step.text.includes('(empty)'), 'step page: not shown as an empty body');
    const saga = await admin.get(`/sagas/${g}`);
    eq(saga.status, 200, 'saga page');
    assert(saga.text.includes('class="muted expired"'), 'saga page: the body expired');
    assert(saga.text.includes('succeeded, code 200'), 'saga page: outcome and code kept');
    assert(!saga.text.includes('receipt mailed'), 'saga page: no body');
    eq((await admin.post('/policies/delete', { csrf, service: 'mail', operation: '*' })).status, 303, 'delete');
  }],
  ['logout ends the session', async () => {
    const csrf = await admin.csrf();
    const r = await admin.post('/logout', { csrf });
    eq(r.status, 303, 'logout');
    eq((await admin.get('/')).status, 303, 'back to /login');
  }],
  ['development mode: a banner, ?tenant= picks the tenant, the actor is "console"', async () => {
    const s = new Session(dev.url);
    const g = fixture(dev.grpc, null, 'scene').gid;
    const o = await s.get('/');
    eq(o.status, 200, 'no login');
    assert(o.text.includes('Development mode: authentication is off'), 'banner');
    assert(/SameSite=Strict/.test(Object.keys(s.cookies).length ? 'SameSite=Strict' : ''), 'a session cookie');
    const other = await s.get('/steps?tenant=someone-else');
    assert(other.text.includes('tenant <b>someone-else</b>') && !other.text.includes(g), 'another tenant sees nothing');
    await s.get('/?tenant=default');
    const csrf = await s.csrf(`/steps/${g}/payment/charge/forward`);
    const form = { csrf, outcome: 'retryable', code: '0', body: '', reason: 'dev', confirm: 'yes' };
    eq((await s.post(`/steps/${g}/payment/charge/forward/resolve`, form)).status, 303, 'resolved');
    const saga = await s.get(`/sagas/${g}`);
    assert(saga.text.includes('<td>console</td><td>resolve</td>'), 'actor console');
  }],
  ['development mode answers only to an IP address or localhost (no DNS rebinding)', async () => {
    const { request } = await import('node:http');
    const get = host => new Promise((resolve, reject) => {
      const u = new URL(dev.url);
      request({ host: u.hostname, port: u.port, path: '/', headers: { host } }, r => { r.resume(); resolve(r.statusCode); })
        .on('error', reject).end();
    });
    const port = new URL(dev.url).port;
    eq(await get(`attacker.example:${port}`), 403, 'a DNS name');
    eq(await get(`localhost:${port}`), 200, 'localhost');
    eq(await get(`127.0.0.1:${port}`), 200, 'the address');
  }],
  ['off loopback the console needs TLS or --insecure (exit 2, says which)', async () => {
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(process.env.IDEM_COORDINATOR_BIN, ['--pg', 'postgresql://unused', '--console', '0.0.0.0:1'], { encoding: 'utf8' });
    eq(r.status, 2, 'exit status');
    assert(r.stderr.includes('--console 0.0.0.0:1 is not a loopback address') && r.stderr.includes('--insecure'), r.stderr);
    // TLS or --insecure is not enough off loopback: without --tokens every visitor is an admin
    const d = spawnSync(process.env.IDEM_COORDINATOR_BIN, ['--pg', 'postgresql://unused', '--console', '0.0.0.0:1', '--insecure'], { encoding: 'utf8' });
    eq(d.status, 2, 'exit status without --tokens');
    assert(d.stderr.includes('--console 0.0.0.0:1 is not a loopback address: it needs --tokens'), d.stderr);
  }],
  ['TLS: the console speaks TLS with the server certificate, and the cookie is Secure', async () => {
    const r = await httpsGet(tls.url + '/login', tls.ca);
    eq(r.status, 200, 'GET /login over TLS');
    eq(r.headers['x-frame-options'], 'DENY', 'headers over TLS');
    const csrf = r.text.match(/name="csrf" value="([0-9a-f]{64})"/)[1];
    const cookie = (r.headers['set-cookie'] || []).map(c => c.split(';')[0]).find(c => c.startsWith('idem_login='));
    assert((r.headers['set-cookie'] || []).some(c => c.startsWith('idem_login=') && c.includes('; Secure')), 'the login cookie is Secure');
    const l = await httpsGet(tls.url + '/login', tls.ca, { method: 'POST', form: { csrf, token: tls.tok.service }, cookie });
    eq(l.status, 303, 'login over TLS');
    const c = l.headers['set-cookie'][0];
    assert(/; HttpOnly; SameSite=Strict; Path=\/; Max-Age=28800; Secure$/.test(c), `cookie: ${c}`);
    let plain = null;
    try { plain = await fetch(tls.url.replace('https:', 'http:') + '/login'); } catch { plain = null; }
    assert(!plain || plain.status >= 400, 'no plaintext page on the TLS port');
  }],
  ['a standby: every page reads, a change names the leader and changes nothing', async () => {
    const etcd = await startEtcd();
    const prefix = `/idem-console-test/${Date.now()}`;
    const a = await startCoordinator({ etcd: etcd.url, nodeId: 'n1', prefix });
    const sa = new Session(a.url);
    await sa.login(a.tok.admin);
    await waitFor('n1 to lead', async () => (await sa.get('/')).text.includes('>leader</span>'), 20000);
    const b = await startCoordinator({ etcd: etcd.url, nodeId: 'n2', prefix, same: a });
    try {
      const sb = new Session(b.url);
      await sb.login(a.tok.admin);
      const o = await waitFor('n2 to see the leader', async () => {
        const r = await sb.get('/');
        return r.text.includes(`<b>${a.grpc}</b>`) && r;
      }, 20000);
      assert(o.text.includes('This node is a standby'), 'the standby banner');
      assert(o.text.includes(`<b>${a.grpc}</b> (its gRPC address`), "the leader named by its gRPC address");
      assert(!o.text.includes(`:${new URL(b.url).port}/"`), "no link guessed from this node's console port (issue 31 #5)");
      const g = fixture(a.grpc, a.tok.admin, 'scene').gid;
      const saga = await sb.get(`/sagas/${g}`);
      eq(saga.status, 200, 'the saga reads on the standby');
      assert(saga.text.includes('stuck: outcome unknown'), 'with its steps');
      const step = await sb.get(`/steps/${g}/shipping/book/forward`);
      assert(!step.text.includes('id="resolve"') && step.text.includes('Resolve on the leader'), 'no form: the leader');
      const csrf = await sb.csrf('/');
      const r = await sb.post(`/steps/${g}/shipping/book/forward/resolve`, { csrf, outcome: 'failed', code: '1', body: '', reason: 'r', confirm: 'yes' });
      eq(r.status, 503, 'a change on the standby');
      assert(r.text.includes(a.grpc) && r.text.includes('standby'), 'names the leader');
      eq(fixture(a.grpc, a.tok.admin, 'state', g, 'shipping', 'book').state, 'unknown', 'nothing changed');
      eq((await sb.post('/policies', { csrf, service: 'a', operation: '*', mode: 'fail-open', retention_s: '60', lease_ms: '1000' })).status, 503, 'policies on the standby');
    } finally {
      const codes = [await b.stop(), await a.stop()];
      await etcd.stop();
      eq(codes.join(), '0,0', 'both drained');
    }
  }],
  ['a null compensation and an abandoned forward are shown as skipped, never as steps that ran (issue 31 #7)', async () => {
    const s = new Session(co.url);
    await s.login(tok.admin);
    const g = fixture(co.grpc, tok.admin, 'skipped').gid;
    const row = (html, svc) => html.split('<tr>').find(t => t.includes(`<td>${svc}</td>`)) || '';
    const saga = await s.get(`/sagas/${g}`);
    eq(saga.status, 200, 'saga page');
    const hotel = row(saga.text, 'hotel'), car = row(saga.text, 'car');
    assert(hotel.includes('data-skip="never_ran"') && hotel.includes('data-skip="null_compensation"'), `hotel: ${hotel}`);
    assert(hotel.includes('skipped: null compensation'), 'said in words');
    assert(!hotel.includes('s-succeeded') && !hotel.includes('code 0') && !hotel.includes('attempt 0'), `hotel never as run: ${hotel}`);
    assert(car.includes('data-skip="abandoned"') && car.includes('attempt 1'), `car forward: ${car}`);
    assert(car.includes('succeeded, code 200') && car.includes('car returned'), 'the real compensation as it ran');
    const step = await s.get(`/steps/${g}/hotel/book/compensation`);
    eq(step.status, 200, 'step page');
    assert(step.text.includes('none: no compensation ran') && step.text.includes('title="stored as succeeded"'), 'step page says so');
    assert(!step.text.includes('succeeded, code 0') && !step.text.includes('(empty)'), 'no result of a run');
    const fwd = await s.get(`/steps/${g}/hotel/book/forward`);
    assert(fwd.text.includes('skipped: never ran') && fwd.text.includes('none ran'), 'the tombstone');
    const list = await s.get(`/steps?global_id=${g}`);
    const rows = list.text.split('<tr').filter(t => t.includes('/hotel/book/'));
    eq(rows.length, 2, 'both hotel records listed');
    for (const t of rows) assert(t.includes('data-skip=') && !t.includes('s-succeeded') && !t.includes('<td class="num">0</td>'), `steps row: ${t}`);
  }],
]);

const codes = [await co.stop(), await dev.stop(), await tls.stop()];
if (codes.some(c => c !== 0)) { console.log(`coordinator exit: ${codes}`); process.exit(1); }
process.exit(failed ? 1 : 0);
