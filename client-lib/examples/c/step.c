/* step.c — your first guarded step with libidem. The Go, Python, Node and Java examples beside it
 * (../go, ../python, ../node, ../java) do the same with their SDKs and print the same lines.
 *
 * A shop charges a card for an order. The customer's double-click (or the gateway's retry) sends
 * the same request twice; idem makes the charge happen once and answers the second request with
 * the first one's result.
 *
 *   cc step.c $(pkg-config --cflags --libs idem) -o /tmp/idem-step
 *   IDEM_ADDRESS=127.0.0.1:50051 /tmp/idem-step ORDER-ID
 *
 * IDEM_ADDRESS: the coordinator (default 127.0.0.1:50051); IDEM_TENANT: your tenant (default
 * "shop"). The order id defaults to order-c-1 and the step's service is payment-c, so it runs
 * beside the Go, Python, Node and Java examples without sharing their sagas. Exit status: 0 when
 * the charge ran at most once, 1 otherwise. */
#include <idem/idem.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Your side of the world: an order and a pretend payment gateway that counts its charges. */
struct order {
  const char *id;
  long amount_cents;
  int charges; /* how many times the gateway was called */
  char receipt[64];
};

static int gateway_charge(struct order *o, uint64_t fencing_token) {
  o->charges++;
  snprintf(o->receipt, sizeof o->receipt, "receipt for %s, attempt %" PRIu64, o->id,
           fencing_token);
  return 200; /* an HTTP status */
}

/* The guarded action: called only when idem answers PROCEED. */
static void charge(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  struct order *o = arg;
  int http = gateway_charge(o, ctx->attempt); /* pass the attempt on as a fencing token */
  out->outcome = http < 300    ? IDEM_OUTCOME_SUCCEEDED
                 : http == 429 ? IDEM_OUTCOME_RETRYABLE /* nothing happened: try again later */
                 : http >= 500 ? IDEM_OUTCOME_UNKNOWN   /* may have happened: kept until resolved */
                               : IDEM_OUTCOME_FAILED;   /* a definite failure: replayed too */
  out->code = http;
  out->body = o->receipt; /* copied by the library when charge returns */
  out->body_len = strlen(o->receipt);
}

static int fail(const char *what, const idem_error *err) {
  fprintf(stderr, "%s: %s (%s)\n", what, err->message, idem_strerror(err->code));
  return 1;
}

/* One request to "pay for order o": what each of the duplicates runs. */
static int pay(idem_client *c, const char *gid, struct order *o, idem_run_report *rep) {
  char canonical[128]; /* the request's identity: a different amount under the same key is refused */
  int n = snprintf(canonical, sizeof canonical, "order=%s;amount=%ld", o->id, o->amount_cents);
  uint8_t fp[IDEM_FINGERPRINT_LEN];
  idem_fingerprint(canonical, (size_t)n, fp);
  idem_step_key key = {.global_id = gid, .service = "payment-c", .operation = "charge",
                       .phase = IDEM_FORWARD};
  idem_error err;
  int rc = idem_step_run(c, &key, fp, sizeof fp, charge, o, NULL, rep, &err);
  if (rc != IDEM_OK) return fail("pay", &err);
  if (!rep->ran && !rep->replayed) {
    printf("skipped: nothing to run\n");
    return 0;
  }
  printf("%s, outcome %s, code %d, body \"%.*s\"\n",
         rep->ran ? "ran: the gateway was called" : "replayed: the stored result",
         idem_outcome_name((int)rep->result.outcome), (int)rep->result.code,
         (int)rep->result.body_len, (const char *)rep->result.body);
  return 0;
}

int main(int argc, char **argv) {
  const char *address = getenv("IDEM_ADDRESS");
  const char *tenant = getenv("IDEM_TENANT");
  struct order o = {.id = argc > 1 ? argv[1] : "order-c-1", .amount_cents = 4200};

  idem_options opt = {.address = address && *address ? address : "127.0.0.1:50051",
                      .tenant = tenant && *tenant ? tenant : "shop"};
  idem_client *c = NULL;
  idem_error err;
  if (idem_connect(&opt, &c, &err) != IDEM_OK) return fail("connect", &err);

  /* One saga per order: the order id is the saga's request id, so a retried checkout finds the
   * same global id instead of starting a second saga. */
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  bool created = false;
  if (idem_saga_begin(c, o.id, "order", NULL, 0, gid, &created, NULL, &err) != IDEM_OK) {
    int rc = fail("begin saga", &err);
    idem_close(c);
    return rc;
  }
  printf("saga %s (%s)\n", gid, created ? "new" : "the order's existing saga");

  idem_run_report first = {0}, second = {0};
  int rc = pay(c, gid, &o, &first);        /* the first click */
  if (rc == 0) rc = pay(c, gid, &o, &second); /* the double-click: same key, same request */
  if (rc == 0 && o.charges > 1) {
    fprintf(stderr, "the gateway was called %d times\n", o.charges);
    rc = 1;
  }
  if (rc == 0 && (!second.replayed || second.result.body_len != first.result.body_len ||
                  memcmp(second.result.body, first.result.body, first.result.body_len) != 0)) {
    fprintf(stderr, "the second request did not replay the first one's result\n");
    rc = 1;
  }
  if (rc == 0) printf("charged %d time(s) for two requests\n", o.charges);
  idem_run_report_clear(&first);
  idem_run_report_clear(&second);
  idem_close(c);
  return rc;
}
