/* idem.h — libidem, the C client of the idem coordinator (idem.v1, see README).
 *
 * Conventions, for every function below:
 *  - Functions return an idem_code: IDEM_OK (0) on success, otherwise the call's gRPC status
 *    code (stable values, the same as gRPC's) or one of the library's own codes (>= 100).
 *    When a function returns an error and `err` is not NULL, *err describes it; output
 *    parameters are then left zeroed and own nothing.
 *  - Strings passed in are borrowed for the duration of the call only.
 *  - Output structs are owned by the caller; free what they hold with the matching
 *    *_clear() function (safe on a zeroed struct, and idempotent).
 *  - An idem_client is thread-safe: any number of threads may call through one client.
 *  - Every call is bounded by the client's deadline (idem_options.deadline_ms, default 2 s).
 */
#ifndef IDEM_IDEM_H
#define IDEM_IDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- errors ------------------------------------------------------------------------------ */

/* X(name, value, text). Values 0–16 are gRPC status codes; 100+ are the library's own. */
#define IDEM_CODES(X)                                             \
  X(OK, 0, "ok")                                                  \
  X(CANCELLED, 1, "cancelled")                                    \
  X(UNKNOWN, 2, "unknown error")                                  \
  X(INVALID_ARGUMENT, 3, "invalid argument")                      \
  X(DEADLINE_EXCEEDED, 4, "deadline exceeded")                    \
  X(NOT_FOUND, 5, "not found")                                    \
  X(ALREADY_EXISTS, 6, "already exists")                          \
  X(PERMISSION_DENIED, 7, "permission denied")                    \
  X(RESOURCE_EXHAUSTED, 8, "resource exhausted")                  \
  X(FAILED_PRECONDITION, 9, "failed precondition")                \
  X(ABORTED, 10, "aborted")                                       \
  X(OUT_OF_RANGE, 11, "out of range")                             \
  X(UNIMPLEMENTED, 12, "unimplemented")                           \
  X(INTERNAL, 13, "internal error")                               \
  X(UNAVAILABLE, 14, "unavailable")                               \
  X(DATA_LOSS, 15, "data loss")                                   \
  X(UNAUTHENTICATED, 16, "unauthenticated")                       \
  X(NOMEM, 100, "out of memory")                                  \
  X(BAD_RESPONSE, 101, "malformed response from the coordinator") \
  X(STEP_FAILED, 102, "the step's action failed")                 \
  X(STEP_UNKNOWN, 103, "the step's outcome is unknown")
/* STEP_FAILED and STEP_UNKNOWN (a lost try, then the deadline): idem_step_run, see there. */

typedef enum idem_code {
#define IDEM__X(name, value, text) IDEM_##name = value,
  IDEM_CODES(IDEM__X)
#undef IDEM__X
} idem_code;

/* The fixed text of a code; never NULL. */
const char *idem_strerror(int code);

typedef struct idem_error {
  int code;               /* an idem_code */
  char message[256];      /* the server's message (names the field), or the library's */
  int64_t retry_after_ms; /* ABORTED because in progress: the server's hint, else 0 */
  char leader[128];       /* UNAVAILABLE from a standby: the leader's host:port, else "" */
  /* DEADLINE_EXCEEDED / UNAVAILABLE after the request was sent, a lost try (CANCELLED with no
   * reason), IDEM_STEP_UNKNOWN: the server may have acted. */
  bool outcome_unknown;
  /* Why, in the coordinator's word (its idem-reason: "not-leader", "no-leader",
   * "store-unavailable", "in-progress", "fingerprint-mismatch", "invalid-argument", ...; the
   * list is in docs/api.md); "" when no coordinator answered (connection refused, deadline) or
   * the library itself failed. Decide on code and reason, never on the message. */
  char reason[32];
} idem_error;

/* --- the contract's enums (values equal idem.v1's) ---------------------------------------- */

typedef enum idem_phase { IDEM_FORWARD = 1, IDEM_COMPENSATION = 2 } idem_phase;

typedef enum idem_state {
  IDEM_STATE_UNSPECIFIED = 0,
  IDEM_STATE_IN_PROGRESS = 1,
  IDEM_STATE_SUCCEEDED = 2,
  IDEM_STATE_FAILED = 3,
  IDEM_STATE_UNKNOWN = 4,
  IDEM_STATE_ABANDONED = 5,
  IDEM_STATE_RELEASED = 6,
} idem_state;

typedef enum idem_outcome {
  IDEM_OUTCOME_UNSPECIFIED = 0,
  IDEM_OUTCOME_SUCCEEDED = 1,
  IDEM_OUTCOME_FAILED = 2,
  IDEM_OUTCOME_RETRYABLE = 3,
  IDEM_OUTCOME_UNKNOWN = 4,
} idem_outcome;

typedef enum idem_decision {
  IDEM_DECISION_UNSPECIFIED = 0,
  IDEM_DECISION_PROCEED = 1,
  IDEM_DECISION_REPLAY = 2,
  IDEM_DECISION_SKIP_NULL_COMPENSATION = 3,
  IDEM_DECISION_SKIP_ALREADY_COMPENSATED = 4,
  IDEM_DECISION_PROCEED_UNGUARDED = 5,
} idem_decision;

/* The contract's words, as the server and idemctl spell them; "invalid" out of range, never
 * NULL. State 0 (no record) is "none"; outcome and decision 0 are "unspecified". */
const char *idem_state_name(int state);       /* "none", "in_progress", ... */
const char *idem_outcome_name(int outcome);   /* "succeeded", ... */
const char *idem_decision_name(int decision); /* "proceed", "replay", ... */

/* --- client ------------------------------------------------------------------------------ */

typedef struct idem_client idem_client;

typedef struct idem_options {
  /* "127.0.0.1:50051" (required), or a list of coordinator nodes "h1:p1,h2:p2" (high
   * availability): calls go to the leader, found from standbys' idem-leader answers or by
   * trying the next address; UNAVAILABLE is retried with backoff and jitter within the call's
   * deadline. A call whose outcome is unknown (sent, then no answer) is only repeated when
   * that is harmless (same key), and its error says outcome_unknown. */
  const char *address;
  const char *tenant;  /* sent as idem-tenant metadata; NULL = server default. A server with
                          authentication on ignores it: the token or certificate decides */
  const char *token;   /* sent as "authorization: Bearer …" on every call; NULL = none */
  int64_t deadline_ms; /* per call; 0 = 2000 */
  /* policies and fail-open (see "policies and fail-open" below) */
  const char *journal_path;  /* unguarded-execution journal (copied); NULL = none, and then a
                                fail-open step is refused like a fail-closed one when the
                                coordinator cannot be reached */
  int64_t policy_refresh_ms; /* how long a fetched policy is fresh; 0 = 30000; < 0 = never
                                fetch (every step is fail-closed when unreachable) */
  /* TLS (security, see README). Plaintext unless tls is true or a tls_* file is given. Files
   * are PEM and read once by idem_connect (an unreadable one: IDEM_INVALID_ARGUMENT naming
   * the field). The server's certificate is always verified: against tls_ca_file, else
   * gRPC's default roots; its name must match the address's host (or tls_server_name). */
  bool tls;
  const char *tls_ca_file;     /* CA bundle that signed the coordinator's certificate */
  const char *tls_cert_file;   /* client certificate for mutual TLS (with tls_key_file) */
  const char *tls_key_file;    /* its unencrypted private key */
  const char *tls_server_name; /* name expected in the server's certificate instead of the
                                  address's host (e.g. "localhost"); NULL = the host */
} idem_options;

/* Creates a client (the channel connects lazily). *out is owned: free with idem_close. */
int idem_connect(const idem_options *opt, idem_client **out, idem_error *err);

/* Closes the channel and frees the client. NULL is fine. No call may be in flight. */
void idem_close(idem_client *c);

/* --- values ------------------------------------------------------------------------------ */

#define IDEM_GLOBAL_ID_MAX 128
#define IDEM_NAME_MAX 64
#define IDEM_FINGERPRINT_MAX 64

typedef struct idem_step_key {
  const char *global_id;
  const char *service;
  const char *operation;
  idem_phase phase;
} idem_step_key;

typedef struct idem_result {
  idem_outcome outcome;
  int32_t code;
  uint8_t *body; /* owned by the struct that holds this result; NULL when body_len == 0 */
  size_t body_len;
  int64_t completed_unix_ms;
} idem_result;

typedef struct idem_begin {
  idem_decision decision;
  uint64_t attempt;
  int64_t lease_expires_unix_ms;
  bool takeover;
  int64_t expires_unix_ms; /* when the key is forgotten (the policy's key_retention_s) */
  bool has_result;         /* REPLAY */
  idem_result result;
  /* REPLAY past the policy's retention_s (docs/api.md §12): outcome and code only, the body was
   * dropped; the key is still remembered until expires_unix_ms. */
  bool result_expired;
  int64_t result_expires_unix_ms; /* REPLAY: when the body is (was) dropped */
} idem_begin;
void idem_begin_clear(idem_begin *b);

typedef struct idem_record {
  char tenant[IDEM_GLOBAL_ID_MAX + 1];
  char global_id[IDEM_GLOBAL_ID_MAX + 1];
  char service[IDEM_NAME_MAX + 1];
  char operation[IDEM_NAME_MAX + 1];
  idem_phase phase;
  idem_state state;
  uint64_t attempt;
  uint8_t fingerprint[IDEM_FINGERPRINT_MAX];
  size_t fingerprint_len;
  bool has_result;
  idem_result result;
  int64_t created_unix_ms;
  int64_t updated_unix_ms;
  int64_t lease_expires_unix_ms;
  int64_t expires_unix_ms;
  bool result_expired; /* past retention_s: the result has outcome and code, no body (§12) */
} idem_record;
void idem_record_clear(idem_record *r);

typedef struct idem_label {
  const char *key;
  const char *value;
} idem_label;

typedef struct idem_saga {
  char global_id[IDEM_GLOBAL_ID_MAX + 1];
  char *saga_type; /* owned */
  int64_t created_unix_ms;
  idem_record *steps; /* owned array */
  size_t n_steps;
  idem_label *labels; /* owned array; key and value strings owned */
  size_t n_labels;
} idem_saga;
void idem_saga_clear(idem_saga *s);

/* --- calls (one RPC each) ------------------------------------------------------------------ */

/* BeginSaga. request_id NULL = none. global_id receives the id (NUL-terminated);
 * created/created_unix_ms may be NULL. */
int idem_saga_begin(idem_client *c, const char *request_id, const char *saga_type,
                    const idem_label *labels, size_t n_labels,
                    char global_id[IDEM_GLOBAL_ID_MAX + 1], bool *created, int64_t *created_unix_ms,
                    idem_error *err);

/* GetSaga: the saga and all its steps. The server sends steps in pages of at most 3 MiB
 * (docs/api.md §16); this follows them, one call per page. */
int idem_saga_get(idem_client *c, const char *global_id, idem_saga *out, idem_error *err);

/* BeginStep. fp may be NULL with fp_len 0; lease_ms 0 = the policy's. */
int idem_step_begin(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                    uint32_t lease_ms, idem_begin *out, idem_error *err);

/* BeginStep that waits (docs/api.md §12): where the answer would be ABORTED because the step (or a
 * compensation's forward) is in progress, the coordinator holds the call for up to wait_ms
 * (0 to 60000; more is INVALID_ARGUMENT) and answers as soon as the step changes: REPLAY of its
 * result, PROCEED after a release or when the lease ran out (exactly one waiter gets it), or a
 * SKIP. ABORTED (with retry_after_ms) when the wait ran out first, or at once when the
 * coordinator holds too many waiting calls (--max-waiters). The call's deadline is the client's
 * per-call deadline plus wait_ms. wait_ms 0 is idem_step_begin. */
int idem_step_begin_wait(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                         uint32_t lease_ms, uint32_t wait_ms, idem_begin *out, idem_error *err);

/* CompleteStep. out may be NULL. */
int idem_step_complete(idem_client *c, const idem_step_key *key, uint64_t attempt,
                       idem_outcome outcome, int32_t code, const void *body, size_t body_len,
                       idem_record *out, idem_error *err);

/* ExtendLease. lease_expires_unix_ms may be NULL. */
int idem_step_extend(idem_client *c, const idem_step_key *key, uint64_t attempt, uint32_t lease_ms,
                     int64_t *lease_expires_unix_ms, idem_error *err);

/* LookupStep. */
int idem_step_lookup(idem_client *c, const idem_step_key *key, idem_record *out, idem_error *err);

typedef struct idem_policy {
  char service[IDEM_NAME_MAX + 1];
  char operation[IDEM_NAME_MAX + 1];
  int failure_mode; /* 1 fail-closed, 2 fail-open */
  uint32_t retention_s;
  uint32_t lease_ms;
  int64_t updated_unix_ms;
  /* how long a finished step's key outlives its body (docs/api.md §12): 0 = retention_s, else
   * retention_s .. 400 days. GetPolicy answers the value in effect (never 0). */
  uint32_t key_retention_s;
} idem_policy;

/* GetPolicy: the effective policy of (service, operation). */
int idem_policy_get(idem_client *c, const char *service, const char *operation, idem_policy *out,
                    idem_error *err);

typedef struct idem_status {
  char node_id[128];
  bool leader;
  char leader_address[128];
  uint64_t epoch;
  bool store_ok;
  bool election_ok;
  char version[32];
  int64_t started_unix_ms;
} idem_status;

/* Admin.GetStatus. */
int idem_get_status(idem_client *c, idem_status *out, idem_error *err);

/* The schema versions a node reports (docs/upgrading.md): the one it runs on and the newest its
 * migrations know; both 0 from a node older than 0.2.0. */
typedef struct idem_status_schema {
  uint32_t version;
  uint32_t newest;
} idem_status_schema;

/* Admin.GetStatus with the node's schema versions too (idem_status keeps its size: the ABI).
 * out or schema may be NULL. Since 0.2.0. */
int idem_get_status_schema(idem_client *c, idem_status *out, idem_status_schema *schema,
                           idem_error *err);

/* This libidem's version, "MAJOR.MINOR.PATCH" (the project's, CMake's project(VERSION)): a
 * static string, never NULL. Since 0.2.0. */
const char *idem_version(void);

/* --- slot groups (docs/api.md §17) ---------------------------------------------------------- */

#define IDEM_GROUP_NAME_MAX 63

/* A cluster spreads its sagas over store groups by slot: the slot of a saga is
 * fnv1a64(tenant + "\0" + global_id) mod slots (BeginSaga's: over its request id). */
uint32_t idem_slot_of(const char *tenant, const char *id, uint32_t slots);

typedef struct idem_slot_range {
  uint32_t from, to; /* inclusive */
  char group[IDEM_GROUP_NAME_MAX + 1];
  bool moving; /* being moved to to_group (docs/api.md §18) */
  char to_group[IDEM_GROUP_NAME_MAX + 1];
} idem_slot_range;

typedef struct idem_group_status {
  char name[IDEM_GROUP_NAME_MAX + 1];
  char leader_address[128]; /* "" while no node leads it */
  uint64_t epoch;
  bool store_ok; /* the answering node reached the group's store */
  uint32_t slot_count;
  bool led_here; /* the answering node leads it */
} idem_group_status;

typedef struct idem_topology {
  uint32_t slots;
  uint64_t version;        /* of the slot map; a newer one replaces an older */
  idem_slot_range *ranges; /* owned, in slot order, covering 0..slots-1 */
  size_t n_ranges;
  idem_group_status *groups; /* owned */
  size_t n_groups;
} idem_topology;

/* Coordinator.GetTopology: the slot map and each group's leader, as the answering node sees
 * them (any node answers). Free with idem_topology_clear. A client routes calls itself: after
 * the first answer that names a group (idem-group), it fetches the topology and sends each
 * call to its saga's group's leader. */
int idem_get_topology(idem_client *c, idem_topology *out, idem_error *err);
void idem_topology_clear(idem_topology *t);

/* --- moving slots between groups (docs/api.md §18) ------------------------------------------ */

#define IDEM_REQUEST_ID_MAX 255

/* The move under way, as the answering node reports it (Topology.move). Filled by
 * idem_get_topology_move; a struct of its own because idem_topology is allocated by callers
 * (libidem0's layout stays). Owns nothing. */
typedef struct idem_slot_move {
  bool active; /* a move is under way; everything else 0 / "" when not */
  char request_id[IDEM_REQUEST_ID_MAX + 1];
  uint32_t from, to;                    /* the slots moved, inclusive */
  char source[IDEM_GROUP_NAME_MAX + 1]; /* the group they leave */
  char target[IDEM_GROUP_NAME_MAX + 1]; /* the group they go to */
  /* "planned", "copying", "blocked" (the source refuses those slots while the last changes
   * drain), "switched" (the target serves them; the source's rows are being deleted),
   * "rolling_back" */
  char phase[32];
  uint64_t rows_copied;
  int64_t lag_bytes; /* how far the target's copy is behind the source */
  int64_t started_unix_ms;
  char note[256]; /* why it waits or rolls back, in the coordinator's words; "" when nothing */
} idem_slot_move;

/* idem_get_topology that also answers the move under way into *move (may be NULL; active false
 * when none). Longer strings than the fields hold are IDEM_BAD_RESPONSE. */
int idem_get_topology_move(idem_client *c, idem_topology *out, idem_slot_move *move,
                           idem_error *err);

/* Admin.MoveSlots (the operator role): moves slots from..to (inclusive) of the one group that
 * serves them to group, with PostgreSQL's logical replication; only the final handoff pauses those
 * slots. Any node answers: the leader of the slots' group runs the move, and the call waits for
 * its end (docs/api.md §18). */
#define IDEM_MOVE_REQUEST_ID_MAX 63
typedef struct idem_move {
  uint32_t from, to;      /* from <= to, both below the cluster's slot count */
  const char *group;      /* the target group (required; 1–63 bytes of [A-Za-z0-9._-]) */
  const char *request_id; /* 1–63 bytes of [A-Za-z0-9._-]; NULL or "" = libidem makes one (32
                             random hex digits) so that its own retries are idempotent. Give
                             your own to be able to wait for the move again after
                             DEADLINE_EXCEEDED */
  bool dry_run;           /* check and plan only: nothing is copied or changed */
  int64_t timeout_ms;     /* the whole call; 0 = the client's deadline_ms. A move of many rows
                             takes minutes: give it that long */
} idem_move;

typedef struct idem_move_result {
  uint64_t version;     /* the slot map's version with the new owner */
  uint64_t steps_moved; /* rows moved */
  uint64_t sagas_moved;
  int64_t paused_ms; /* how long those slots were refused during the handoff */
  bool replayed;     /* the same request id had already moved them: the first result */
  char request_id[IDEM_REQUEST_ID_MAX + 1]; /* the one sent (given, or made by libidem) */
} idem_move_result;

/* Blocks until the move ends: IDEM_OK with *out (may be NULL) once the target serves the slots;
 * the coordinator's error when it refused the move (INVALID_ARGUMENT / FAILED_PRECONDITION
 * naming from, to, group or request_id) or rolled it back (naming why). DEADLINE_EXCEEDED when
 * timeout_ms ran out first: the move goes on, and the same request_id again waits for it (or
 * answers its result, replayed). Arguments are checked here first (INVALID_ARGUMENT naming the
 * field, nothing sent). */
int idem_move_slots(idem_client *c, const idem_move *m, idem_move_result *out, idem_error *err);

/* idem_move_slots with a throttle: the initial copy goes at most max_rows_per_s rows a second on
 * average (0 = the server's --move-max-rate; docs/scaling-out.md). A function of its own so that
 * idem_move keeps libidem0's layout. */
int idem_move_slots_rate(idem_client *c, const idem_move *m, uint32_t max_rows_per_s,
                         idem_move_result *out, idem_error *err);

/* --- admin: incident response ------------------------------------------------------------ */

/* Admin.ListSteps filters (docs/api.md §2). Every field may be left zero: all live steps of the
 * tenant, in key order (global_id, service, operation, phase), page_size 100 (at most 1000). */
typedef struct idem_steps_filter {
  idem_state state;               /* IDEM_STATE_UNSPECIFIED = any */
  const char *service;            /* NULL or "" = any */
  const char *operation;          /* NULL or "" = any */
  const char *global_id;          /* NULL or "" = any */
  int64_t updated_before_unix_ms; /* 0 = any */
  bool lease_expired_only;        /* IN_PROGRESS steps whose lease has expired */
  uint32_t page_size;             /* 0 = 100 */
  const char *page_token;         /* NULL or "" = the first page; else a next_page_token */
} idem_steps_filter;

typedef struct idem_step_page {
  idem_record *steps; /* owned array */
  size_t n_steps;
  char *next_page_token; /* owned; "" on the last page (never NULL after success) */
} idem_step_page;
void idem_step_page_clear(idem_step_page *p);

/* Admin.ListSteps: one page. Pass next_page_token back with the same filters for the next
 * page; paging stays correct while steps are inserted or updated (no step twice, none of
 * those present throughout missed). A token used with other filters is INVALID_ARGUMENT. */
int idem_steps_list(idem_client *c, const idem_steps_filter *f, idem_step_page *out,
                    idem_error *err);

/* How to settle a stuck step by hand. */
typedef struct idem_resolution {
  idem_outcome outcome; /* SUCCEEDED, FAILED or RETRYABLE (releases the key) */
  int32_t code;
  const void *body; /* borrowed; replayed to later callers (SUCCEEDED, FAILED) */
  size_t body_len;
  const char *reason; /* required: why (kept in the audit trail) */
  const char *actor;  /* who; NULL or "" = the caller's tenant name */
} idem_resolution;

/* Admin.ResolveStep: only an IN_PROGRESS or UNKNOWN step (else FAILED_PRECONDITION; no record:
 * NOT_FOUND). Writes the audit row in the same transaction. out (may be NULL) receives the
 * record after the call. */
int idem_step_resolve(idem_client *c, const idem_step_key *key, const idem_resolution *res,
                      idem_record *out, idem_error *err);

typedef struct idem_audit_entry {
  int64_t at_unix_ms;
  char actor[129];
  char action[32]; /* "resolve" */
  char global_id[IDEM_GLOBAL_ID_MAX + 1];
  char service[IDEM_NAME_MAX + 1];
  char operation[IDEM_NAME_MAX + 1];
  idem_phase phase;
  char *reason; /* owned by the page */
  idem_state from_state;
  idem_state to_state;
  char tenant[IDEM_GLOBAL_ID_MAX + 1];
  char batch_id[37]; /* the ResolveSteps that made this resolution; "" for a single one */
} idem_audit_entry;

typedef struct idem_audit_page {
  idem_audit_entry *entries; /* owned array, newest first */
  size_t n_entries;
  char *next_page_token; /* owned; "" on the last page */
} idem_audit_page;
void idem_audit_page_clear(idem_audit_page *p);

/* Admin.ListAudit: global_id NULL or "" = the whole tenant; page_size 0 = 100. */
int idem_audit_list(idem_client *c, const char *global_id, uint32_t page_size,
                    const char *page_token, idem_audit_page *out, idem_error *err);

/* Admin.ResolveSteps (docs/api.md §12): every step the filter selects (IN_PROGRESS or UNKNOWN: the
 * filter must name one of those states, or lease_expired_only), resolved by the ResolveStep rule
 * with an audit row each (batch_id). More than max_steps matches: FAILED_PRECONDITION, nothing
 * resolved. A step that changed since it matched is skipped (matched - resolved). Repeat-safe:
 * the same request_id again answers the first answer (replayed) and resolves nothing; a run cut
 * short (UNAVAILABLE, the deadline) remembers nothing, and repeating it resolves the rest. */
typedef struct idem_bulk_resolution {
  idem_steps_filter filter; /* page_size and page_token are not used */
  idem_resolution res;
  bool dry_run;           /* count and sample only */
  uint32_t max_steps;     /* 1–10000, required */
  const char *request_id; /* required, 1–255 printable ASCII */
} idem_bulk_resolution;

typedef struct idem_bulk_key {
  char global_id[IDEM_GLOBAL_ID_MAX + 1];
  char service[IDEM_NAME_MAX + 1];
  char operation[IDEM_NAME_MAX + 1];
  idem_phase phase;
} idem_bulk_key;

typedef struct idem_bulk_result {
  uint32_t matched, resolved;
  idem_bulk_key sample[20]; /* the first matches, in key order */
  size_t n_sample;
  char batch_id[37]; /* "" on a dry run */
  bool dry_run, replayed;
} idem_bulk_result;

/* timeout_ms: the whole call (0 = the client's deadline_ms); a bulk resolution of thousands of
 * steps takes seconds. */
int idem_steps_resolve(idem_client *c, const idem_bulk_resolution *in, int64_t timeout_ms,
                       idem_bulk_result *out, idem_error *err);

/* --- helpers ------------------------------------------------------------------------------- */

#define IDEM_FINGERPRINT_LEN 32

/* SHA-256 of the caller's canonical bytes of a request (OpenSSL libcrypto). Never fails. */
void idem_fingerprint(const void *data, size_t len, uint8_t out[IDEM_FINGERPRINT_LEN]);

/* --- policies and fail-open ------------------------------------------------------------- */

/* idem_policy.failure_mode values (= idem.v1 FailureMode). */
#define IDEM_FAIL_CLOSED 1
#define IDEM_FAIL_OPEN 2

/* Admin.SetPolicy for the client's tenant: stores p (service/operation may be "*"; service "*"
 * needs operation "*"; failure_mode IDEM_FAIL_CLOSED or IDEM_FAIL_OPEN; retention_s 1 s – 90
 * days; lease_ms 1 ms – 1 h; updated_unix_ms is ignored). The new policy applies to the next
 * call (no restart). out (may be NULL) receives the stored row with its updated_unix_ms. */
int idem_policy_set(idem_client *c, const idem_policy *p, idem_policy *out, idem_error *err);

/* Admin.DeletePolicy: *deleted (may be NULL) says whether the tenant had that row. */
int idem_policy_delete(idem_client *c, const char *service, const char *operation, bool *deleted,
                       idem_error *err);

typedef struct idem_policies {
  idem_policy *policies; /* owned array */
  size_t n;
} idem_policies;
void idem_policies_clear(idem_policies *l);

/* Admin.ListPolicies: the tenant's own rows, by (service, operation). Server-wide rows seeded
 * from the coordinator's config file are not listed (idem_policy_get shows their effect). */
int idem_policy_list(idem_client *c, idem_policies *out, idem_error *err);

/* Client-side policy cache. idem_step_run fetches the effective policy of each
 * (service, operation) it runs with GetPolicy when the cached copy is older than
 * idem_options.policy_refresh_ms (a failed fetch keeps the old copy and is not retried before
 * the next refresh period). When the coordinator itself cannot be reached — BeginStep still
 * fails with UNAVAILABLE (not a "store ..." answer from a coordinator) or DEADLINE_EXCEEDED
 * after its retries — idem_step_run applies the cached failure mode:
 *  - fail-closed, or never fetched, or no journal_path: the error is returned, nothing runs;
 *  - fail-open: the action runs (ctx->unguarded), one journal line is appended (below), and
 *    the run answers IDEM_OK with rep->unguarded and rep->journaled set.
 * A coordinator that answers PROCEED_UNGUARDED (its store is down, fail-open operation) is
 * journaled the same way (source "server"), so reconcile can record it too.
 * idem_policy_prefetch fetches now (e.g. at start-up, so an outage right after start is
 * handled by the operation's policy rather than as "never known"). */
int idem_policy_prefetch(idem_client *c, const char *service, const char *operation,
                         idem_error *err);

/* The journal: a text file, one line per unguarded execution, appended with O_APPEND and
 * fsync'd before idem_step_run returns (a journal that cannot be written makes the run
 * return IDEM_DATA_LOSS, with *rep filled: the action did run). Lines are:
 *   idem1 TIME_MS SOURCE TENANT GLOBAL_ID SERVICE OPERATION PHASE OUTCOME CODE FP BODY
 * separated by one space: TIME_MS Unix ms; SOURCE "client" (coordinator unreachable) or
 * "server" (PROCEED_UNGUARDED); TENANT as configured ("default" when none); PHASE "forward" or
 * "compensation"; OUTCOME "succeeded", "failed", "retryable" or "unknown"; CODE decimal; FP the
 * fingerprint in lower-case hex; BODY the result body. Text fields are percent-encoded (every
 * byte outside [A-Za-z0-9._:/-] becomes %XX); an empty field is written "-". */

typedef enum idem_reconcile_status {
  IDEM_RECONCILE_RECORDED = 1,        /* the coordinator had no record: recorded now */
  IDEM_RECONCILE_ALREADY_PRESENT = 2, /* it held the same result (outcome, code, body): this
                                          line was reconciled before, or an identical run */
  IDEM_RECONCILE_RAN_TWICE = 3,       /* it held a different result, an execution in progress, a
                                         compensation, or a different fingerprint: the step ran
                                         under the coordinator too */
  IDEM_RECONCILE_SKIPPED = 4,         /* another tenant's line (reconcile once per tenant) */
  IDEM_RECONCILE_INVALID = 5,         /* malformed line */
  IDEM_RECONCILE_FAILED = 6,          /* the coordinator refused it (see error_code, detail) */
} idem_reconcile_status;

typedef struct idem_reconcile_line {
  size_t line_no; /* 1-based */
  idem_reconcile_status status;
  char global_id[IDEM_GLOBAL_ID_MAX + 1];
  char service[IDEM_NAME_MAX + 1];
  char operation[IDEM_NAME_MAX + 1];
  idem_phase phase;
  idem_outcome outcome; /* the journaled outcome */
  int error_code;       /* FAILED: the idem_code */
  char detail[160];     /* why, in a few words */
} idem_reconcile_line;

typedef struct idem_reconcile_report {
  size_t lines; /* journal lines read (blank lines excluded) */
  size_t recorded, already_present, ran_twice, skipped, invalid, failed;
  idem_reconcile_line *items; /* owned: every line that was not RECORDED, in file order */
  size_t n_items;
} idem_reconcile_report;
void idem_reconcile_report_clear(idem_reconcile_report *r);

/* Replays a journal into the coordinator, for the client's tenant: for each line BeginStep
 * (with the journaled fingerprint), and on PROCEED CompleteStep with the journaled outcome,
 * code and body. Never deletes or rewrites the file; running it again reports the lines
 * already recorded as ALREADY_PRESENT. Returns IDEM_OK when every line was read (whatever
 * their status); NOT_FOUND when the file cannot be opened; DATA_LOSS when it cannot be read to
 * its end; NOMEM; UNAVAILABLE / DEADLINE_EXCEEDED when the coordinator stopped answering (it
 * stops there; unlike other errors *rep then holds the lines done so far). rep is the caller's
 * (idem_reconcile_report_clear). */
int idem_journal_reconcile(idem_client *c, const char *journal_path, idem_reconcile_report *rep,
                           idem_error *err);

/* --- trace context (docs/api.md §22) -------------------------------------------------------- */

/* The calling thread's W3C trace context: every call this thread makes afterwards, through any
 * client (idem_step_run's BeginStep and CompleteStep included), sends traceparent and tracestate
 * as metadata, until the thread sets them again; NULL or "" sends none (set traceparent NULL
 * when the thread's work for a request ends). Copied. The coordinator stores the trace id with
 * the steps the call begins or finishes and ignores a malformed traceparent (counting it in
 * idem_traceparent_invalid_total), so the value is not checked here beyond what metadata can
 * carry: at most IDEM_TRACE_HEADER_MAX bytes of printable ASCII, else IDEM_INVALID_ARGUMENT
 * naming the field (and the thread's context is left as it was).
 * A thread-local setting rather than a field of an options struct, so that no struct of this
 * header changes size (the ABI stays additive) and a tracer's per-request context maps onto it. */
#define IDEM_TRACE_HEADER_MAX 512
int idem_trace_set(const char *traceparent, const char *tracestate, idem_error *err);

/* The trace ids a coordinator keeps with a step (32 lower-case hex, "" when none): of the
 * BeginStep that started its current attempt, and of the call that finished it. */
#define IDEM_TRACE_ID_MAX 32
typedef struct idem_trace_ids {
  char begin[IDEM_TRACE_ID_MAX + 1];
  char complete[IDEM_TRACE_ID_MAX + 1];
} idem_trace_ids;

/* idem_step_lookup, with the step's trace ids into *ids (zeroed on error). */
int idem_step_lookup_traced(idem_client *c, const idem_step_key *key, idem_record *out,
                            idem_trace_ids *ids, idem_error *err);

/* A page of idem_steps_list_traced: the steps and, at the same index, their trace ids. */
typedef struct idem_traced_page {
  idem_step_page page;
  idem_trace_ids *ids; /* owned array of page.n_steps */
} idem_traced_page;
void idem_traced_page_clear(idem_traced_page *p);

/* idem_steps_list, keeping only the steps whose begin or complete trace id is trace_id (NULL or
 * "" = any; else 32 lower-case hex, or the coordinator answers IDEM_INVALID_ARGUMENT naming
 * trace_id), with every step's trace ids. Pass page.next_page_token back with the same
 * filters and trace_id. */
int idem_steps_list_traced(idem_client *c, const idem_steps_filter *f, const char *trace_id,
                           idem_traced_page *out, idem_error *err);

/* --- idem_step_run: begin → your action → complete ----------------------------------------- */

typedef struct idem_step_ctx {
  const idem_step_key *key;
  uint64_t attempt; /* the fencing number: pass it on to your own writes (fence < attempt) */
  bool takeover;    /* an earlier attempt's lease expired: it may have partly run */
  bool unguarded;   /* DECISION_PROCEED_UNGUARDED: nothing is recorded for this run */
} idem_step_ctx;

/* What the action reports. The library copies body as soon as the action returns, so body must
 * still be valid at that moment (not in the action's own stack frame). outcome starts as
 * IDEM_OUTCOME_UNKNOWN; an action that leaves it unset or invalid completes as UNKNOWN. */
typedef struct idem_step_output {
  idem_outcome outcome; /* SUCCEEDED, FAILED, RETRYABLE or UNKNOWN */
  int32_t code;
  const void *body;
  size_t body_len;
} idem_step_output;

/* The action. Fill *out; the return value is ignored (report failures through out). */
typedef void (*idem_step_fn)(void *arg, const idem_step_ctx *ctx, idem_step_output *out);

typedef struct idem_run_options {
  int64_t deadline_ms;     /* the whole run, retries included; 0 = 10000 */
  uint32_t lease_ms;       /* 0 = the policy's */
  int64_t backoff_base_ms; /* first retry waits up to this; 0 = 50 */
  int64_t backoff_max_ms;  /* cap of one wait; 0 = 1000 */
  /* By default a BeginStep that meets the step in progress waits on the coordinator for it
   * (idem_step_begin_wait, for what is left of the deadline, at most 60 s) instead of sleeping
   * between ABORTED retries; true: never wait there, retry with backoff (servers older than
   * wait_ms ignore it and answer ABORTED at once, which is then retried with backoff too). */
  bool no_wait;
} idem_run_options;

typedef struct idem_run_report {
  idem_decision decision; /* of the BeginStep that settled the run */
  uint64_t attempt;
  bool ran;           /* the action was called in this run */
  bool takeover;      /* it ran as a takeover of an expired lease */
  bool replayed;      /* the stored result was returned instead */
  idem_result result; /* the outcome: the action's (ran) or the stored one (replayed); owned */
  int begin_retries;  /* BeginStep calls retried after ABORTED/UNAVAILABLE (or DEADLINE_EXCEEDED
                       * from one of several addresses) */
  /* policies and fail-open */
  bool unguarded; /* ran with nothing recorded: PROCEED_UNGUARDED, or the coordinator was
                     unreachable and the cached policy is fail-open (decision then
                     IDEM_DECISION_PROCEED_UNGUARDED, attempt 0) */
  bool journaled; /* an unguarded run was appended to idem_options.journal_path */
} idem_run_report;
void idem_run_report_clear(idem_run_report *r);

/* Runs one guarded step: BeginStep (waiting on the coordinator while the step is in progress
 * elsewhere, see idem_run_options.no_wait; retrying ABORTED and UNAVAILABLE with exponential
 * backoff and full jitter inside the deadline); on PROCEED calls fn, then CompleteStep with its
 * output (retrying UNAVAILABLE: a repeated identical Complete is harmless); on REPLAY returns the
 * stored result without calling fn; on a SKIP decision calls nothing. Returns IDEM_OK when the
 * step is settled (see rep->decision, rep->ran, rep->replayed, rep->result), or the error that
 * stopped it: FAILED_PRECONDITION (fingerprint mismatch), ABORTED (still in progress at the
 * deadline, or the lease was lost before Complete: the action's effects must be fenced by
 * attempt), UNAVAILABLE / DEADLINE_EXCEEDED, IDEM_STEP_UNKNOWN (below). ro and rep may be NULL.
 * Details:
 *  - A lost try (CANCELLED with no reason: a draining node's gRPC ended the call without saying
 *    whether the coordinator had it) is retried like UNAVAILABLE, at BeginStep and at
 *    CompleteStep, inside the deadline: a repeated BeginStep whose lost try began the step
 *    meets it in progress and waits for its lease (then takes it over); a repeated Complete is
 *    harmless. fn never runs twice for one attempt.
 *  - IDEM_STEP_UNKNOWN (err->outcome_unknown set, reason ""): the deadline passed while the run
 *    retried, and a try of this client was lost since the run began: the step may have begun
 *    (BeginStep) or been stored (CompleteStep) on it. rep->ran says whether fn ran; when it did,
 *    *rep is filled (its result may or may not be stored). Run the step again later: the
 *    coordinator answers what it recorded. Such a run never goes unguarded (docs/api.md §20).
 *  - The action reported RETRYABLE: CompleteStep releases the key and the function returns
 *    IDEM_STEP_FAILED; unlike other errors, *rep is then filled (ran, attempt, result).
 *    SUCCEEDED, FAILED and UNKNOWN settle the step: IDEM_OK, see rep->result.outcome.
 *  - A wait before a retry is random(0, min(backoff_max_ms, backoff_base_ms * 2^n)), raised
 *    after ABORTED to the server's idem-retry-after-ms (capped at backoff_max_ms); no wait
 *    crosses the deadline. Each call's deadline is the smaller of the client's and what is
 *    left, except the first CompleteStep, which always gets the client's full per-call deadline.
 *  - DECISION_PROCEED_UNGUARDED: fn runs with ctx->unguarded and nothing is completed (the
 *    coordinator recorded nothing). The same happens when the coordinator cannot be reached
 *    and the operation's cached policy is fail-open (see "policies and fail-open"); both are
 *    journaled when idem_options.journal_path is set. */
int idem_step_run(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                  idem_step_fn fn, void *arg, const idem_run_options *ro, idem_run_report *rep,
                  idem_error *err);

#ifdef __cplusplus
}
#endif
#endif
