// examples/http.js — an HTTP API behind idem's Idempotency-Key middleware (docs/api.md §19).
//
//   POST /payments  {"amount": 100}  → 201 {"execution": N, "amount": 100}   (guarded)
//   POST /refunds   {"amount": 100}  → 201 {"execution": N, "amount": 100}   (guarded; another operation)
//   GET  /stats                      → {"executions": N}
//
// A body {"fail": true} makes the handler answer 500 (stored as retryable: the next retry runs
// again); {"big": N} answers N bytes. IDEM_ADDRESS (default 127.0.0.1:50051), IDEM_TENANT,
// PORT (default 8080), IDEM_JOURNAL (the fail-open journal; default in the temp folder),
// PAYMENT_DELAY_MS (how long a payment takes, default 100).
//
//   cd client-lib/node && npm ci && npm run build && node examples/http.js
//   curl -si -X POST -H 'Idempotency-Key: "order-42"' -d '{"amount":100}' \
//        -H 'Content-Type: application/json' http://127.0.0.1:8080/payments
'use strict';
const os = require('os');
const path = require('path');
const express = require('express');
const { IdemClient, idempotency } = require('..'); // require('idem-client') once installed

const port = Number(process.env.PORT || 8080);
const client = IdemClient.connect({
  address: process.env.IDEM_ADDRESS || '127.0.0.1:50051',
  tenant: process.env.IDEM_TENANT || undefined,
  journalPath: process.env.IDEM_JOURNAL || path.join(os.tmpdir(), `idem-example-http-${port}.journal`),
});
const delayMs = Number(process.env.PAYMENT_DELAY_MS || 100);
const guard = idempotency({
  client,
  service: 'example-http',
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

const server = app.listen(port, '127.0.0.1', () => {
  console.log(`example-http: listening on 127.0.0.1:${port}, coordinator ${process.env.IDEM_ADDRESS || '127.0.0.1:50051'}`);
});
function stop() {
  server.close();
  client.close();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
