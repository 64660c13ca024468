/* elect_etcd_http.c — POST JSON to etcd's v3 gateway with libcurl (multi interface: a call waits
 * in curl_multi_poll for its socket, its deadline or curl_multi_wakeup, so etcd__conn_wake cuts a
 * wait short at once), the reply read by etcd__reply (elect_etcd_parse.c). */
#include "elect_etcd_http.h"
#include "elect_etcd_parse.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/buf.h"
#include "../util/clock.h"

#define MAX_ENDPOINTS 8
#define MAX_REPLY (1024 * 1024)
#define POLL_MAX_MS (3600 * 1000) /* a wait without a deadline, in int-sized pieces */
#define CONNECT_TIMEOUT_MS 1000

struct etcd_conn {
  CURLM *multi;
  CURL *easy;
  char *endpoints[MAX_ENDPOINTS];
  int n;
  int cur;
  /* the reply being received (util/buf; oom: it could not grow) */
  buf_t reply;
  bool too_big;
  /* a stream (etcd__stream): each complete line of reply goes to on_message */
  etcd_stream_fn on_message;
  void *on_message_arg;
  bool stream_stopped; /* on_message returned false */
};

/* Hands the complete lines of a stream to on_message; false when it asked to stop. */
static bool stream_lines(etcd_conn *c) {
  char *p = c->reply.p;
  size_t n = c->reply.n, at = 0;
  bool go = true;
  while (go && at < n) {
    char *nl = memchr(p + at, '\n', n - at);
    if (!nl) break;
    size_t len = (size_t)(nl - (p + at));
    if (len > 0) {
      cJSON *m = cJSON_ParseWithLength(p + at, len);
      if (m) go = c->on_message(c->on_message_arg, m);
      cJSON_Delete(m);
    }
    at += len + 1;
  }
  if (at > 0) {
    memmove(p, p + at, n - at);
    c->reply.n = n - at;
    p[c->reply.n] = '\0';
  }
  return go;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg) {
  etcd_conn *c = arg;
  size_t n = size * nmemb;
  if (c->reply.n + n + 1 > MAX_REPLY) {
    c->too_big = true;
    return 0;
  }
  buf_putn(&c->reply, ptr, n);
  if (c->reply.oom) return 0;
  if (c->on_message && !stream_lines(c)) {
    c->stream_stopped = true;
    return 0;
  }
  return n;
}

static void global_init_once(void) {
  static atomic_bool done = false;
  static atomic_flag busy = ATOMIC_FLAG_INIT;
  if (atomic_load(&done)) return;
  while (atomic_flag_test_and_set(&busy)) {
  }
  if (!atomic_load(&done)) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    atomic_store(&done, true);
  }
  atomic_flag_clear(&busy);
}

etcd_conn *etcd__conn_new(const char *endpoints) {
  if (!endpoints || !*endpoints) return NULL;
  global_init_once();
  etcd_conn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  const char *p = endpoints;
  while (*p && c->n < MAX_ENDPOINTS) {
    size_t len = strcspn(p, ",");
    while (len > 0 && p[len - 1] == '/') len--; /* "http://h:p/" → "http://h:p" */
    if (len > 0) {
      c->endpoints[c->n] = strndup(p, len);
      if (!c->endpoints[c->n]) goto fail;
      c->n++;
    }
    p += strcspn(p, ",");
    if (*p == ',') p++;
  }
  if (c->n == 0) goto fail;
  c->multi = curl_multi_init();
  c->easy = curl_easy_init();
  if (!c->multi || !c->easy) goto fail;
  return c;
fail:
  etcd__conn_free(c);
  return NULL;
}

void etcd__conn_wake(etcd_conn *c) {
  if (c && c->multi) curl_multi_wakeup(c->multi);
}

void etcd__conn_free(etcd_conn *c) {
  if (!c) return;
  if (c->easy) curl_easy_cleanup(c->easy);
  if (c->multi) curl_multi_cleanup(c->multi);
  for (int i = 0; i < c->n; i++) free(c->endpoints[i]);
  buf_free(&c->reply);
  free(c);
}

etcd_fail etcd__post(etcd_conn *c, const char *path, const cJSON *body, int64_t timeout_ms,
                     const atomic_bool *abort, cJSON **out, err_t *err) {
  *out = NULL;
  char *json = cJSON_PrintUnformatted(body);
  if (!json) {
    err_oom(err);
    return ETCD_NOT_SENT;
  }
  char url[512];
  snprintf(url, sizeof url, "%s%s", c->endpoints[c->cur], path);
  buf_clear(&c->reply);
  c->too_big = false;

  CURL *e = c->easy;
  curl_easy_reset(e);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, json);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
  curl_multi_add_handle(c->multi, e);

  int64_t deadline = timeout_ms >= 0 ? clock_mono_ms() + timeout_ms : INT64_MAX;
  etcd_fail fail = ETCD_OK;
  CURLcode done_code = CURLE_OK;
  bool done = false;
  while (!done) {
    int running = 0;
    CURLMcode mc = curl_multi_perform(c->multi, &running);
    if (mc != CURLM_OK) {
      err_set(err, ERR_UNAVAILABLE, "etcd: %s", curl_multi_strerror(mc));
      fail = ETCD_UNKNOWN;
      break;
    }
    int q;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(c->multi, &q)))
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == e) {
        done = true;
        done_code = msg->data.result;
      }
    if (done) break;
    if (abort && atomic_load(abort)) {
      err_set(err, ERR_UNAVAILABLE, "etcd: request abandoned");
      fail = ETCD_ABORTED;
      break;
    }
    int64_t now = clock_mono_ms();
    if (now >= deadline) {
      err_set(err, ERR_UNAVAILABLE, "etcd: timeout after %" PRId64 " ms", timeout_ms);
      fail = ETCD_UNKNOWN;
      break;
    }
    /* until the socket is ready, curl's own timer, the deadline or etcd__conn_wake */
    int64_t wait = deadline - now;
    if (wait > POLL_MAX_MS) wait = POLL_MAX_MS;
    curl_multi_poll(c->multi, NULL, 0, (int)wait, NULL);
  }
  long status = 0;
  if (done) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  curl_multi_remove_handle(c->multi, e);
  curl_slist_free_all(hdrs);
  free(json);
  if (fail != ETCD_OK) return fail;

  if (done_code != CURLE_OK) {
    bool unsent = done_code == CURLE_COULDNT_CONNECT || done_code == CURLE_COULDNT_RESOLVE_HOST;
    /* a stream we cut short (too big) or a reply we had everything of still parses below */
    if (!(done_code == CURLE_WRITE_ERROR && !c->too_big && c->reply.n > 0)) {
      err_set(err, ERR_UNAVAILABLE, "etcd: %s", curl_easy_strerror(done_code));
      if (unsent && c->n > 1) c->cur = (c->cur + 1) % c->n; /* try the next endpoint next time */
      return unsent ? ETCD_NOT_SENT : ETCD_UNKNOWN;
    }
  }
  return etcd__reply(c->reply.p ? c->reply.p : "", c->reply.n, status, out, err);
}

etcd_fail etcd__stream(etcd_conn *c, const char *path, const cJSON *body, int64_t timeout_ms,
                       const atomic_bool *abort, etcd_stream_fn on_message, void *arg,
                       err_t *err) {
  c->on_message = on_message;
  c->on_message_arg = arg;
  c->stream_stopped = false;
  cJSON *first = NULL;
  err_t e;
  err_clear(&e);
  etcd_fail f = etcd__post(c, path, body, timeout_ms, abort, &first, &e);
  cJSON_Delete(first);
  bool stopped = c->stream_stopped;
  c->on_message = NULL;
  c->on_message_arg = NULL;
  if (stopped || f == ETCD_ABORTED) return ETCD_OK;
  if (f == ETCD_OK) { /* the stream ended with a reply: etcd closed it */
    err_set(err, ERR_UNAVAILABLE, "etcd %s: the stream ended", path);
    return ETCD_UNKNOWN;
  }
  *err = e;
  return f;
}
