// browser_test.mjs — the console in a real browser: Debian's chromium, headless, driven by
// playwright-core (tests/console/package.json). Against a coordinator of its own with tokens:
//   1. click-through: overview -> stuck steps -> the saga -> resolve with a reason -> the audit
//      row and the new state appear, and a BeginStep through libidem replays the resolution;
//   2. a body <img src=x onerror=alert(1)> and a label <script>...</script> render as text: no
//      dialog fires, no element is created;
//   3. a POST without the CSRF token, with another session's, or with a service token is
//      refused and changes nothing; a wrong login token is refused without saying why;
//   4. screenshots of the overview, a saga page and the resolve form in $CONSOLE_ARTEFACTS
//      (and in docs/ with IDEM_CONSOLE_DOCS=1).
import { mkdirSync, copyFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startCoordinator, fixture, run, assert, eq } from './lib.mjs';

process.on('unhandledRejection', e => { console.log(`FAIL  ${e.stack || e}`); process.exit(1); });
const here = dirname(fileURLToPath(import.meta.url));
const artefacts = process.env.CONSOLE_ARTEFACTS || join(here, 'artefacts');
mkdirSync(artefacts, { recursive: true });
const chromiumPath = process.env.IDEM_CHROMIUM || '/usr/bin/chromium';

const co = await startCoordinator();
const { tok } = co;
const gid = fixture(co.grpc, tok.admin, 'scene').gid;
const stateOf = (svc, op) => fixture(co.grpc, tok.admin, 'state', gid, svc, op).state;
const auditCount = () => fixture(co.grpc, tok.admin, 'audit', gid).entries;
let browser;
try {
  browser = await chromium.launch({
    executablePath: chromiumPath, headless: true,
    args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [],
  });
} catch (e) {
  await co.stop();
  console.log(`FAIL  cannot start ${chromiumPath}: ${e.message}`);
  process.exit(1);
}
const dialogs = [];
const errors = [];

async function newPage() {
  const ctx = await browser.newContext({ viewport: { width: 1180, height: 760 } });
  const page = await ctx.newPage();
  page.on('dialog', d => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', e => errors.push(e.message));
  return page;
}

async function login(page, token, base = co.url) {
  await page.goto(base + '/');
  eq(new URL(page.url()).pathname, '/login', 'sent to /login');
  await page.fill('input[name=token]', token);
  const [resp] = await Promise.all([
    page.waitForResponse(r => r.url().endsWith('/login') && r.request().method() === 'POST'),
    page.click('#login button[type=submit]'),
  ]);
  await page.waitForLoadState();
  return resp;
}

// Submits the form selector on page and answers the POST's response.
async function submit(page, selector) {
  const [resp] = await Promise.all([
    page.waitForResponse(r => r.request().method() === 'POST'),
    page.click(`${selector} button[type=submit]`),
  ]);
  await page.waitForLoadState();
  return resp;
}

async function shot(page, name) {
  const p = join(artefacts, `console-${name}.png`);
  await page.screenshot({ path: p });
  if (process.env.IDEM_CONSOLE_DOCS === '1') copyFileSync(p, join(here, '..', '..', 'docs', `console-${name}.png`));
}

const admin = await newPage();
const failed = await run([
  ['1. click-through: overview -> stuck steps -> saga -> resolve -> audit row, new state, replay', async () => {
    const r = await login(admin, tok.admin);
    eq(r.status(), 303, 'login');
    await admin.waitForSelector('#counts');
    await shot(admin, 'overview');
    await admin.click('#counts a[href^="/steps?lease_expired=1&service=payment"]');
    await admin.waitForSelector('#steps');
    assert((await admin.textContent('#steps')).includes('stuck: lease expired'), 'the step is visibly stuck');
    await admin.click(`#steps a[href="/sagas/${gid}"]`);
    await admin.waitForSelector('#timeline');
    eq(await admin.textContent('#gid'), gid, 'the saga');
    await shot(admin, 'saga');
    await admin.click(`#timeline a[href="/steps/${gid}/payment/charge/forward"]`);
    await admin.waitForSelector('#resolve');
    await admin.selectOption('#resolve select[name=outcome]', 'succeeded');
    await admin.fill('#resolve input[name=code]', '201');
    await admin.fill('#resolve textarea[name=body]', 'charged by hand, PSP ref 77');
    await admin.fill('#resolve textarea[name=reason]', 'PSP dashboard shows the charge (INC-4711)');
    await shot(admin, 'resolve');
    eq((await submit(admin, '#resolve')).status(), 200, 'the confirmation');
    const change = await admin.textContent('#change');
    assert(/in_progress\s+to\s+succeeded/.test(change), `says what will change: ${change}`);
    eq(stateOf('payment', 'charge'), 'in_progress', 'nothing changed before the confirmation');
    eq((await submit(admin, '#confirm')).status(), 303, 'resolved');
    await admin.waitForSelector('#resolved');
    const audit = await admin.textContent('#audit');
    assert(audit.includes('PSP dashboard shows the charge (INC-4711)'), 'the audit row has the reason');
    assert(audit.includes(`${co.tenant}/admin`), 'the audit actor is the token identity');
    assert(audit.includes('in_progress → succeeded'), 'the audit row has the change');
    assert(/succeeded[\s\S]*charged by hand, PSP ref 77/.test(await admin.textContent('#timeline')), 'the new state on the timeline');
    eq(stateOf('payment', 'charge'), 'succeeded', 'stored');
    const b = fixture(co.grpc, tok.admin, 'begin', gid, 'payment', 'charge');
    eq(b.decision, 'replay', 'BeginStep through libidem');
    eq(b.code, 201, 'replayed code');
    eq(b.body, 'charged by hand, PSP ref 77', 'replayed body');
  }],
  ['2. a hostile body and label render as text: no dialog, no element', async () => {
    await admin.goto(`${co.url}/sagas/${gid}`);
    await admin.waitForSelector('#timeline');
    const got = await admin.evaluate(() => ({
      imgs: document.querySelectorAll('img').length,
      scripts: document.querySelectorAll('script').length,
      xss: typeof window.__xss,
      labels: document.getElementById('labels').textContent,
      timeline: document.getElementById('timeline').textContent,
    }));
    eq(got.imgs, 0, 'no <img> created');
    eq(got.scripts, 0, 'no <script> created');
    eq(got.xss, 'undefined', 'the label script did not run');
    assert(got.labels.includes("note=<script>window.__xss=1;alert('label')</script>"), 'the label as text');
    assert(got.timeline.includes('<img src=x onerror=alert(1)>'), 'the body as text');
    eq(dialogs.length, 0, `dialogs: ${dialogs.join(', ')}`);
    eq(errors.length, 0, `page errors: ${errors.join(', ')}`);
  }],
  ['3. refused: no CSRF token, another session\'s, a service token, a wrong login token', async () => {
    const target = `/steps/${gid}/shipping/book/forward`;
    const before = auditCount();
    const fill = async page => {
      await page.goto(co.url + target);
      await page.fill('#resolve textarea[name=reason]', 'should not happen');
    };
    await fill(admin); // without the CSRF token
    await admin.evaluate(() => document.querySelector('#resolve input[name=csrf]').remove());
    let resp = await submit(admin, '#resolve');
    eq(resp.status(), 403, 'no csrf');
    assert((await admin.textContent('main')).includes('CSRF'), 'says why');
    const other = await newPage(); // another session's token
    await login(other, tok.admin2);
    await other.goto(co.url + target);
    const otherCsrf = await other.getAttribute('#resolve input[name=csrf]', 'value');
    await fill(admin);
    await admin.evaluate(v => { document.querySelector('#resolve input[name=csrf]').value = v; }, otherCsrf);
    eq((await submit(admin, '#resolve')).status(), 403, "another session's csrf");
    const svc = await newPage(); // a service token, with its own session's CSRF token
    await login(svc, tok.service);
    await svc.goto(co.url + target);
    eq(await svc.locator('#resolve').count(), 0, 'no resolve form for a service token');
    const svcCsrf = await svc.getAttribute('header input[name=csrf]', 'value');
    resp = await svc.request.post(co.url + target + '/resolve', {
      form: { csrf: svcCsrf, outcome: 'succeeded', code: '0', body: '', reason: 'r', confirm: 'yes' }, maxRedirects: 0,
    });
    eq(resp.status(), 403, 'service role');
    eq(stateOf('shipping', 'book'), 'unknown', 'the step is unchanged');
    eq(auditCount(), before, 'no audit row');
    const anon = await newPage(); // a wrong token at login
    resp = await login(anon, tok.admin.slice(0, -4) + 'beef');
    eq(resp.status(), 401, 'wrong token');
    eq((await anon.textContent('#refused')).trim(), 'Login refused.', 'without saying why');
    eq((await anon.context().cookies()).filter(c => c.name === 'idem_session').length, 0, 'no session cookie');
    eq(new URL(anon.url()).pathname, '/login', 'still at /login');
  }],
  ['5. login: a form posted from another page is refused (CSRF); 10 failed logins, then 429 (issue 31 #2)', async () => {
    const evil = await newPage(); // a page of another origin posting the right token to /login
    await evil.setContent(`<form id="f" method="post" action="${co.url}/login">` +
      `<input name="token" value="${tok.admin}"><button>go</button></form>`);
    const [resp] = await Promise.all([
      evil.waitForResponse(r => r.url().endsWith('/login') && r.request().method() === 'POST'),
      evil.click('#f button'),
    ]);
    eq(resp.status(), 403, 'a login posted from elsewhere');
    eq((await evil.context().cookies()).filter(c => c.name === 'idem_session').length, 0, 'no session');
    const own = await startCoordinator(); // limits of its own: the other cases log in from here too
    try {
      const page = await newPage();
      for (let i = 0; i < 10; i++) eq((await login(page, 'wrong-' + 'y'.repeat(30), own.url)).status(), 401, `failure ${i + 1}`);
      const r = await login(page, own.tok.admin, own.url);
      eq(r.status(), 429, 'the right token after 10 failures');
      assert(/Too many failed logins/.test(await page.textContent('#refused')), 'says so');
      eq((await page.context().cookies()).filter(c => c.name === 'idem_session').length, 0, 'no session');
    } finally {
      eq(await own.stop(), 0, 'drained');
    }
  }],
  ['4. screenshots of the overview, a saga and the resolve form', async () => {
    for (const n of ['overview', 'saga', 'resolve']) {
      const { statSync } = await import('node:fs');
      const s = statSync(join(artefacts, `console-${n}.png`));
      assert(s.size > 5000 && s.size < 400000, `${n}: ${s.size} bytes`);
      console.log(`      ${join(artefacts, `console-${n}.png`)} (${s.size} bytes)`);
    }
  }],
]);

await browser.close();
const code = await co.stop();
if (code !== 0) { console.log(`coordinator exit: ${code}`); process.exit(1); }
process.exit(failed ? 1 : 0);
