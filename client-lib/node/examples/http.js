// examples/http.js — an HTTP API behind idem's Idempotency-Key middleware (docs/api.md §19).
//
//   POST /payments  {"amount": 100}  → 201 {"execution": N, "amount": 100}   (guarded)
//   POST /refunds   {"amount": 100}  → 201 {"execution": N, "amount": 100}   (guarded; another operation)
//   GET  /stats                      → {"executions": N}
//
// The handler reads its JSON body whatever the Content-Type (anything else = {}): {"fail": true}
// makes it answer 500 (stored as retryable: the next retry runs again); {"delay_ms": N} sleeps N ms
// first; {"big": N} answers N bytes of text/plain. Routes are matched on the normalized path
// (docs/api.md §19 rule 5: /p%61yments/ is /payments); another path is 404, another
// method 405, and every error the server answers itself is a problem document (http-middleware.json
// example_server), also those Node's parser refuses (a framing error, a lower-case method, a folded
// line, a head over 16 KiB). IDEM_ADDRESS (default 127.0.0.1:50051), IDEM_TENANT (default shop),
// PORT (default 8082), IDEM_SERVICE (the step key's service, default http-node), IDEM_JOURNAL (the
// fail-open journal; default in the temp folder), PAYMENT_DELAY_MS (how long a payment takes,
// default 100). The defaults differ from the Go (8081, http-go) and Python (8083,
// http-python) examples' and from quickstart's console (8080), so all of them run side by side.
// A port already taken is refused: the port is named, "listening" is printed only once the port
// is bound, and the exit status is 1.
//
//   cd client-lib/node && npm ci && npm run build && node examples/http.js
//   curl -si -X POST -H 'Idempotency-Key: "order-42"' -d '{"amount":100}' \
//        -H 'Content-Type: application/json' http://127.0.0.1:8082/payments
'use strict';
const http = require('http');
const os = require('os');
const path = require('path');
const express = require('express');
const { IdemClient, idempotency, answerClientErrors, normalizeTarget, problem, sendProblem } = require('..'); // require('idem-client') once installed

const port = Number(process.env.PORT || 8082);
const tenant = process.env.IDEM_TENANT || 'shop';
const service = process.env.IDEM_SERVICE || 'http-node';
const client = IdemClient.connect({
  address: process.env.IDEM_ADDRESS || '127.0.0.1:50051',
  tenant,
  journalPath: process.env.IDEM_JOURNAL || path.join(os.tmpdir(), `idem-example-http-${port}.journal`),
});
const delayMs = Number(process.env.PAYMENT_DELAY_MS || 100);
const guard = idempotency({
  client,
  service,
  deadlineMs: Number(process.env.IDEM_DEADLINE_MS || 3000),
});

let executions = 0;
async function handler(req, res) {
  const n = ++executions;
  let body = {};
  try {
    const v = JSON.parse(Buffer.isBuffer(req.rawBody) ? req.rawBody.toString('utf8') : '{}');
    if (v && typeof v === 'object' && !Array.isArray(v)) body = v;
  } catch { /* not JSON: {} */ }
  const wait = delayMs + Math.min(Number(body.delay_ms) || 0, 10000);
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const kind = req.path === '/refunds' ? 'refund' : 'payment';
  if (body.fail) {
    res.status(500).json({ error: `${kind} gateway failed`, execution: n });
    return;
  }
  if (body.big) {
    res.status(201).type('text/plain').send('x'.repeat(Number(body.big)));
    return;
  }
  res.status(201).json({ [kind]: `${kind}-${n}`, execution: n, amount: body.amount ?? null });
}

/** answers one of the server's own problems (example_server.problems) */
function own(res, type, detail, headers = {}) {
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  sendProblem(res, problem('docs/http-middleware.md', type, detail));
}

const app = express();
app.disable('x-powered-by');
app.set('case sensitive routing', true);
app.set('strict routing', true);
app.use((req, res, next) => { // route on the normalized path: one spelling per route
  if (req.method !== req.method.toUpperCase()) {
    own(res, 'request-malformed', `the method ${JSON.stringify(req.method)} has a lower-case letter (methods are case-sensitive)`);
    return;
  }
  let t;
  try {
    t = normalizeTarget(req.url);
  } catch (e) {
    own(res, 'target-malformed', e.message);
    return;
  }
  // the decoded path, with what would change its meaning as a URL escaped again (Express routes on it)
  const p = t.path.replace(/[%?#]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  req.url = t.query === undefined ? p : `${p}?${t.query}`;
  next();
});
const routes = { '/payments': 'POST', '/refunds': 'POST', '/stats': 'GET' };
app.post('/payments', guard, handler);
app.post('/refunds', guard, handler);
app.get('/stats', (req, res) => res.json({ executions }));
app.use((req, res) => {
  const allow = routes[req.path];
  if (allow) own(res, 'method-not-allowed', `${req.method} ${req.path}: only ${allow}`, { Allow: allow });
  else own(res, 'not-found', `no route ${req.path}`);
});
app.use((err, req, res, next) => { // never Express's page (a stack trace outside production)
  console.error(`example-http: ${req.method} ${req.path}: ${err && err.stack ? err.stack : err}`);
  if (res.headersSent) {
    next(err);
    return;
  }
  sendProblem(res, problem('docs/http-middleware.md', 'middleware-error', 'the request failed; see the server log'));
});

const server = http.createServer({ maxHeaderSize: 16384 }, app);
answerClientErrors(server);
server.on('error', (e) => { // before listening: the port is taken (EADDRINUSE) or not ours to bind
  console.error(`example-http: cannot listen on 127.0.0.1:${port}: ${e.code || e.message}`);
  if (e.code === 'EADDRINUSE') {
    console.error(`example-http: port ${port} is taken (quickstart's console holds 8080): choose another with PORT=, e.g. PORT=8092`);
  }
  client.close();
  process.exit(1);
});
server.listen(port, '127.0.0.1', () => {
  console.log(`example-http: listening on 127.0.0.1:${port}, coordinator ${process.env.IDEM_ADDRESS || '127.0.0.1:50051'}, tenant ${tenant}, service ${service}`);
});
function stop() {
  server.close();
  client.close();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
