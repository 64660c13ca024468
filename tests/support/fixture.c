/* fixture.c — the fixture the suites share (harness.h, h_fixture). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

h_fixture H;

void h_fixture_start(h_fixture *f, const h_fixture_conf *conf) {
  static const h_fixture_conf none;
  if (!conf) conf = &none;
  memset(f, 0, sizeof *f);
  f->any_exit = conf->any_exit;
  const char *args[32];
  int n = 0;
  char metrics[64];
  if (conf->metrics) {
    f->metrics_port = h_free_port();
    snprintf(metrics, sizeof metrics, "127.0.0.1:%d", f->metrics_port);
    args[n++] = "--metrics";
    args[n++] = metrics;
  }
  char prefix[96];
  if (conf->etcd) {
    pgx_db_create("idem_h", f->db, sizeof f->db, f->pg_url, sizeof f->pg_url);
    etcd_start(&f->etcd);
    h_unique("/idem-test/leader-", prefix, sizeof prefix);
    args[n++] = "--etcd";
    args[n++] = f->etcd.url;
    args[n++] = "--election-prefix";
    args[n++] = prefix;
  }
  for (int i = 0; conf->args && conf->args[i]; i++) {
    cr_assert_lt(n, 31, "too many coordinator arguments");
    args[n++] = conf->args[i];
  }
  args[n] = NULL;
  h_srv_start_env(&f->s, f->db[0] ? f->pg_url : NULL, args, conf->env);
  h_tenant(f->t);
  if (!conf->no_client) f->c = h_client(&f->s, f->t, conf->deadline_ms);
  if (conf->etcd) { /* GetStatus answers before the election: wait until it leads */
    idem_client *c = f->c ? f->c : h_client(&f->s, f->t, 0);
    idem_status st = {0};
    idem_error e = {0};
    bool led;
    H_WAITED(led, idem_get_status(c, &st, &e) == IDEM_OK && st.leader, 15000);
    if (c != f->c) idem_close(c);
    if (!led) h_srv_dump_log(&f->s);
    cr_assert(led, "the coordinator did not lead within 15 s");
  }
}

void h_fixture_stop(h_fixture *f) {
  idem_close(f->c);
  f->c = NULL;
  int st = h_srv_stop(&f->s);
  etcd_stop(&f->etcd);
  pgx_db_drop(f->db);
  f->db[0] = '\0';
  if (!f->any_exit) cr_assert_eq(st, 0, "the coordinator did not drain and exit 0 on SIGTERM");
}

void h_setup(void) {
  h_fixture_start(&H, NULL);
}

void h_teardown(void) {
  idem_trace_set(NULL, NULL, NULL); /* a test's trace context does not outlive it */
  h_fixture_stop(&H);
}
