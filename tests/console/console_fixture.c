/* console_fixture — the console tests' hands on the coordinator, through libidem (real gRPC
 * calls): it makes the scene the browser looks at and checks what a caller gets afterwards.
 *
 *   console_fixture ADDR TOKEN scene          a saga with a stuck payment (expired lease), a
 *                                             hostile body and label, an unknown outcome;
 *                                             prints {"gid": ...}
 *   console_fixture ADDR TOKEN begin GID SVC OP   BeginStep (forward); prints the decision,
 *                                             code and body as JSON
 *   console_fixture ADDR TOKEN state GID SVC OP   LookupStep; prints {"state": ...}
 *   console_fixture ADDR TOKEN audit GID      prints {"entries": N} (ListAudit of the saga)
 *   console_fixture ADDR TOKEN many N         a saga of N forward steps with bodies and N
 *                                             unknown steps on other sagas; prints {"gid": ...}
 *   console_fixture ADDR TOKEN finished SVC OP BODY   a saga of one forward step completed
 *                                             SUCCEEDED 200 with BODY; prints {"gid": ...}
 *   console_fixture ADDR TOKEN skipped        a saga where nothing ran for some records: a
 *                                             hotel booking compensated before its forward (a
 *                                             null compensation and a tombstone), a car whose
 *                                             forward lease ran out before its compensation
 *                                             (abandoned attempt 1, compensated for real);
 *                                             prints {"gid": ...}
 * TOKEN "-" = none (development mode; tenant "default"). Exit 0, or 1 with the error on
 * stderr. */
#include <idem/idem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static idem_client *c;

static void die(const char *what, const idem_error *e) {
  fprintf(stderr, "console_fixture: %s: %s\n", what, e->message);
  exit(1);
}

static void step(const char *gid, const char *svc, const char *op, idem_phase ph, uint32_t lease,
                 int outcome, int code, const char *body) {
  idem_step_key k = {gid, svc, op, ph};
  idem_begin b = {0};
  idem_error e;
  if (idem_step_begin(c, &k, NULL, 0, lease, &b, &e) != IDEM_OK) die("BeginStep", &e);
  if (outcome &&
      idem_step_complete(c, &k, b.attempt, outcome, code, body, strlen(body), NULL, &e) != IDEM_OK)
    die("CompleteStep", &e);
  idem_begin_clear(&b);
}

static void json_str(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 0x20)
      printf("\\u%04x", ch);
    else
      putchar(ch);
  }
  putchar('"');
}

static void new_saga(const char *label, char gid[IDEM_GLOBAL_ID_MAX + 1]) {
  idem_label l[] = {{"customer", "c-42"}, {"note", label}};
  idem_error e;
  if (idem_saga_begin(c, NULL, "order", l, 2, gid, NULL, NULL, &e) != IDEM_OK) die("BeginSaga", &e);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: console_fixture ADDR TOKEN "
                    "scene|begin|state|audit|many|finished|skipped ...\n");
    return 2;
  }
  idem_options o = {.address = argv[1],
                    .token = strcmp(argv[2], "-") ? argv[2] : NULL,
                    .deadline_ms = 5000,
                    .policy_refresh_ms = -1};
  idem_error e;
  if (idem_connect(&o, &c, &e) != IDEM_OK) die("connect", &e);
  const char *cmd = argv[3];
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  if (!strcmp(cmd, "scene")) {
    new_saga("<script>window.__xss=1;alert('label')</script>", gid);
    step(gid, "inventory", "reserve", IDEM_FORWARD, 0, IDEM_OUTCOME_SUCCEEDED, 200,
         "<img src=x onerror=alert(1)>");
    step(gid, "payment", "charge", IDEM_FORWARD, 1, 0, 0, ""); /* 1 ms lease: stuck at once */
    step(gid, "shipping", "book", IDEM_FORWARD, 0, IDEM_OUTCOME_UNKNOWN, 504,
         "{\"error\":\"carrier timed out\"}");
    step(gid, "inventory", "reserve", IDEM_COMPENSATION, 0, IDEM_OUTCOME_SUCCEEDED, 200,
         "released 2 items");
    printf("{\"gid\": \"%s\"}\n", gid);
  } else if (!strcmp(cmd, "many") && argc == 5) {
    int n = atoi(argv[4]);
    new_saga("bench", gid);
    char op[32], body[200];
    for (int i = 0; i < n; i++) {
      snprintf(op, sizeof op, "op-%03d", i);
      snprintf(body, sizeof body,
               "{\"i\":%d,\"text\":\"a result body of about one hundred "
               "bytes, <escaped> & quoted \\\"\"}",
               i);
      step(gid, "bench", op, IDEM_FORWARD, 0, IDEM_OUTCOME_SUCCEEDED, 200, body);
    }
    for (int i = 0; i < n; i++) {
      char other[256];
      snprintf(other, sizeof other, "%s-u%d", gid, i);
      step(other, "bench", "unknown", IDEM_FORWARD, 0, IDEM_OUTCOME_UNKNOWN, 504, body);
    }
    printf("{\"gid\": \"%s\"}\n", gid);
  } else if (!strcmp(cmd, "skipped")) {
    new_saga("skipped", gid);
    idem_begin b = {0};
    idem_step_key hotel = {gid, "hotel", "book", IDEM_COMPENSATION};
    if (idem_step_begin(c, &hotel, NULL, 0, 0, &b, &e) != IDEM_OK) die("BeginStep", &e);
    if (b.decision != IDEM_DECISION_SKIP_NULL_COMPENSATION) {
      fprintf(stderr, "console_fixture: hotel: decision %s\n", idem_decision_name(b.decision));
      return 1;
    }
    idem_begin_clear(&b);
    step(gid, "car", "rent", IDEM_FORWARD, 1, 0, 0, ""); /* 1 ms lease: abandoned below */
    idem_step_key car = {gid, "car", "rent", IDEM_COMPENSATION};
    /* waits (server-side) until the forward's lease ran out, then proceeds */
    if (idem_step_begin_wait(c, &car, NULL, 0, 0, 5000, &b, &e) != IDEM_OK) die("BeginStep", &e);
    if (idem_step_complete(c, &car, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, "car returned", 12,
                           NULL, &e) != IDEM_OK)
      die("CompleteStep", &e);
    idem_begin_clear(&b);
    printf("{\"gid\": \"%s\"}\n", gid);
  } else if (!strcmp(cmd, "finished") && argc == 7) {
    new_saga("finished", gid);
    step(gid, argv[4], argv[5], IDEM_FORWARD, 0, IDEM_OUTCOME_SUCCEEDED, 200, argv[6]);
    printf("{\"gid\": \"%s\"}\n", gid);
  } else if ((!strcmp(cmd, "begin") || !strcmp(cmd, "state")) && argc == 7) {
    idem_step_key k = {argv[4], argv[5], argv[6], IDEM_FORWARD};
    if (!strcmp(cmd, "state")) {
      idem_record r = {0};
      if (idem_step_lookup(c, &k, &r, &e) != IDEM_OK) die("LookupStep", &e);
      printf("{\"state\": \"%s\", \"attempt\": %llu}\n", idem_state_name(r.state),
             (unsigned long long)r.attempt);
      idem_record_clear(&r);
    } else {
      idem_begin b = {0};
      if (idem_step_begin(c, &k, NULL, 0, 0, &b, &e) != IDEM_OK) die("BeginStep", &e);
      printf("{\"decision\": \"%s\", \"code\": %d, \"body\": ", idem_decision_name(b.decision),
             b.has_result ? b.result.code : 0);
      json_str((const char *)b.result.body, b.has_result ? b.result.body_len : 0);
      printf("}\n");
      idem_begin_clear(&b);
    }
  } else if (!strcmp(cmd, "audit") && argc == 5) {
    idem_audit_page p = {0};
    if (idem_audit_list(c, argv[4], 1000, NULL, &p, &e) != IDEM_OK) die("ListAudit", &e);
    printf("{\"entries\": %zu}\n", p.n_entries);
    idem_audit_page_clear(&p);
  } else {
    fprintf(stderr, "console_fixture: unknown command or wrong arguments\n");
    return 2;
  }
  idem_close(c);
  return 0;
}
