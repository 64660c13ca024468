// examples/http.js — an HTTP API behind idem's Idempotency-Key middleware (docs/api.md §19).
//
//   POST /payments  {"amount": 100}  → 201 {"execution": N, "amount": 100}   (guarded)
//   POST /refunds   {"amount": 100}  → 201 {"execution": N, "amount": 100}   (guarded; another operation)
//   GET  /stats                      → {"executions": N}
//
// A body {"fail": true} makes the handler answer 500 (stored as retryable: the next retry runs
// again); {"big": N} answers N bytes. IDEM_ADDRESS (default 127.0.0.1:50051), IDEM_TENANT
// (default shop), PORT (default 8082), IDEM_SERVICE (the step key's service, default http-node),
// IDEM_JOURNAL (the fail-open journal; default in the temp folder), PAYMENT_DELAY_MS (how long a
// payment takes, default 100). The defaults differ from the Go (8081, http-go) and Python (8083,
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
const { IdemClient, idempotency } = require('..'); // require('idem-client') once installed

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
  await new Promise((r) => setTimeout(r, delayMs));
  const body = req.body && typeof req.body === 'object' && !Buffer.isBuffer(req.body) ? req.body : {};
  if (body.fail) {
    res.status(500).json({ error: 'payment gateway failed', execution: n });
    return;
  }
  if (body.big) {
    res.status(201).type('text/plain').send('x'.repeat(Number(body.big)));
    return;
  }
  res.status(201).json({ execution: n, amount: body.amount ?? null });
}

const app = express();
app.post('/payments', guard, handler);
app.post('/refunds', guard, handler);
app.get('/stats', (req, res) => res.json({ executions }));

const server = http.createServer(app);
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
