/* test_exemplars.c — OpenMetrics exemplars (docs/api.md §22) scraped by Debian's real Prometheus
 * (--enable-feature=exemplar-storage) from a live coordinator on loopback: /metrics answers
 * OpenMetrics (ending in `# EOF`) to an Accept header asking for it and Prometheus text
 * otherwise; a BeginStep the test makes slow (it waits on a step in progress, wait_ms) under a
 * trace of its own is found by /api/v1/query_exemplars with that trace id and its latency. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture.h"
#include "harness.h"
#include "util/clock.h"

#define SLOW "5107000000000000000000000000abcd"
#define FAST "fa57000000000000000000000000abcd"
#define SLOW_MS 1200

static void setup(void) {
  h_fixture_start(&H, &(h_fixture_conf){.metrics = true});
}

TestSuite(exemplars, .init = setup, .fini = h_teardown, .timeout = 90);

/* GET url with curl (extra arguments before it); the body, and the headers into *headers. */
static char *curl_get(const char *accept, const char *url, char **headers) {
  char tag[64], out[96], hdr[96];
  h_unique("curl", tag, sizeof tag);
  snprintf(out, sizeof out, "/tmp/idem-%s.out", tag);
  snprintf(hdr, sizeof hdr, "/tmp/idem-%s.hdr", tag);
  char acc[128];
  snprintf(acc, sizeof acc, "Accept: %s", accept);
  const char *argv[] = {"curl", "-sS", "--max-time", "10", "-H", acc,
                        "-D",   hdr,   "-o",         out,  url,  NULL};
  cr_assert_eq(spawn_run(argv, NULL, 15000), 0, "curl %s", url);
  char *h = h_read_file(hdr), *body = h_read_file(out);
  unlink(hdr);
  unlink(out);
  if (headers)
    *headers = h;
  else
    free(h);
  return body;
}

/* A BeginStep under trace that waits wait_ms on the step gid is begun (lease 60 s) and answers
 * ABORTED after it: the call takes about wait_ms. */
static void call_under(const char *trace, const char *gid, uint32_t wait_ms) {
  idem_error e = {0};
  char tp[64];
  snprintf(tp, sizeof tp, "00-%s-00f067aa0ba902b7-01", trace);
  cr_assert_eq(idem_trace_set(tp, NULL, &e), IDEM_OK);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  idem_begin b;
  int rc = idem_step_begin_wait(H.c, &k, NULL, 0, 0, wait_ms, &b, &e);
  cr_assert_eq(rc, IDEM_ABORTED, "%d %s", rc, e.message);
  idem_trace_set(NULL, NULL, NULL);
}

/* GET path (query_exemplars) from Prometheus at port: whether an exemplar with trace id SLOW is
 * there (its value into *value); the body into *last (malloc'd, the previous one freed). A 503
 * (listening, its storage not ready yet) or any other answer is "not yet". */
static bool exemplar_of(int port, const char *path, char **last, double *value) {
  free(*last);
  *last = NULL;
  if (h_http_get(port, path, last) != 200) return false;
  cJSON *j = cJSON_Parse(*last), *series;
  bool found = false;
  cJSON_ArrayForEach(series, cJSON_GetObjectItem(j, "data")) {
    cJSON *ex;
    cJSON_ArrayForEach(ex, cJSON_GetObjectItem(series, "exemplars")) {
      cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(ex, "labels"), "trace_id");
      if (cJSON_IsString(t) && strcmp(t->valuestring, SLOW) == 0) {
        found = true;
        *value = strtod(cJSON_GetObjectItem(ex, "value")->valuestring, NULL);
      }
    }
  }
  cJSON_Delete(j);
  return found;
}

Test(exemplars, openmetrics_on_request_and_prometheus_finds_the_slow_call) {
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  idem_begin b;
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 60000, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  call_under(FAST, gid, 0);       /* answered at once: a small bucket */
  call_under(SLOW, gid, SLOW_MS); /* waits SLOW_MS: the 2.5 s bucket */

  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", H.metrics_port);
  char *hdr;
  char *om = curl_get("application/openmetrics-text;version=1.0.0,text/plain;q=0.5", url, &hdr);
  cr_assert(strstr(hdr, "application/openmetrics-text"), "%s", hdr);
  size_t n = strlen(om);
  cr_assert(n > 6 && strcmp(om + n - 6, "# EOF\n") == 0, "no # EOF at the end");
  cr_assert(strstr(om, "# TYPE idem_rpc_calls counter\n"), "a counter family keeps _total");
  /* the slow call is the exemplar of BeginStep's 2.5 s bucket (the first above 1.2 s) */
  const char *x = strstr(om, "# {trace_id=\"" SLOW "\"} 1.");
  cr_assert_not_null(x, "%s", om);
  const char *bol = x;
  while (bol > om && bol[-1] != '\n') bol--;
  cr_assert_eq(
      strncmp(
          bol, "idem_rpc_duration_seconds_bucket{method=\"Coordinator/BeginStep\",le=\"2.5\"} ",
          strlen("idem_rpc_duration_seconds_bucket{method=\"Coordinator/BeginStep\",le=\"2.5\"} ")),
      0, "%.200s", bol);
  /* the fast call is another bucket's exemplar (which one depends on the machine's load) */
  cr_assert(strstr(om, "# {trace_id=\"" FAST "\"} "), "%s", om);
  free(hdr);
  free(om);
  char *plain = curl_get("text/plain", url, &hdr);
  cr_assert(strstr(hdr, "text/plain; version=0.0.4"), "%s", hdr);
  cr_assert_null(strstr(plain, "# EOF"));
  cr_assert_null(strstr(plain, "trace_id"));
  free(hdr);
  free(plain);

  /* Prometheus scrapes the coordinator every 500 ms, with exemplar storage */
  char dir[64], cfg[128], log[128];
  h_unique("/tmp/idem-prom", dir, sizeof dir);
  cr_assert_eq(mkdir(dir, 0700), 0);
  snprintf(cfg, sizeof cfg, "%s/prometheus.yml", dir);
  snprintf(log, sizeof log, "%s/prometheus.log", dir);
  FILE *f = fopen(cfg, "w");
  fprintf(f,
          "global: {scrape_interval: 500ms, scrape_timeout: 400ms}\n"
          "scrape_configs:\n"
          "  - job_name: idem\n"
          "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
          H.metrics_port);
  fclose(f);
  pid_t pid = 0;
  int port = 0;
  for (int tries = 0; tries < H_START_TRIES && !pid; tries++) {
    port = h_free_port();
    char listen[64], cfgarg[160], data[160];
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", port);
    snprintf(cfgarg, sizeof cfgarg, "--config.file=%s", cfg);
    snprintf(data, sizeof data, "--storage.tsdb.path=%s/data", dir);
    const char *argv[] = {
        "prometheus",       cfgarg, data, listen, "--enable-feature=exemplar-storage",
        "--log.level=warn", NULL};
    pid = spawn_start(argv, &(spawn_opts){.log = log});
    int st;
    bool up, exited = false;
    H_WAITED(up, h_port_open(port) || (exited = spawn_reap(pid, &st)), 30000);
    if (exited) {
      pid = 0; /* the port was taken meanwhile: another one */
      continue;
    }
    if (!up) h_dump_log(log);
    cr_assert(up, "prometheus did not listen on 127.0.0.1:%d within 30 s", port);
  }
  cr_assert(pid, "prometheus did not start");

  /* /api/v1/query_exemplars for BeginStep's buckets, polled until the slow call is there */
  char path[512];
  snprintf(path, sizeof path,
           "/api/v1/"
           "query_exemplars?query=idem_rpc_duration_seconds_bucket%%7Bmethod%%3D%%22Coordinator%%"
           "2FBeginStep"
           "%%22%%7D&start=%lld&end=%lld",
           (long long)(clock_wall_ms() / 1000 - 600), (long long)(clock_wall_ms() / 1000 + 600));
  bool found;
  double value = 0;
  char *last = NULL;
  H_WAITED(found, exemplar_of(port, path, &last, &value), 30000);
  if (!found) h_dump_log(log);
  cr_assert(found, "no exemplar with trace id %s: %s", SLOW, last);
  free(last);
  cr_assert(value >= SLOW_MS / 1000.0 * 0.9 && value < 2.5, "exemplar value %f", value);
  cr_assert_eq(spawn_stop(pid, 10000), 0);
  char rm[128];
  snprintf(rm, sizeof rm, "%s", dir);
  const char *argv[] = {"rm", "-rf", rm, NULL};
  spawn_run(argv, NULL, 10000);
}
