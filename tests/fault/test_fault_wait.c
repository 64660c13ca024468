/* A leader that stops leading answers the calls waiting on a step in progress (wait_ms)
 * UNAVAILABLE "not the leader" as soon as it knows, instead of holding them to their wait's end:
 * etcd is killed, the leader stops serving within its TTL, and so do its waiters. */
#include <criterion/criterion.h>
#include <grpc/grpc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fault.h"

typedef struct raw_waiter {
  pthread_t th;
  const char *addr, *tenant, *gid;
  int status;
  char details[256];
  int64_t answered_ms;
} raw_waiter;

/* Appends field f as a short length-delimited value (< 128 bytes). */
static size_t put_str(uint8_t *out, size_t n, unsigned f, const void *v, size_t len) {
  out[n++] = (uint8_t)(f << 3 | 2);
  out[n++] = (uint8_t)len;
  memcpy(out + n, v, len);
  return n + len;
}

static void *raw_waiter_main(void *p) {
  raw_waiter *w = p;
  uint8_t key[160], req[200];
  size_t nk = put_str(key, 0, 1, w->gid, strlen(w->gid));
  nk = put_str(key, nk, 2, "payment", 7);
  nk = put_str(key, nk, 3, "charge", 6);
  key[nk++] = 4 << 3; /* phase: FORWARD */
  key[nk++] = 1;
  size_t n = put_str(req, 0, 1, key, nk);
  req[n++] = 4 << 3; /* wait_ms 10000 (h_raw_call's deadline is 5 s), as a varint */
  req[n++] = (uint8_t)(10000 & 0x7f) | 0x80;
  req[n++] = (uint8_t)(10000 >> 7);
  w->status = h_raw_call(w->addr, "/idem.v1.Coordinator/BeginStep", w->tenant, req, n, w->details,
                         sizeof w->details);
  w->answered_ms = h_now_ms();
  return NULL;
}

Test(fault, a_leader_that_stops_leading_answers_its_waiters, .fini = f_fini, .timeout = 90) {
  static cluster cl; /* static: f_fini may stop it after a failed assertion */
  f_cluster_start(&cl, 2);
  char tenant[64], gid[80];
  h_tenant(tenant);
  int old = f_leader(&cl, NULL);
  cr_assert_geq(old, 0);
  idem_client *direct = f_client(&cl, old, tenant, 2000);
  h_unique("wait", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(direct, &k, NULL, 0, 60000, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);

  raw_waiter w = {.addr = cl.nodes[old].addr, .tenant = tenant, .gid = gid};
  cr_assert_eq(pthread_create(&w.th, NULL, raw_waiter_main, &w), 0);
  /* the waiter parks; it is answered only by what follows */
  H_WAIT(h_metric(cl.mport[old], "idem_begin_step_waiters") >= 1, 5000,
         "the BeginStep waits at node %d (idem_begin_step_waiters)", old + 1);
  int64_t t0 = h_now_ms();
  etcd_kill(&cl.etcd);
  pthread_join(w.th, NULL);
  int64_t took = w.answered_ms - t0;
  printf("etcd killed: the leader's waiter answered after %lld ms: status %d (%s)\n",
         (long long)took, w.status, w.details);
  fflush(stdout);
  cr_assert_eq(w.status, GRPC_STATUS_UNAVAILABLE, "status %d: %s", w.status, w.details);
  cr_assert(strstr(w.details, "not the leader") != NULL, "%s", w.details);
  H_EXPECT_TIMING(took <= F_TTL * 1000 + 1000, "answered %lld ms after etcd died",
                  (long long)took);
  idem_close(direct);
  etcd_restart(&cl.etcd);
  f_cluster_stop(&cl);
}
