/* support_shop.c — see shop.h. */
#include <criterion/criterion.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shop.h"

static void bin_path(const char *name, char *out, size_t n) {
  const char *dir = getenv("IDEM_SAGA_BIN_DIR");
  if (dir && *dir) {
    snprintf(out, n, "%s/saga-%s", dir, name);
    return;
  }
  char coord[512];
  snprintf(coord, sizeof coord, "%s", h_env("IDEM_COORDINATOR_BIN"));
  char *server_dir = dirname(coord); /* <build>/server */
  snprintf(out, n, "%s/../saga-examples/saga-%s", server_dir, name);
}

/* Starts v (spawn_start) with its output appended to v->log; sets v->pid, counts the start. */
static pid_t svc_spawn(shop *s, svc *v, const char *const *extra) {
  char bin[600], lease[16], threads[16];
  bin_path(v->name, bin, sizeof bin);
  snprintf(lease, sizeof lease, "%u", s->conf.lease_ms);
  snprintf(threads, sizeof threads, "%d", s->conf.threads);
  const char *schema = v == &s->order ? s->schema[0] : v == &s->payment ? s->schema[1] : s->schema[2];
  const char *argv[40];
  int n = 0;
  argv[n++] = bin;
  argv[n++] = "--listen";
  argv[n++] = v->addr;
  argv[n++] = "--pg";
  argv[n++] = h_env("IDEM_TEST_PG_URL");
  argv[n++] = "--schema";
  argv[n++] = schema;
  argv[n++] = "--coordinator";
  argv[n++] = s->coord.addr;
  argv[n++] = "--tenant";
  argv[n++] = s->tenant;
  argv[n++] = "--lease-ms";
  argv[n++] = lease;
  argv[n++] = "--threads";
  argv[n++] = threads;
  if (v == &s->order) {
    argv[n++] = "--payments";
    argv[n++] = s->payment.addr;
    argv[n++] = "--inventory";
    argv[n++] = s->inventory.addr;
  }
  if (v == &s->inventory && s->conf.stock) {
    argv[n++] = "--stock";
    argv[n++] = s->conf.stock;
  }
  if (s->conf.crash_rate) {
    argv[n++] = "--crash-rate";
    argv[n++] = s->conf.crash_rate;
  }
  for (int i = 0; extra && extra[i] && n < 38; i++) argv[n++] = extra[i];
  argv[n] = NULL;

  pid_t pid = spawn_start(argv, &(spawn_opts){.log = v->log, .append = true});
  v->pid = pid;
  v->starts++;
  return pid;
}

/* Starts v and waits until it listens (h_wait_listening). Only its first start may move to
 * another port: later starts keep the one the other services were given. */
void svc_start(shop *s, svc *v, const char *const *extra) {
  for (int attempt = 1;; attempt++) {
    int listened = h_log_count(v->log, "listening"), refused = h_log_count(v->log, "cannot listen");
    char what[64];
    snprintf(what, sizeof what, "saga-%s", v->name);
    pid_t pid = svc_spawn(s, v, extra);
    if (h_wait_listening(pid, v->log, v->port, listened, refused, what)) return;
    v->pid = 0;
    if (v->starts > 1 || attempt == H_START_TRIES) {
      h_dump_log(v->log);
      cr_assert_fail("%s could not listen on %s", what, v->addr);
    }
    v->starts = 0;
    v->port = h_free_port();
    snprintf(v->addr, sizeof v->addr, "127.0.0.1:%d", v->port);
  }
}

void svc_kill9(svc *v) {
  if (v->pid <= 0) return;
  spawn_kill(v->pid);
  v->pid = 0;
}

bool svc_exited(svc *v) {
  if (v->pid <= 0) return true;
  if (spawn_reap(v->pid, NULL)) {
    v->pid = 0;
    return true;
  }
  return false;
}

bool svc_wait_exit(svc *v, int64_t timeout_ms) {
  bool exited;
  H_WAITED_EVERY(5, exited, svc_exited(v), timeout_ms);
  return exited;
}

static int svc_stop(svc *v) {
  if (v->pid <= 0) return 0;
  int st = spawn_stop(v->pid, 20000);
  v->pid = 0;
  return st;
}

static void init_svc(shop *s, svc *v, const char *name) {
  v->name = name;
  v->port = h_free_port();
  snprintf(v->addr, sizeof v->addr, "127.0.0.1:%d", v->port);
  snprintf(v->log, sizeof v->log, "/tmp/idem-saga-%s-%s.log", s->prefix, name);
  unlink(v->log);
}

void shop_start(shop *s, const shop_conf *conf) {
  static atomic_int counter;
  memset(s, 0, sizeof *s);
  if (conf) s->conf = *conf;
  if (!s->conf.lease_ms) s->conf.lease_ms = 500;
  if (!s->conf.threads) s->conf.threads = 8;
  h_srv_start(&s->coord, NULL, NULL);
  h_tenant(s->tenant);
  snprintf(s->prefix, sizeof s->prefix, "sx%d_%d", (int)getpid(), atomic_fetch_add(&counter, 1));
  snprintf(s->schema[0], sizeof s->schema[0], "%s_order", s->prefix);
  snprintf(s->schema[1], sizeof s->schema[1], "%s_payment", s->prefix);
  snprintf(s->schema[2], sizeof s->schema[2], "%s_inventory", s->prefix);
  init_svc(s, &s->order, "order");
  init_svc(s, &s->payment, "payment");
  init_svc(s, &s->inventory, "inventory");
  svc_start(s, &s->payment, NULL);
  svc_start(s, &s->inventory, NULL);
  svc_start(s, &s->order, NULL);
  s->order_ch = sx_channel(s->order.addr);
  s->pay_ch = sx_channel(s->payment.addr);
  s->inv_ch = sx_channel(s->inventory.addr);
  s->idem = h_client(&s->coord, s->tenant, 0);
  s->pg = pgx_connect(NULL);
}

void shop_stop(shop *s) {
  if (!s->coord.pid) return;
  /* our channels first: a server's drain waits for connected clients to go away */
  sx_channel_close(s->order_ch);
  sx_channel_close(s->pay_ch);
  sx_channel_close(s->inv_ch);
  int rc[3] = {svc_stop(&s->order), svc_stop(&s->payment), svc_stop(&s->inventory)};
  idem_close(s->idem);
  int crc = h_srv_stop(&s->coord);
  for (int i = 0; i < 3; i++) {
    char sql[160];
    snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE", s->schema[i]);
    pgx_exec(s->pg, sql, 0, NULL);
  }
  PQfinish(s->pg);
  const svc *v[3] = {&s->order, &s->payment, &s->inventory};
  for (int i = 0; i < 3; i++) {
    if (rc[i] != 0) h_dump_log(v[i]->log);
    cr_expect_eq(rc[i], 0, "saga-%s exited with %d after SIGTERM", v[i]->name, rc[i]);
    if (rc[i] == 0) unlink(v[i]->log);
  }
  cr_expect_eq(crc, 0, "idem-coordinator exited with %d", crc);
}

int shop_place(shop *s, const char *key, const char *customer, const char *sku, int qty,
               int64_t amount, int64_t timeout_ms, Shop__V1__PlaceOrderReply **out, char *msg,
               size_t msg_len) {
  Shop__V1__PlaceOrderRequest q = SHOP__V1__PLACE_ORDER_REQUEST__INIT;
  q.request_key = (char *)key;
  q.customer = (char *)customer;
  q.sku = (char *)sku;
  q.qty = qty;
  q.amount_cents = amount;
  return sx_call(s->order_ch, "/shop.v1.Orders/PlaceOrder", &q.base,
                 &shop__v1__place_order_reply__descriptor, timeout_ms, (ProtobufCMessage **)out,
                 msg, msg_len);
}

int shop_step(grpc_channel *ch, const char *path, const ProtobufCMessage *req,
              Shop__V1__StepReply **out, char *msg, size_t msg_len) {
  return sx_call(ch, path, req, &shop__v1__step_reply__descriptor, 20000,
                 (ProtobufCMessage **)out, msg, msg_len);
}

/* Replaces {o} {p} {i} with the schemas. */
static void expand(const shop *s, const char *sql, char *out, size_t cap) {
  size_t n = 0;
  for (const char *c = sql; *c && n + 64 < cap; c++) {
    if (c[0] == '{' && c[1] && c[2] == '}' && strchr("opi", c[1])) {
      const char *sch = c[1] == 'o' ? s->schema[0] : c[1] == 'p' ? s->schema[1] : s->schema[2];
      n += (size_t)snprintf(out + n, cap - n, "%s", sch);
      c += 2;
    } else {
      out[n++] = *c;
    }
  }
  out[n] = '\0';
}

long long shop_int(shop *s, const char *sql, const char *param) {
  char q[4096];
  expand(s, sql, q, sizeof q);
  return pgx_exec(s->pg, q, param ? 1 : 0, &param);
}
