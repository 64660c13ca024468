/* libidem_runner.c — libidem's runner of the conformance scenarios
 * (client-lib/conformance/scenarios.json; format and environment in that folder's README.md).
 * Run through client-lib/conformance/run, which starts the coordinators and sets the environment.
 * Prints "ok NAME" or "not ok NAME: what differed" a scenario ("skip NAME: needs WHAT" for one
 * that needs a capability this runner lacks); exits 0 only when all it ran passed. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "idem/idem.h"

#define MAX_BG 8

/* The capabilities a scenario's "needs" may name that this runner has. */
static const char *const HAS[] = {"resolve", "resolve_bulk"};

typedef struct outcome_words {
  const char *word;
  idem_outcome value;
} outcome_words;
static const outcome_words OUTCOMES[] = {{"succeeded", IDEM_OUTCOME_SUCCEEDED},
                                         {"failed", IDEM_OUTCOME_FAILED},
                                         {"retryable", IDEM_OUTCOME_RETRYABLE},
                                         {"unknown", IDEM_OUTCOME_UNKNOWN}};

static const char *const DECISIONS[] = {"UNSPECIFIED", "PROCEED", "REPLAY",
                                        "SKIP_NULL_COMPENSATION", "SKIP_ALREADY_COMPENSATED",
                                        "PROCEED_UNGUARDED"};

static const char *const CODES[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                    "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                                    "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                                    "UNAUTHENTICATED"};

static const char *code_name(int code) {
  if (code >= 0 && code < (int)(sizeof CODES / sizeof CODES[0])) return CODES[code];
  if (code == IDEM_STEP_FAILED) return "STEP_FAILED";
  if (code == IDEM_STEP_UNKNOWN) return "STEP_UNKNOWN";
  if (code == IDEM_NOMEM) return "NOMEM";
  return "BAD_RESPONSE";
}

static const char *outcome_word(idem_outcome o) {
  for (size_t i = 0; i < sizeof OUTCOMES / sizeof OUTCOMES[0]; i++)
    if (OUTCOMES[i].value == o) return OUTCOMES[i].word;
  return "unspecified";
}

static idem_outcome outcome_of(const char *word) {
  for (size_t i = 0; word && i < sizeof OUTCOMES / sizeof OUTCOMES[0]; i++)
    if (strcmp(OUTCOMES[i].word, word) == 0) return OUTCOMES[i].value;
  return IDEM_OUTCOME_UNSPECIFIED;
}

static const char *str_of(const cJSON *o, const char *name, const char *dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsString(v) ? v->valuestring : dflt;
}

static double num_of(const cJSON *o, const char *name, double dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* What one call produced, in the terms `expect` checks. */
typedef struct got {
  int code;
  char reason[32];
  char detail[256], hint[256]; /* idem_error_detail, idem_error_hint: read on the call's thread */
  bool ran, replayed, takeover, unguarded, journaled;
  bool outcome_unknown; /* the error's outcome_unknown */
  idem_decision decision;
  uint64_t attempt;
  idem_outcome outcome;
  int32_t result_code;
  char body[512];
  long count;
  uint32_t retention_s, lease_ms, key_retention_s; /* policy_set: the stored policy */
} got;

/* The action of a `run`: reports what the scenario says and counts its calls. */
typedef struct action {
  idem_outcome outcome;
  int32_t code;
  const char *body;
  int calls;
  long sleep_ms; /* the action takes this long */
} action;

/* A scenario's "sleep" step: the time is the scenario's subject (a lease let run out). */
static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void action_fn(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  (void)ctx;
  action *a = arg;
  a->calls++;
  if (a->sleep_ms > 0) sleep_ms(a->sleep_ms);
  out->outcome = a->outcome;
  out->code = a->code;
  out->body = a->body;
  out->body_len = strlen(a->body);
}

#define MAX_COUNTED 4

typedef struct scene {
  idem_client *client;
  struct {
    char method[48]; /* "METHOD code" */
    long seen;
  } counted[MAX_COUNTED]; /* count_calls: the last total of each method */
  size_t n_counted;
  char global_id[IDEM_GLOBAL_ID_MAX + 1];
  char journal[512];
  bool has_journal;
} scene;

static void key_of(const scene *s, const cJSON *call, idem_step_key *k) {
  k->global_id = s->global_id;
  k->service = str_of(call, "service", "conformance");
  k->operation = str_of(call, "step", "step");
  k->phase = strcmp(str_of(call, "phase", "forward"), "compensation") == 0 ? IDEM_COMPENSATION
                                                                             : IDEM_FORWARD;
}

static void copy_body(got *g, const idem_result *r) {
  size_t n = r->body_len < sizeof g->body - 1 ? r->body_len : sizeof g->body - 1;
  if (n) memcpy(g->body, r->body, n);
  g->body[n] = '\0';
  g->outcome = r->outcome;
  g->result_code = r->code;
}

static void note_err(got *g, int rc, const idem_error *err) {
  g->code = rc;
  snprintf(g->reason, sizeof g->reason, "%s", rc ? err->reason : "");
  snprintf(g->detail, sizeof g->detail, "%s", rc ? idem_error_detail(err) : "");
  snprintf(g->hint, sizeof g->hint, "%s", rc ? idem_error_hint(err) : "");
  g->outcome_unknown = rc && err->outcome_unknown;
}

typedef struct run_job {
  scene *s;
  const cJSON *call;
  got g;
  pthread_t thread;
  const char *name;
} run_job;

static void do_run(scene *s, const cJSON *call, got *g) {
  idem_step_key k;
  key_of(s, call, &k);
  const cJSON *act = cJSON_GetObjectItemCaseSensitive(call, "action");
  action a = {outcome_of(str_of(act, "outcome", "succeeded")),
              (int32_t)num_of(act, "code", 0), str_of(act, "body", ""), 0,
              (long)num_of(act, "sleep_ms", 0)};
  const cJSON *opt = cJSON_GetObjectItemCaseSensitive(call, "options");
  idem_run_options ro = {0};
  ro.deadline_ms = (int64_t)num_of(opt, "deadline_ms", 10000);
  ro.no_wait = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(opt, "no_wait"));
  ro.lease_ms = (uint32_t)num_of(opt, "lease_ms", 0);
  const char *fp = str_of(call, "fingerprint", "");
  idem_run_report rep = {0};
  idem_error err = {0};
  int rc = idem_step_run(s->client, &k, (const uint8_t *)fp, strlen(fp), action_fn, &a, &ro, &rep,
                         &err);
  note_err(g, rc, &err);
  g->ran = a.calls > 0;
  if (rc == IDEM_OK || rc == IDEM_STEP_FAILED) {
    g->replayed = rep.replayed;
    g->takeover = rep.takeover;
    g->unguarded = rep.unguarded;
    g->journaled = rep.journaled;
    g->decision = rep.decision;
    g->attempt = rep.attempt;
    copy_body(g, &rep.result);
  }
  idem_run_report_clear(&rep);
}

static void *run_thread(void *arg) {
  run_job *j = arg;
  do_run(j->s, j->call, &j->g);
  return NULL;
}

static void do_begin(scene *s, const cJSON *call, got *g) {
  idem_step_key k;
  key_of(s, call, &k);
  const char *fp = str_of(call, "fingerprint", "");
  idem_begin b = {0};
  idem_error err = {0};
  int rc = idem_step_begin(s->client, &k, (const uint8_t *)fp, strlen(fp),
                           (uint32_t)num_of(call, "lease_ms", 0), &b, &err);
  note_err(g, rc, &err);
  if (rc == IDEM_OK) {
    g->decision = b.decision;
    g->attempt = b.attempt;
    g->takeover = b.takeover;
    if (b.has_result) copy_body(g, &b.result);
  }
  idem_begin_clear(&b);
}

static void do_complete(scene *s, const cJSON *call, got *g) {
  idem_step_key k;
  key_of(s, call, &k);
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(call, "result");
  const char *body = str_of(res, "body", "");
  idem_error err = {0};
  int rc = idem_step_complete(s->client, &k, (uint64_t)num_of(call, "attempt", 0),
                              outcome_of(str_of(res, "outcome", "succeeded")),
                              (int32_t)num_of(res, "code", 0), body, strlen(body), NULL, &err);
  note_err(g, rc, &err);
}

/* resolve: one Admin.ResolveStep; the record it answers goes to attempt and the result fields. */
static void do_resolve(scene *s, const cJSON *call, got *g) {
  idem_step_key k;
  key_of(s, call, &k);
  const char *body = str_of(call, "body", "");
  idem_resolution res = {.outcome = outcome_of(str_of(call, "outcome", "")),
                         .code = (int32_t)num_of(call, "code", 0),
                         .body = body,
                         .body_len = strlen(body),
                         .reason = str_of(call, "reason", "conformance"),
                         .actor = str_of(call, "actor", "")};
  idem_record rec = {0};
  idem_error err = {0};
  int rc = idem_step_resolve(s->client, &k, &res, &rec, &err);
  note_err(g, rc, &err);
  if (rc == IDEM_OK) {
    g->attempt = rec.attempt;
    if (rec.has_result) copy_body(g, &rec.result);
  }
  idem_record_clear(&rec);
}

/* resolve_bulk: one Admin.ResolveSteps of the scenario saga's IN_PROGRESS steps (of `step` when
 * named), request id "conformance-GLOBAL_ID-N" (N: the call's number); count = steps resolved. */
static void do_resolve_bulk(scene *s, const cJSON *call, int n, got *g) {
  const char *body = str_of(call, "body", "");
  char request_id[IDEM_GLOBAL_ID_MAX + 32];
  snprintf(request_id, sizeof request_id, "conformance-%s-%d", s->global_id, n);
  idem_bulk_resolution in = {
      .filter = {.state = IDEM_STATE_IN_PROGRESS,
                 .global_id = s->global_id,
                 .service = str_of(call, "service", "conformance"),
                 .operation = str_of(call, "step", "")},
      .res = {.outcome = outcome_of(str_of(call, "outcome", "")),
              .code = (int32_t)num_of(call, "code", 0),
              .body = body,
              .body_len = strlen(body),
              .reason = str_of(call, "reason", "conformance"),
              .actor = str_of(call, "actor", "")},
      .dry_run = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(call, "dry_run")),
      .max_steps = (uint32_t)num_of(call, "max_steps", 100),
      .request_id = request_id};
  idem_bulk_result out = {0};
  idem_error err = {0};
  int rc = idem_steps_resolve(s->client, &in, 0, &out, &err);
  note_err(g, rc, &err);
  g->count = rc == IDEM_OK ? (long)out.resolved : 0;
}

static void do_policy_set(scene *s, const cJSON *call, got *g) {
  idem_policy p = {0};
  snprintf(p.service, sizeof p.service, "%s", str_of(call, "service", ""));
  snprintf(p.operation, sizeof p.operation, "%s", str_of(call, "operation", ""));
  p.failure_mode = strcmp(str_of(call, "failure_mode", ""), "fail-open") == 0 ? IDEM_FAIL_OPEN
                                                                                : IDEM_FAIL_CLOSED;
  p.retention_s = (uint32_t)num_of(call, "retention_s", 0);
  p.lease_ms = (uint32_t)num_of(call, "lease_ms", 0);
  p.key_retention_s = (uint32_t)num_of(call, "key_retention_s", 0);
  idem_error err = {0};
  idem_policy out = {0};
  note_err(g, idem_policy_set(s->client, &p, &out, &err), &err);
  g->retention_s = out.retention_s;
  g->lease_ms = out.lease_ms;
  g->key_retention_s = out.key_retention_s;
}

/* count_calls: the leader's idem_rpc_calls_total of METHOD (Coordinator/METHOD when it names no
 * service) with code CODE (default OK; "any": every code summed) from IDEM_METRICS_ADDRESS, less
 * what this scenario's previous count of the method and code saw. */
static void do_count_calls(scene *s, const cJSON *call, got *g, char *why, size_t cap) {
  const char *method = str_of(call, "method", ""), *code = str_of(call, "code", "OK");
  const char *addr = getenv("IDEM_METRICS_ADDRESS");
  char counted[sizeof s->counted[0].method];
  if (!addr || !*addr || !*method ||
      snprintf(counted, sizeof counted, "%s %s", method, code) >= (int)sizeof counted) {
    snprintf(why, cap, "IDEM_METRICS_ADDRESS is not set, or no method, or too long a one");
    return;
  }
  bool any = strcmp(code, "any") == 0;
  char cmd[256], want[160], line[512];
  snprintf(cmd, sizeof cmd, "curl -sf -m 5 http://%s/metrics", addr);
  int n = snprintf(want, sizeof want, "idem_rpc_calls_total{method=\"%s%s\",code=\"",
                   strchr(method, '/') ? "" : "Coordinator/", method);
  if (!any) snprintf(want + n, sizeof want - (size_t)n, "%s\"} ", code);
  FILE *f = popen(cmd, "r");
  long total = -1;
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, want, strlen(want)) != 0) continue;
    const char *v = any ? strstr(line, "} ") : line + strlen(want) - 2;
    total = (total < 0 ? 0 : total) + (v ? strtol(v + 2, NULL, 10) : 0);
  }
  if (f) pclose(f);
  if (total < 0) {
    snprintf(why, cap, "no %s on %s/metrics", want, addr);
    return;
  }
  size_t i = 0;
  while (i < s->n_counted && strcmp(s->counted[i].method, counted) != 0) i++;
  if (i == s->n_counted && i < MAX_COUNTED) {
    snprintf(s->counted[i].method, sizeof s->counted[i].method, "%s", counted);
    s->counted[i].seen = 0;
    s->n_counted++;
  }
  if (i == MAX_COUNTED) {
    snprintf(why, cap, "too many counted methods");
    return;
  }
  g->count = total - s->counted[i].seen;
  s->counted[i].seen = total;
}

static void do_prefetch(scene *s, const cJSON *call, got *g) {
  idem_error err = {0};
  note_err(g,
           idem_policy_prefetch(s->client, str_of(call, "service", ""),
                                str_of(call, "operation", ""), &err),
           &err);
}

/* The lossy front's rules ({"rules": [...]}): a new file renamed over IDEM_CONFORMANCE_FAULTS. */
static void do_faults(const cJSON *call, got *g) {
  const char *path = getenv("IDEM_CONFORMANCE_FAULTS");
  cJSON *doc = cJSON_CreateObject();
  const cJSON *rules = cJSON_GetObjectItemCaseSensitive(call, "rules");
  cJSON_AddItemToObject(doc, "rules", rules ? cJSON_Duplicate(rules, true) : cJSON_CreateArray());
  char *text = cJSON_PrintUnformatted(doc);
  cJSON_Delete(doc);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.new", path ? path : "");
  FILE *f = path && text ? fopen(tmp, "w") : NULL;
  bool ok = f && fputs(text, f) >= 0;
  if (f && fclose(f) != 0) ok = false;
  if (ok && rename(tmp, path) != 0) ok = false;
  free(text);
  g->code = ok ? IDEM_OK : IDEM_INTERNAL;
  snprintf(g->reason, sizeof g->reason, "%s", ok ? "" : "cannot write the faults file");
}

static void do_journal_lines(const scene *s, got *g) {
  g->count = 0;
  FILE *f = s->has_journal ? fopen(s->journal, "r") : NULL;
  if (!f) return;
  char line[4096];
  while (fgets(line, sizeof line, f))
    if (line[0] != '\n' && line[0] != '\0') g->count++;
  fclose(f);
}

/* Appends "what differed" to why (bounded). */
static void differ(char *why, size_t cap, const char *fmt, ...) {
  size_t n = strlen(why);
  if (n + 3 >= cap) return;
  if (n) {
    memcpy(why + n, "; ", 3);
    n += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why + n, cap - n, fmt, ap);
  va_end(ap);
}

static bool error_matches(const cJSON *want, const char *have) {
  if (cJSON_IsString(want)) return strcmp(want->valuestring, have) == 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, want) if (cJSON_IsString(e) && strcmp(e->valuestring, have) == 0) return true;
  return false;
}

static void check(const cJSON *expect, const got *g, char *why, size_t cap) {
  const cJSON *f;
  cJSON_ArrayForEach(f, expect) {
    const char *n = f->string;
    bool b = cJSON_IsTrue(f);
    if (strcmp(n, "ok") == 0) {
      if (b != (g->code == IDEM_OK))
        differ(why, cap, "ok %s, got %s (%s)", b ? "true" : "false", code_name(g->code), g->reason);
    } else if (strcmp(n, "error") == 0) {
      if (!error_matches(f, code_name(g->code)))
        differ(why, cap, "error: got %s", code_name(g->code));
      else if (g->code == IDEM_STEP_UNKNOWN && !g->outcome_unknown) /* idem.h, api.md §20 */
        differ(why, cap, "error STEP_UNKNOWN without outcome_unknown");
    } else if (strcmp(n, "reason") == 0) {
      if (strcmp(f->valuestring, g->reason) != 0)
        differ(why, cap, "reason %s, got \"%s\"", f->valuestring, g->reason);
    } else if (strcmp(n, "detail") == 0 || strcmp(n, "hint") == 0) {
      const char *have = n[0] == 'd' ? g->detail : g->hint;
      if (strcmp(f->valuestring, have) != 0)
        differ(why, cap, "%s \"%s\", got \"%s\"", n, f->valuestring, have);
    } else if (strcmp(n, "decision") == 0) {
      if (strcmp(f->valuestring, DECISIONS[g->decision <= 5 ? g->decision : 0]) != 0)
        differ(why, cap, "decision %s, got %s", f->valuestring, DECISIONS[g->decision <= 5 ? g->decision : 0]);
    } else if (strcmp(n, "attempt") == 0) {
      if ((uint64_t)f->valuedouble != g->attempt)
        differ(why, cap, "attempt %d, got %llu", (int)f->valuedouble, (unsigned long long)g->attempt);
    } else if (strcmp(n, "outcome") == 0) {
      if (strcmp(f->valuestring, outcome_word(g->outcome)) != 0)
        differ(why, cap, "outcome %s, got %s", f->valuestring, outcome_word(g->outcome));
    } else if (strcmp(n, "code") == 0) {
      if ((int32_t)f->valuedouble != g->result_code)
        differ(why, cap, "code %d, got %d", (int)f->valuedouble, (int)g->result_code);
    } else if (strcmp(n, "body") == 0) {
      if (strcmp(f->valuestring, g->body) != 0)
        differ(why, cap, "body \"%s\", got \"%s\"", f->valuestring, g->body);
    } else if (strcmp(n, "count") == 0) {
      if ((long)f->valuedouble != g->count)
        differ(why, cap, "count %ld, got %ld", (long)f->valuedouble, g->count);
    } else if (strcmp(n, "retention_s") == 0 || strcmp(n, "lease_ms") == 0 ||
               strcmp(n, "key_retention_s") == 0) {
      uint32_t have = n[0] == 'r' ? g->retention_s : n[0] == 'l' ? g->lease_ms : g->key_retention_s;
      if ((uint32_t)f->valuedouble != have)
        differ(why, cap, "%s %u, got %u", n, (unsigned)f->valuedouble, (unsigned)have);
    } else {
      const bool *have = strcmp(n, "ran") == 0               ? &g->ran
                         : strcmp(n, "replayed") == 0        ? &g->replayed
                         : strcmp(n, "takeover") == 0        ? &g->takeover
                         : strcmp(n, "unguarded") == 0       ? &g->unguarded
                         : strcmp(n, "journaled") == 0       ? &g->journaled
                         : strcmp(n, "outcome_unknown") == 0 ? &g->outcome_unknown
                                                             : NULL;
      if (!have)
        differ(why, cap, "unknown expect field %s", n);
      else if (*have != b)
        differ(why, cap, "%s %s, got %s", n, b ? "true" : "false", *have ? "true" : "false");
    }
  }
}

static int connect_scene(const cJSON *sc, int index, scene *s, char *why, size_t cap) {
  const char *which = str_of(sc, "client", "leader");
  const char *var = strcmp(which, "standby") == 0     ? "IDEM_STANDBY_ADDRESS"
                    : strcmp(which, "stoppable") == 0 ? "IDEM_STOPPABLE_ADDRESS"
                    : strcmp(which, "lossy") == 0     ? "IDEM_LOSSY_ADDRESS"
                                                      : "IDEM_ADDRESS";
  const char *addr = getenv(var);
  if (!addr || !*addr) {
    differ(why, cap, "%s is not set", var);
    return -1;
  }
  idem_options o = {0};
  o.address = addr;
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sc, "journal"))) {
    const char *tmp = getenv("IDEM_CONFORMANCE_TMP");
    snprintf(s->journal, sizeof s->journal, "%s/libidem-%d-%d.journal", tmp ? tmp : "/tmp",
             (int)getpid(), index);
    unlink(s->journal);
    o.journal_path = s->journal;
    s->has_journal = true;
  }
  idem_error err = {0};
  if (idem_connect(&o, &s->client, &err) != IDEM_OK) {
    differ(why, cap, "connect: %s", err.message);
    return -1;
  }
  if (idem_saga_begin(s->client, NULL, "conformance", NULL, 0, s->global_id, NULL, NULL, &err) !=
      IDEM_OK) {
    differ(why, cap, "BeginSaga: %s (%s)", err.message, err.reason);
    return -1;
  }
  return 0;
}

/* Runs one scenario; why receives what differed ("" = passed). */
static void run_scenario(const cJSON *sc, int index, char *why, size_t cap) {
  scene s = {0};
  run_job bg[MAX_BG];
  size_t n_bg = 0;
  if (connect_scene(sc, index, &s, why, cap) == 0) {
    const cJSON *call;
    int i = 0;
    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(sc, "calls")) {
      i++;
      const char *what = str_of(call, "call", "");
      const char *bg_name = str_of(call, "background", NULL);
      got g = {0};
      if (strcmp(what, "run") == 0 && bg_name) {
        if (n_bg == MAX_BG) {
          differ(why, cap, "call %d: too many background runs", i);
          break;
        }
        run_job *j = &bg[n_bg];
        *j = (run_job){.s = &s, .call = call, .name = bg_name};
        if (pthread_create(&j->thread, NULL, run_thread, j) != 0) {
          differ(why, cap, "call %d: pthread_create failed", i);
          break;
        }
        n_bg++;
        continue;
      }
      if (strcmp(what, "run") == 0) {
        do_run(&s, call, &g);
      } else if (strcmp(what, "join") == 0) {
        run_job *j = NULL;
        for (size_t b = 0; b < n_bg; b++)
          if (bg[b].name && strcmp(bg[b].name, bg_name ? bg_name : "") == 0) j = &bg[b];
        if (!j) {
          differ(why, cap, "call %d: no background run named %s", i, bg_name ? bg_name : "?");
          break;
        }
        pthread_join(j->thread, NULL);
        j->name = NULL;
        g = j->g;
      } else if (strcmp(what, "begin") == 0) {
        do_begin(&s, call, &g);
      } else if (strcmp(what, "complete") == 0) {
        do_complete(&s, call, &g);
      } else if (strcmp(what, "resolve") == 0) {
        do_resolve(&s, call, &g);
      } else if (strcmp(what, "resolve_bulk") == 0) {
        do_resolve_bulk(&s, call, i, &g);
      } else if (strcmp(what, "policy_set") == 0) {
        do_policy_set(&s, call, &g);
      } else if (strcmp(what, "policy_prefetch") == 0) {
        do_prefetch(&s, call, &g);
      } else if (strcmp(what, "stop_coordinator") == 0) {
        const char *stop = getenv("IDEM_CONFORMANCE_STOP");
        if (!stop || system(stop) != 0) differ(why, cap, "call %d: IDEM_CONFORMANCE_STOP failed", i);
      } else if (strcmp(what, "journal_lines") == 0) {
        do_journal_lines(&s, &g);
      } else if (strcmp(what, "sleep") == 0) {
        sleep_ms((long)num_of(call, "ms", 0));
      } else if (strcmp(what, "count_calls") == 0) {
        char sub[256] = "";
        do_count_calls(&s, call, &g, sub, sizeof sub);
        if (sub[0]) {
          differ(why, cap, "call %d (count_calls): %s", i, sub);
          break;
        }
      } else if (strcmp(what, "faults") == 0) {
        do_faults(call, &g);
      } else {
        differ(why, cap, "call %d: unknown call \"%s\"", i, what);
        break;
      }
      const cJSON *expect = cJSON_GetObjectItemCaseSensitive(call, "expect");
      char sub[768] = "";
      if (expect) check(expect, &g, sub, sizeof sub);
      if (sub[0]) {
        differ(why, cap, "call %d (%s): %s", i, what, sub);
        break;
      }
    }
  }
  for (size_t b = 0; b < n_bg; b++)
    if (bg[b].name) pthread_join(bg[b].thread, NULL);
  idem_close(s.client);
}

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t r;
  while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (cap - n < 2) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  return buf;
}

/* The first capability sc's "needs" names that this runner lacks; NULL = none. */
static const char *lacks(const cJSON *sc) {
  const cJSON *need;
  cJSON_ArrayForEach(need, cJSON_GetObjectItemCaseSensitive(sc, "needs")) {
    bool has = false;
    for (size_t i = 0; i < sizeof HAS / sizeof HAS[0] && cJSON_IsString(need); i++)
      has = has || strcmp(HAS[i], need->valuestring) == 0;
    if (!has) return cJSON_IsString(need) ? need->valuestring : "?";
  }
  return NULL;
}

static bool wanted(const char *name, int argc, char **argv) {
  if (argc < 2) return true;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], name) == 0) return true;
  return false;
}

int main(int argc, char **argv) {
  const char *dir = getenv("IDEM_CONFORMANCE_DIR");
  if (!dir) {
    fprintf(stderr, "libidem_runner: IDEM_CONFORMANCE_DIR is not set (run it through "
                    "client-lib/conformance/run)\n");
    return 2;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/scenarios.json", dir);
  char *text = read_all(path);
  cJSON *doc = text ? cJSON_Parse(text) : NULL;
  free(text);
  if (!doc) {
    fprintf(stderr, "libidem_runner: cannot read %s: %s\n", path, errno ? strerror(errno) : "not JSON");
    return 2;
  }
  int failed = 0, index = 0;
  const cJSON *sc;
  cJSON_ArrayForEach(sc, cJSON_GetObjectItemCaseSensitive(doc, "scenarios")) {
    const char *name = str_of(sc, "name", "?");
    index++;
    if (!wanted(name, argc, argv)) continue;
    const char *need = lacks(sc);
    if (need) {
      printf("skip %s: needs %s\n", name, need);
      fflush(stdout);
      continue;
    }
    char why[1024] = "";
    run_scenario(sc, index, why, sizeof why);
    if (why[0]) {
      printf("not ok %s: %s\n", name, why);
      failed++;
    } else {
      printf("ok %s\n", name);
    }
    fflush(stdout);
  }
  cJSON_Delete(doc);
  return failed ? 1 : 0;
}
