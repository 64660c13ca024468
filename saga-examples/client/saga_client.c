/* saga-client — talks to the example services from the command line (scripts/quickstart --demo).
 *
 *   saga-client ADDR place KEY CUSTOMER SKU QTY AMOUNT_CENTS   Orders.PlaceOrder
 *   saga-client ADDR charge GLOBAL_ID CUSTOMER AMOUNT_CENTS    Payments.Charge (a callback)
 *   saga-client ADDR refund GLOBAL_ID                          Payments.Refund
 *   saga-client ADDR reserve GLOBAL_ID SKU QTY                 Inventory.Reserve
 *   saga-client ADDR release GLOBAL_ID                         Inventory.Release
 *
 * Prints one line, key=value pairs; exits 0 on OK, 1 on a gRPC error (printed), 2 on usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shop/v1/inventory.pb-c.h"
#include "shop/v1/orders.pb-c.h"
#include "shop/v1/payments.pb-c.h"
#include "sx_rpc.h"

static int usage(void) {
  fprintf(stderr,
          "usage: saga-client ADDR place KEY CUSTOMER SKU QTY AMOUNT_CENTS\n"
          "       saga-client ADDR charge GLOBAL_ID CUSTOMER AMOUNT_CENTS\n"
          "       saga-client ADDR refund|release GLOBAL_ID\n"
          "       saga-client ADDR reserve GLOBAL_ID SKU QTY\n");
  return 2;
}

static int step_call(grpc_channel *ch, const char *path, const ProtobufCMessage *req) {
  ProtobufCMessage *out = NULL;
  char msg[256];
  int rc = sx_call(ch, path, req, &shop__v1__step_reply__descriptor, 30000, &out, msg, sizeof msg);
  if (rc != GRPC_STATUS_OK) {
    printf("error=%d message=\"%s\"\n", rc, msg);
    return 1;
  }
  const Shop__V1__StepReply *r = (const Shop__V1__StepReply *)out;
  printf("status=%s decision=%s attempt=%llu ran=%d takeover=%d applied_earlier=%d\n", r->status,
         r->decision, (unsigned long long)r->attempt, r->ran, r->takeover, r->applied_earlier);
  protobuf_c_message_free_unpacked(out, NULL);
  return 0;
}

static int run(grpc_channel *ch, int argc, char **argv) {
  const char *cmd = argv[2];
  if (strcmp(cmd, "place") == 0 && argc == 8) {
    Shop__V1__PlaceOrderRequest q = SHOP__V1__PLACE_ORDER_REQUEST__INIT;
    q.request_key = argv[3];
    q.customer = argv[4];
    q.sku = argv[5];
    q.qty = atoi(argv[6]);
    q.amount_cents = atoll(argv[7]);
    ProtobufCMessage *out = NULL;
    char msg[256];
    int rc = sx_call(ch, "/shop.v1.Orders/PlaceOrder", &q.base,
                     &shop__v1__place_order_reply__descriptor, 60000, &out, msg, sizeof msg);
    if (rc != GRPC_STATUS_OK) {
      printf("error=%d message=\"%s\"\n", rc, msg);
      return 1;
    }
    const Shop__V1__PlaceOrderReply *r = (const Shop__V1__PlaceOrderReply *)out;
    printf("global_id=%s status=%s reason=%s saga_created=%d\n", r->global_id, r->status,
           *r->reason ? r->reason : "-", r->saga_created);
    protobuf_c_message_free_unpacked(out, NULL);
    return 0;
  }
  if (strcmp(cmd, "charge") == 0 && argc == 6) {
    Shop__V1__ChargeRequest q = SHOP__V1__CHARGE_REQUEST__INIT;
    q.global_id = argv[3];
    q.customer = argv[4];
    q.amount_cents = atoll(argv[5]);
    return step_call(ch, "/shop.v1.Payments/Charge", &q.base);
  }
  if (strcmp(cmd, "refund") == 0 && argc == 4) {
    Shop__V1__RefundRequest q = SHOP__V1__REFUND_REQUEST__INIT;
    q.global_id = argv[3];
    return step_call(ch, "/shop.v1.Payments/Refund", &q.base);
  }
  if (strcmp(cmd, "reserve") == 0 && argc == 6) {
    Shop__V1__ReserveRequest q = SHOP__V1__RESERVE_REQUEST__INIT;
    q.global_id = argv[3];
    q.sku = argv[4];
    q.qty = atoi(argv[5]);
    return step_call(ch, "/shop.v1.Inventory/Reserve", &q.base);
  }
  if (strcmp(cmd, "release") == 0 && argc == 4) {
    Shop__V1__ReleaseRequest q = SHOP__V1__RELEASE_REQUEST__INIT;
    q.global_id = argv[3];
    return step_call(ch, "/shop.v1.Inventory/Release", &q.base);
  }
  return usage();
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  grpc_channel *ch = sx_channel(argv[1]);
  int rc = run(ch, argc, argv);
  sx_channel_close(ch);
  return rc;
}
