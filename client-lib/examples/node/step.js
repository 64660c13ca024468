// step.js — your first guarded step from Node (idem-client, the Node SDK), the same flow and the
// same printed lines as ../c/step.c.
//
// A shop charges a card for an order; the double-click sends the same request twice; idem runs
// the charge once and answers the second request with the first one's result.
//
//   (cd client-lib/node && npm ci && npm run build) >/dev/null &&
//     node client-lib/examples/node/step.js ORDER-ID
//
// The SDK is taken from the checkout (client-lib/node, built into its dist/ by `npm run build`;
// require('idem-client') once it is installed, e.g. from the tarball `npm pack` makes there).
// IDEM_ADDRESS: the coordinator (default 127.0.0.1:50051); IDEM_TENANT: your tenant (default
// "shop"). The order id defaults to order-node-1 and the step's service is payment-node, so it
// runs beside the C, Go, Python and Java examples without sharing their sagas. Exit status: 0
// when the charge ran at most once, 1 otherwise.
'use strict';
const crypto = require('crypto');
const { IdemClient } = require('../../node'); // require('idem-client') once installed

// A pretend payment gateway that counts its charges.
const gateway = {
  charges: 0,
  charge(orderId, fencingToken) {
    this.charges++;
    return { code: 200, body: Buffer.from(`receipt for ${orderId}, attempt ${fencingToken}`) };
  },
};

// One request to pay for the order: what each of the duplicates runs.
async function pay(idem, gid, orderId, amountCents) {
  // the request's identity: a different amount under the same key is refused
  const fingerprint = crypto.createHash('sha256')
    .update(`order=${orderId};amount=${amountCents}`).digest();
  const key = { globalId: gid, service: 'payment-node', operation: 'charge' };
  // the action: called only when idem answers PROCEED; ctx.attempt is passed on as a fencing token
  const rep = await idem.runStep(key, (ctx) => {
    const { code, body } = gateway.charge(orderId, ctx.attempt);
    return { outcome: 'succeeded', code, body };
  }, { fingerprint });
  if (rep.ran || rep.replayed) {
    const how = rep.ran ? 'ran: the gateway was called' : 'replayed: the stored result';
    const r = rep.result;
    console.log(`${how}, outcome ${r.outcome}, code ${r.code}, body "${r.body.toString()}"`);
  } else {
    console.log('skipped: nothing to run');
  }
  return rep;
}

async function main() {
  const orderId = process.argv[2] || 'order-node-1';
  let idem;
  try {
    idem = IdemClient.connect({ address: process.env.IDEM_ADDRESS || '127.0.0.1:50051',
      tenant: process.env.IDEM_TENANT || 'shop' });
  } catch (e) {
    console.error(`connect: ${e.code}: ${e.message}`);
    return 1;
  }
  try {
    // One saga per order: the order id is the saga's request id, so a retried checkout finds the
    // same global id instead of starting a second saga.
    let saga;
    try {
      saga = await idem.beginSaga({ requestId: orderId, sagaType: 'order' });
    } catch (e) {
      console.error(`begin saga: ${e.code}: ${e.message}`);
      return 1;
    }
    console.log(`saga ${saga.globalId} (${saga.created ? 'new' : "the order's existing saga"})`);

    let first, second;
    try {
      first = await pay(idem, saga.globalId, orderId, 4200); // the first click
      second = await pay(idem, saga.globalId, orderId, 4200); // the double-click
    } catch (e) {
      console.error(`pay: ${e.code}: ${e.message}`);
      return 1;
    }
    if (gateway.charges > 1) {
      console.error(`the gateway was called ${gateway.charges} times`);
      return 1;
    }
    if (!second.replayed || !first.result || !second.result.body.equals(first.result.body)) {
      console.error("the second request did not replay the first one's result");
      return 1;
    }
    console.log(`charged ${gateway.charges} time(s) for two requests`);
    return 0;
  } finally {
    idem.close();
  }
}

main().then((rc) => process.exit(rc));
