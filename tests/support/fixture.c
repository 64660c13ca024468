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
  for (int i = 0; conf->args && conf->args[i]; i++) {
    cr_assert_lt(n, 31, "too many coordinator arguments");
    args[n++] = conf->args[i];
  }
  args[n] = NULL;
  h_srv_start(&f->s, NULL, args);
  h_tenant(f->t);
  if (!conf->no_client) f->c = h_client(&f->s, f->t, conf->deadline_ms);
}

void h_fixture_stop(h_fixture *f) {
  idem_close(f->c);
  f->c = NULL;
  int st = h_srv_stop(&f->s);
  if (!f->any_exit) cr_assert_eq(st, 0, "the coordinator did not drain and exit 0 on SIGTERM");
}

void h_setup(void) {
  h_fixture_start(&H, NULL);
}

void h_teardown(void) {
  h_fixture_stop(&H);
}
