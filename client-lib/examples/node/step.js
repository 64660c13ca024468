// step.js — your first guarded step from Node (@grpc/grpc-js), the same flow as ../c/step.c.
//
// A shop charges a card for an order; the double-click sends the same request twice; idem runs
// the charge once and answers the second request with the first one's result.
//
//   npm ci && node step.js ORDER-ID
//
// IDEM_ADDRESS: the coordinator (default 127.0.0.1:50051); IDEM_TENANT: your tenant (default
// "shop"). The order id defaults to order-node-1 and the step's service is payment-node, so it
// runs beside the C, Go and Python examples without sharing their sagas. Exit status: 0 when the
// charge ran at most once, 1 otherwise.
'use strict';
const crypto = require('crypto');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_DIR = path.resolve(__dirname, '..', '..', '..', 'proto');
const def = protoLoader.loadSync('idem/v1/coordinator.proto', {
  includeDirs: [PROTO_DIR], keepCase: true, enums: String, longs: String, defaults: true,
});
const idem = grpc.loadPackageDefinition(def).idem.v1;

const address = process.env.IDEM_ADDRESS || '127.0.0.1:50051';
const tenant = process.env.IDEM_TENANT || 'shop';
const orderId = process.argv[2] || 'order-node-1';
const client = new idem.Coordinator(address, grpc.credentials.createInsecure());

function call(method, req) {
  const md = new grpc.Metadata();
  md.set('idem-tenant', tenant); // every call names its tenant
  const deadline = new Date(Date.now() + 5000);
  return new Promise((resolve, reject) =>
    client[method](req, md, { deadline }, (err, resp) => (err ? reject(err) : resolve(resp))));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let charges = 0; // a pretend payment gateway that counts its charges
function gatewayCharge(amountCents, fencingToken) {
  charges++;
  return { code: 200, body: Buffer.from(`receipt for ${orderId}, attempt ${fencingToken}`) };
}

async function pay(gid, amountCents) {
  const key = { global_id: gid, service: 'payment-node', operation: 'charge', phase: 'PHASE_FORWARD' };
  const fingerprint = crypto.createHash('sha256')
    .update(`order=${orderId};amount=${amountCents}`).digest();
  let begin;
  for (let i = 0; ; i++) { // ABORTED: another request runs the step right now; ask again
    try {
      begin = await call('BeginStep', { key, fingerprint });
      break;
    } catch (e) {
      if (e.code !== grpc.status.ABORTED || i === 50) throw e;
      await sleep(100);
    }
  }
  if (begin.decision === 'DECISION_REPLAY') {
    console.log(`replayed: the stored result, code ${begin.result.code}, body "${begin.result.body}"`);
    return begin.result;
  }
  if (begin.decision !== 'DECISION_PROCEED') throw new Error(`unexpected decision ${begin.decision}`);
  const { code, body } = gatewayCharge(amountCents, begin.attempt); // attempt: a fencing token
  const done = await call('CompleteStep', {
    key, attempt: begin.attempt, outcome: code < 300 ? 'OUTCOME_SUCCEEDED' : 'OUTCOME_FAILED', code, body,
  });
  console.log(`ran: the gateway was called, code ${code}, body "${body}"`);
  return done.record.result;
}

async function main() {
  const saga = await call('BeginSaga', { request_id: orderId, saga_type: 'order' });
  console.log(`saga ${saga.global_id} (${saga.created ? 'new' : "the order's existing saga"})`);
  const first = await pay(saga.global_id, 4200); // the click
  const second = await pay(saga.global_id, 4200); // the double-click
  if (charges > 1 || !Buffer.from(second.body).equals(Buffer.from(first.body))) {
    console.error(`FAILED: ${charges} charges`);
    return 1;
  }
  console.log(`charged ${charges} time(s) for two requests`);
  return 0;
}

main().then((rc) => { client.close(); process.exit(rc); })
  .catch((e) => { console.error(`${e.code !== undefined ? e.code : ''} ${e.message}`); process.exit(1); });
