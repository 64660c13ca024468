/* shop.h — acceptance-test support for the saga example: a real idem-coordinator (the
 * shared harness), the three example services as real processes on loopback, each with its
 * own schema in $IDEM_TEST_PG_URL, and the cross-check of the four tables.
 *
 * Every shop has its own tenant and schemas (<prefix>_order, _payment, _inventory), so tests
 * run in parallel. Processes are started with spawn_start (spawn.h), so they die with the test
 * if it is killed: start, restart and kill services from the test's main thread only. Waits
 * are conditions polled against deadlines.
 */
#ifndef SAGA_SHOP_H
#define SAGA_SHOP_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"
#include "shop/v1/inventory.pb-c.h"
#include "shop/v1/orders.pb-c.h"
#include "shop/v1/payments.pb-c.h"
#include "sx_rpc.h"

typedef struct svc {
  const char *name; /* order, payment, inventory */
  char addr[64];
  int port;
  pid_t pid;
  char log[256];
  int starts;
} svc;

typedef struct shop_conf {
  const char *stock;      /* inventory --stock, e.g. "widget=100" */
  uint32_t lease_ms;      /* 0 = 500 */
  int threads;            /* per service; 0 = 8 */
  const char *crash_rate; /* --crash-rate for every service, NULL = none */
} shop_conf;

typedef struct shop {
  srv coord;
  char tenant[64];
  char prefix[48];
  char schema[3][64]; /* order, payment, inventory */
  shop_conf conf;
  svc order, payment, inventory;
  grpc_channel *order_ch, *pay_ch, *inv_ch;
  idem_client *idem;
  PGconn *pg;
} shop;

/* Starts the coordinator and the three services (waits until each listens). */
void shop_start(shop *s, const shop_conf *conf);
/* SIGTERMs the services (each must exit 0: clean drain, no leak under ASan), stops the
 * coordinator, drops the schemas. */
void shop_stop(shop *s);

/* (Re)starts v with the shop's flags plus extra (NULL-terminated, may be NULL); waits until it
 * listens. */
void svc_start(shop *s, svc *v, const char *const *extra);
void svc_kill9(svc *v);
/* True once v has exited (reaped; pid becomes 0). */
bool svc_exited(svc *v);
/* Waits up to timeout_ms for v to exit by itself (a crash point); true if it did. */
bool svc_wait_exit(svc *v, int64_t timeout_ms);

/* Orders.PlaceOrder once (timeout_ms per call). Returns the gRPC status; *out owned by the
 * caller on OK (protobuf_c_message_free_unpacked). */
int shop_place(shop *s, const char *key, const char *customer, const char *sku, int qty,
               int64_t amount, int64_t timeout_ms, Shop__V1__PlaceOrderReply **out, char *msg,
               size_t msg_len);
/* A participant call (Charge, Refund, Reserve, Release) once; *out owned on OK. */
int shop_step(grpc_channel *ch, const char *path, const ProtobufCMessage *req,
              Shop__V1__StepReply **out, char *msg, size_t msg_len);

/* SQL against the shop: "{o}", "{p}", "{i}" in sql are replaced by the order, payment and
 * inventory schemas. The first column of the first row as an integer (-1: no row, or NULL). */
long long shop_int(shop *s, const char *sql, const char *param);

typedef struct shop_counts {
  long sagas, confirmed, cancelled;
  long orders, charges, refunds, reservations, released, declined, out_of_stock;
  long coord_steps, takeovers, applied_earlier, null_compensations, barrier_rows;
  long mismatches;
} shop_counts;

/* Cross-checks the four tables (orders, ledger+accounts, stock+reservations, the coordinator's
 * steps through GetSaga) for the sagas gids[i] whose client saw status[i] ("confirmed" or
 * "cancelled"), plus the global invariants (no double charge, no double reservation, stock
 * conserved, accounts = ledger). Prints every mismatch and the counts; returns the counts. */
shop_counts shop_check(shop *s, const char *const *gids, const char *const *status, size_t n);

#endif
