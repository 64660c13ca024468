/* idemctl.h — shared by the files of idemctl (docs/api.md §10): the parsed command line, the
 * connection, output helpers (aligned tables, relative ages, states in words, JSON via cJSON)
 * and the exit codes.
 *
 * Exit status: 0 success; 1 not found or refused (NOT_FOUND, FAILED_PRECONDITION, ABORTED,
 * PERMISSION_DENIED, UNIMPLEMENTED: a server without that call, ...); 2 usage (bad flags, or
 * INVALID_ARGUMENT from the server);
 * 3 unavailable (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, a malformed answer).
 */
#ifndef IDEMCTL_H
#define IDEMCTL_H

#include <cjson/cJSON.h>
#include <idem/idem.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXIT_OK 0
#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define EXIT_UNAVAILABLE 3

#define CTL_MAX_POS 8
#define CTL_MAX_FLAGS 24

typedef struct ctl_flag {
  const char *name;  /* without "--" */
  const char *value; /* NULL for a switch */
} ctl_flag;

struct ctl_cmd;

typedef struct ctl {
  const struct ctl_cmd *cmd;
  const char *pos[CTL_MAX_POS]; /* positional arguments after the command words */
  int npos;
  ctl_flag flags[CTL_MAX_FLAGS];
  int nflags;
  bool json;
  const char *addr, *tenant, *token;
  /* TLS to the coordinator; NULL = not given */
  bool tls;
  const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;
  int64_t deadline_ms;
  idem_client *client; /* connected by ctl_client() */
} ctl;

typedef int (*ctl_fn)(ctl *c);

/* "(no WHAT in tenant T)": an empty list says which tenant it asked (a mistyped or missing
 * --tenant is the usual reason); with a token or certificate the server decides the tenant. */
void ctl_print_none(const ctl *c, const char *what);

typedef struct ctl_cmd {
  const char *name;  /* "steps", "policy set" */
  const char *args;  /* usage after the name */
  const char *flags; /* accepted flags: "state=,service=,stuck" ('=' takes a value) */
  int min_pos, max_pos;
  const char *help; /* what it does, one paragraph */
  ctl_fn fn;
} ctl_cmd;

/* main.c */
const char *ctl_flag_value(const ctl *c, const char *name); /* NULL when not given */
bool ctl_has(const ctl *c, const char *name);
int ctl_usage_error(const ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The connection options the command line gives (tenant, token, deadline, TLS) for the node at
 * addr (c->addr, or another node's: `status` asks each); the strings stay c's and addr's. */
idem_options ctl_options(const ctl *c, const char *addr);
idem_client *ctl_client(ctl *c); /* connects on first use; exits 3 when it cannot */
int ctl_fail(const char *what, const idem_error *e); /* prints the error, returns the exit code */
int ctl_exit_code(int idem_code);

/* cmd_steps.c, cmd_policy.c; the shared flag parsers in args.c */
int cmd_status(ctl *c);
int cmd_step(ctl *c);
int cmd_saga(ctl *c);
int cmd_steps(ctl *c);
int cmd_resolve(ctl *c);
int cmd_resolve_where(ctl *c); /* cmd_bulk.c: resolve --where (Admin.ResolveSteps) */
/* --outcome, --reason, --actor, --code, --body/--body-file into *res (*body: owned, may stay
 * NULL). EXIT_OK or the usage error's exit status (printed). */
int ctl_parse_resolution(ctl *c, idem_resolution *res, uint8_t **body);
/* The filters of `steps` (--state, --service, --operation, --global-id, --older-than) into *f.
 * EXIT_OK or the usage error's exit status (printed). */
int ctl_parse_filter(ctl *c, idem_steps_filter *f);
/* A fresh request id: 16 random bytes in hex (32 digits and the NUL); false when /dev/urandom
 * cannot be read. */
bool ctl_new_request_id(char out[40]);
int cmd_audit(ctl *c);
int cmd_policy_list(ctl *c);
int cmd_policy_get(ctl *c);
int cmd_policy_set(ctl *c);
int cmd_policy_delete(ctl *c);
int cmd_reconcile(ctl *c);
int cmd_http_key(ctl *c);   /* cmd_http.c: the step an HTTP Idempotency-Key names */
int cmd_slots(ctl *c);      /* cmd_slots.c */
int cmd_slots_move(ctl *c); /* cmd_move.c */
/* cmd_slots.c: the move under way, for people (one line and, when there is one, its note) */
void ctl_print_move(const idem_slot_move *m);
cJSON *ctl_json_move(const idem_slot_move *m);

/* fmt.c — tables */
typedef struct table table;
table *table_new(int ncols, const char *const *headers);
void table_row(table *t, const char *const *cells); /* cells copied */
void table_print(table *t);                         /* stdout, two spaces between columns */
void table_free(table *t);

/* fmt.c — values */
int64_t fmt_now_ms(void); /* wall clock, Unix ms */
/* "3m ago", "in 25s", "-" for 0; buf of at least 32 bytes */
const char *fmt_age(int64_t unix_ms, char *buf, size_t n);
const char *fmt_state(int state);     /* "in progress", "succeeded", ... */
const char *fmt_state_key(int state); /* "in_progress", ... (JSON) */
const char *fmt_outcome(int outcome); /* "succeeded", ... */
const char *fmt_phase(int phase);     /* "forward" / "compensation" */
/* Parses "500ms", "30s", "5m", "2h", "1d" or plain seconds into ms; false when malformed. */
bool fmt_parse_duration(const char *s, int64_t *ms); /* util/duration.h's grammar */
/* Parses a state word ("in_progress", "in-progress", "IN_PROGRESS", "stuck" no) → 1..6. */
int fmt_parse_state(const char *s);
/* A result body for people: the text when it is printable UTF-8 (cut at max bytes with "…"),
 * else "<N bytes>". */
const char *fmt_body(const uint8_t *b, size_t len, size_t max, char *buf, size_t n);

/* fmt.c — JSON */
/* The step key's four fields (global_id, service, operation, phase) added to o. */
void json_add_key(cJSON *o, const char *global_id, const char *service, const char *operation,
                  int phase);
cJSON *json_record(const idem_record *r);
void json_print(cJSON *v); /* prints and frees */

#endif
