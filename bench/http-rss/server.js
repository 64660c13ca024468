// server.js — bench/http-rss's Node server: Express with idem-client's middleware; POST answers
// Response-Bytes bytes of 'x' in 64 KiB writes (waiting for 'drain'). IDEM_ADDRESS, IDEM_TENANT, PORT.
'use strict';
const path = require('path');
const node = path.join(__dirname, '..', '..', 'client-lib', 'node');
const express = require(path.join(node, 'node_modules', 'express'));
const { IdemClient, idempotency } = require(node);

const client = IdemClient.connect({ address: process.env.IDEM_ADDRESS, tenant: process.env.IDEM_TENANT });
const app = express();
app.use(idempotency({ client, service: 'http-rss', log: () => {} }));
const piece = Buffer.alloc(64 * 1024, 'x');
app.use(async (req, res) => {
  let n = Number(req.headers['response-bytes'] || 0);
  res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
  while (n > 0) {
    const k = Math.min(n, piece.length);
    n -= k;
    if (!res.write(k === piece.length ? piece : piece.subarray(0, k))) await new Promise((ok) => res.once('drain', ok));
  }
  res.end();
});
app.listen(Number(process.env.PORT), '127.0.0.1');
