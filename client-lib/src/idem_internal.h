/* idem_internal.h — what the files of libidem share; never installed.
 *
 * Symbols here are prefixed idem__ (and hidden from libidem.so by its version script).
 * Only transport.c and tls.c talk to gRPC; the other files see protobuf-c messages and
 * idem_error. A call goes one way down: the public functions (calls.c, admin.c, policies.c,
 * moves.c) and the step helper (run.c) -> the retry loop and routing (route.c) -> one try
 * (transport.c).
 */
#ifndef IDEM_INTERNAL_H
#define IDEM_INTERNAL_H

#include <idem/idem.h>
#include <protobuf-c/protobuf-c.h>

#include "idem/v1/coordinator.pb-c.h"

/* Every RPC the library knows; the table in transport.c gives each its path. */
typedef enum idem__method {
  IDEM__M_BEGIN_SAGA,
  IDEM__M_BEGIN_STEP,
  IDEM__M_COMPLETE_STEP,
  IDEM__M_EXTEND_LEASE,
  IDEM__M_LOOKUP_STEP,
  IDEM__M_GET_SAGA,
  IDEM__M_GET_POLICY,
  IDEM__M_LIST_STEPS,
  IDEM__M_RESOLVE_STEP,
  IDEM__M_SET_POLICY,
  IDEM__M_DELETE_POLICY,
  IDEM__M_LIST_POLICIES,
  IDEM__M_LIST_AUDIT,
  IDEM__M_GET_STATUS,
  IDEM__M_RESOLVE_STEPS,
  IDEM__M_GET_TOPOLOGY,
  IDEM__M_MOVE_SLOTS,
  IDEM__M_COUNT
} idem__method;

/* failover: addresses a client keeps (the list given plus leaders it was sent to), and the
 * least time worth another try before the caller's deadline. */
#define IDEM__MAX_ENDPOINTS 16
#define IDEM__MIN_TRY_MS 50
/* The longest BeginStep wait (wait_ms) the step helper asks for. */
#define IDEM__WAIT_MS_MAX 60000
/* The size of a buffer for a group name (idem-group). */
#define IDEM__GROUP_CAP (IDEM_GROUP_NAME_MAX + 1)

/* --- the client: client.c ------------------------------------------------------------------ */
typedef struct idem__transport idem__transport;
typedef struct idem__route idem__route;
typedef struct idem__pcache idem__pcache;

/* What idem_connect made of idem_options: set once, then only read (the parts lock
 * themselves). */
struct idem_client {
  char *tenant;              /* NULL = send no idem-tenant */
  char *auth;                /* "Bearer <token>", NULL = none */
  int64_t deadline_ms;       /* per call, > 0 */
  char *journal_path;        /* unguarded-execution journal, NULL = none */
  int64_t policy_refresh_ms; /* < 0: never fetch a policy */
  idem__transport *tp;       /* gRPC: credentials and channels (transport.c) */
  idem__route *route;        /* endpoints, the slot map, what each address said (route.c) */
  idem__pcache *pcache;      /* (service, operation) -> failure mode (policies.c) */
};

/* The tenant whose calls are sent ("default" when none was given). */
const char *idem__client_tenant(const idem_client *c);

/* --- one try: transport.c (no endpoints, no retries) --------------------------------------- */
/* The credentials (tls.c) and the server name every channel uses; grpc_init is held until
 * idem__transport_close. IDEM_OK with *out owned, or an error naming the field (or NOMEM). */
int idem__transport_open(const idem_options *opt, idem__transport **out, idem_error *err);
void idem__transport_close(idem__transport *t); /* NULL: nothing */
/* One address's channel into *out, every method registered, reconnecting quickly (a restarted
 * or newly elected node must not sit behind gRPC's default reconnect backoff of up to 120 s).
 * IDEM_OK, IDEM_NOMEM, or IDEM_INTERNAL when gRPC cannot make it (*out NULL). */
typedef struct idem__chan idem__chan;
int idem__chan_new(idem__transport *t, const char *addr, idem__chan **out);
void idem__chan_free(idem__chan *ch); /* NULL: nothing */
/* The metadata of a try, each NULL = not sent; the strings outlive the try. */
typedef struct idem__md {
  const char *tenant, *auth, *group;
} idem__md;
/* One try on ch under a deadline of timeout_ms (> 0): packs req, sends it with meta and the
 * thread's trace context, waits and unpacks the answer with resp_desc. On IDEM_OK *resp owns a
 * message (protobuf_c_message_free_unpacked). On error *resp is NULL and *err holds the status
 * code, the server's message, idem-retry-after-ms, idem-leader, idem-reason, and outcome_unknown
 * when the request may have been acted on (DEADLINE_EXCEEDED, an UNAVAILABLE that no standby
 * sent, a lost try); heard_group (IDEM__GROUP_CAP bytes, may be NULL) receives idem-group. The
 * request is sent only on a connected channel, after reading what its server sent (a draining
 * node's GOAWAY): a try that cannot connect by the deadline ends UNAVAILABLE (or
 * DEADLINE_EXCEEDED) "nothing was sent", without outcome_unknown. */
int idem__send(idem__chan *ch, idem__method m, const ProtobufCMessage *req, const idem__md *meta,
               const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
               ProtobufCMessage **resp, idem_error *err, char *heard_group);
/* A try that gRPC ended without an answer and without saying whether the coordinator had it:
 * CANCELLED with no idem-reason. The coordinator never answers CANCELLED and libidem never
 * cancels a call; a server's gRPC core does, for a call that reached a node after that node
 * began to shut down (docs/upgrading.md). Retried like an UNAVAILABLE without a leader: on
 * another node, only when repeating the call is harmless, its outcome unknown until an answer
 * says otherwise. */
bool idem__lost_try(int rc, const idem_error *err);
/* The gRPC path of a method ("/idem.v1.Coordinator/BeginStep"). */
const char *idem__method_path(idem__method m);

/* --- what a refusal proves: refusal.c ----------------------------------------------------- */
/* Whether err, the coordinator's refusal of m's request req, proves that no earlier try of this
 * request acted: had one acted, this repeat of it would have been answered otherwise (docs/api.md
 * §20, "A refusal that proves the lost try did nothing"). Then the refusal is the call's answer,
 * its outcome known. The refusals that do are the rows of
 * client-lib/conformance/settling-refusals.json (method, reason word, request outcomes); every
 * other refusal proves nothing. */
bool idem__refusal_settles(idem__method m, const ProtobufCMessage *req, const idem_error *err);

/* --- security: tls.c ------------------------------------------------------------------- */
struct grpc_channel_credentials;
/* Whether opt asks for TLS (tls, or any tls_* file). */
bool idem__tls_wanted(const idem_options *opt);
/* The credentials every channel of the client uses: insecure, or TLS from opt's files (read
 * now). IDEM_OK with *out owned (grpc_channel_credentials_release), or an error naming the
 * field. Call between grpc_init and grpc_shutdown. */
int idem__credentials(const idem_options *opt, struct grpc_channel_credentials **out,
                      idem_error *err);

/* --- slot moves: moves.c ------------------------------------------------------------------ */
/* Topology.move into *out (zeroed, active false, when pb is NULL): moves.c. IDEM_OK, or
 * IDEM_BAD_RESPONSE (a string longer than its field; *out is then zeroed). */
int idem__slot_move_from_pb(const Idem__V1__SlotMove *pb, idem_slot_move *out, idem_error *err);

/* --- routing and the retry loop: route.c --------------------------------------------------- */
/* The client's endpoints (a channel per coordinator address: the list given, plus leaders named
 * by idem-leader or the slot map; the current one, where calls go first), the slot map (which
 * node leads each slot group, docs/api.md §17: from GetTopology and from redirects), and what
 * each address was last heard say (docs/api.md §20). Thread-safe. */
idem__route *idem__route_new(idem__transport *tp); /* NULL on allocation failure */
void idem__route_free(idem__route *r);             /* closes every channel; NULL: nothing */
/* Adds the endpoints of a list "h1:p1,h2:p2" (blanks around an address are ignored), each with
 * its channel. IDEM_OK, IDEM_NOMEM, or IDEM_INTERNAL when a channel cannot be made or the list
 * names none. */
int idem__route_add_list(idem__route *r, const char *list, idem_error *err);
/* idem_get_topology's answer, kept for routing. */
void idem__route_topology(idem__route *r, const Idem__V1__Topology *t);

/* How a call retries; the one retry loop of libidem (idem__call) follows it. */
typedef struct idem__retry {
  int64_t end_ms;          /* monotonic: no wait and no try (but first_full's) runs past it */
  int64_t try_ms;          /* one try's deadline, bounded by end_ms; 0 = what is left of it */
  int64_t base_ms, max_ms; /* full-jitter backoff before try n: random(0, min(max, base*2^n)) */
  unsigned also;           /* IDEM__RETRY_*: what is retried beside UNAVAILABLE and lost tries */
  bool first_full;         /* the end is at least the first try's start + try_ms */
  bool poll;               /* BeginStep waits on the coordinator: idem__step_begin points
                              poll_ms at the request's wait_ms */
  uint32_t *poll_ms;       /* when set, before each try: what is left (at most
                              IDEM__WAIT_MS_MAX), also added to the try's deadline */
  int64_t lost_since_ms;   /* > 0 (when a step helper's run began): the loop ends on a code it
                              retries, or a deadline, after a try of the client was lost since
                              then: IDEM_STEP_UNKNOWN (outcome_unknown), the step may have been
                              acted on */
  int retries;             /* out: tries sent after a wait (hops to a named leader are not) */
} idem__retry;
#define IDEM__RETRY_ABORTED 1u   /* ABORTED, waiting at least idem-retry-after-ms (up to max_ms) */
#define IDEM__RETRY_DEADLINE 2u  /* DEADLINE_EXCEEDED */
#define IDEM__RETRY_ELSEWHERE 4u /* DEADLINE_EXCEEDED when the client knows another address */

/* How a call other than the step helper's retries: within timeout_ms (0 = the client's
 * deadline_ms), UNAVAILABLE and lost tries only, backoff from 25 ms up to 500 ms. */
idem__retry idem__retry_call(const idem_client *c, int64_t timeout_ms);

/* One call, tried and retried as how says (NULL = idem__retry_call(c, 0)). saga_id names the
 * saga the request acts on (a global id, or BeginSaga's request id; NULL or "" = none) and
 * group a store group (sent as idem-group; NULL = none): the first try goes to the leader of
 * that saga's or that group's slot group when the client knows it (docs/api.md §17), else to
 * the client's current address. Failover: UNAVAILABLE is retried at once at the leader a
 * standby named (idem-leader), else on the next address after a full-jitter backoff; a try
 * whose outcome is unknown is repeated (same request, same key) only when that is harmless
 * (every method but BeginSaga without a request id), and the final error then says
 * outcome_unknown, unless it is a refusal that proves no try of the request acted (BeginStep
 * fingerprint-mismatch; CompleteStep finished-differently, or lease-lost of a SUCCEEDED or
 * FAILED outcome: docs/api.md §20), which is the call's answer, its outcome known. No try starts
 * that cannot fit before the end (the last try's length, at least IDEM__MIN_TRY_MS); when a try
 * runs out of time after a coordinator said UNAVAILABLE, the error is what that coordinator said.
 * On IDEM_OK *resp owns a message the caller frees with protobuf_c_message_free_unpacked(*resp,
 * NULL). On error *resp is NULL and err (if not NULL) holds the status code, the server's message,
 * idem-retry-after-ms, idem-leader and outcome_unknown. Thread-safe: each try has its own
 * completion queue. */
int idem__call(idem_client *c, idem__method m, const ProtobufCMessage *req, const char *saga_id,
               const char *group, const ProtobufCMessageDescriptor *resp_desc, idem__retry *how,
               ProtobufCMessage **resp, idem_error *err);

/* idem__call with idem__retry_call(c, timeout_ms) and no group. */
int idem__unary(idem_client *c, idem__method m, const ProtobufCMessage *req, const char *saga_id,
                const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
                ProtobufCMessage **resp, idem_error *err);

/* What the last call to a coordinator heard (docs/api.md §20): nothing (deadline exceeded,
 * connection refused), a coordinator that cannot decide now (store-unavailable, store-timeout,
 * no-leader), a standby that named the leader (not-leader: as good as what that node said), or
 * one that answered otherwise (an answer, shutting-down, ...: it or another node decides). */
typedef enum idem__heard {
  IDEM__HEARD_NOTHING = 1,
  IDEM__HEARD_UNDECIDED,
  IDEM__HEARD_SENT,
  IDEM__HEARD_DECIDER,
} idem__heard;

/* A call that failed as it does when no coordinator can decide: err says DEADLINE_EXCEEDED or
 * UNAVAILABLE, every known coordinator address was called since since_ms (monotonic) and none
 * of them could decide (docs/api.md §20): the one case in which a fail-open operation runs
 * unguarded. Never when a try was lost since since_ms (idem__lost_since). Thread-safe. */
bool idem__unreachable(idem__route *r, const idem_error *err, int64_t since_ms);

/* Whether a call of this client lost a try (idem__lost_try) since since_ms (monotonic), on any
 * address. Thread-safe. */
bool idem__lost_since(idem__route *r, int64_t since_ms);

/* Sets *err (if not NULL) to code with a printf-style message; returns code. */
int idem__fail(idem_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Zeroes *err (if not NULL). */
void idem__err_reset(idem_error *err);

/* Keeps detail and hint (either may be NULL: none) as the calling thread's notes of err, a
 * coordinator's error answer just filled in (idem_error_detail, idem_error_hint): each cut to
 * IDEM__NOTE_MAX - 1 bytes. */
#define IDEM__NOTE_MAX 256
void idem__err_notes(const idem_error *err, const char *detail, const char *hint);

/* Monotonic clock in milliseconds. */
int64_t idem__now_ms(void);

/* Sleeps ms milliseconds (restarts after signals). */
void idem__sleep_ms(int64_t ms);

/* A uniformly distributed number in [0, bound] (bound >= 0); thread-safe. */
int64_t idem__rand_upto(int64_t bound);

/* Full-jitter backoff: random(0, min(max_ms, base_ms * 2^n)). */
int64_t idem__backoff_ms(int64_t base_ms, int64_t max_ms, int n);

/* idem_step_begin_wait / idem_step_complete retried as how says (the step helper's run; NULL =
 * a call's, idem__retry_call). A BeginStep with how->poll_ms asks the coordinator to wait for
 * what is left of how's end (wait_ms is then ignored). */
int idem__step_begin(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                     uint32_t lease_ms, uint32_t wait_ms, idem__retry *how, idem_begin *out,
                     idem_error *err);
int idem__step_complete(idem_client *c, const idem_step_key *key, uint64_t attempt,
                        idem_outcome outcome, int32_t code, const void *body, size_t body_len,
                        idem__retry *how, idem_record *out, idem_error *err);

/* trace.c: the calling thread's traceparent and tracestate (idem_trace_set) as up to two
 * metadata entries at md (static slices over thread-local strings, valid while the thread
 * does not set them again); returns how many. */
struct grpc_metadata;
size_t idem__trace_md(struct grpc_metadata *md);
/* A StepRecord's trace ids into *ids (an id of another length reads as ""). */
void idem__trace_ids_from_pb(const Idem__V1__StepRecord *pb, idem_trace_ids *ids);

/* ListStepsRequest from f (strings borrowed). */
void idem__filter_to_pb(const idem_steps_filter *f, Idem__V1__ListStepsRequest *req);

/* protobuf-c view of a key (strings borrowed; NULL becomes ""). */
void idem__key_to_pb(const idem_step_key *key, Idem__V1__StepKey *pb);

/* Copies a StepResult into r (body duplicated). Returns IDEM_OK or IDEM_NOMEM. */
int idem__result_from_pb(const Idem__V1__StepResult *pb, idem_result *r, idem_error *err);

/* Frees what r holds and zeroes it. */
void idem__result_clear(idem_result *r);

/* Fills r from a StepRecord (body duplicated). IDEM_OK, IDEM_NOMEM or IDEM_BAD_RESPONSE (a
 * string too long); r may then hold a partial copy: free it with idem_record_clear. */
int idem__record_from_pb(const Idem__V1__StepRecord *pb, idem_record *r, idem_error *err);
/* An answer's record into *out (nothing when out or pb is NULL); on failure *out is cleared. */
int idem__record_out(const Idem__V1__StepRecord *pb, idem_record *out, idem_error *err);

/* --- the lease keeper: keeper.c ----------------------------------------------------------- */

typedef struct idem__keeper idem__keeper;
/* Starts a thread that extends (key, attempt)'s lease (lease_ms; 0 = the policy's) every third
 * of what is left of it (expires_unix_ms, the wall clock), until idem__keeper_stop. NULL when
 * no thread could be started: the action then runs without one. key is borrowed and must
 * outlive the keeper. */
idem__keeper *idem__keeper_start(idem_client *c, const idem_step_key *key, uint64_t attempt,
                                 uint32_t lease_ms, int64_t expires_unix_ms);
/* Stops the thread (waits for an extension under way) and frees k (NULL: nothing). true when an
 * extension was refused: another attempt holds the step. */
bool idem__keeper_stop(idem__keeper *k);

/* --- policies and fail-open: policies.c, journal.c --------------------------------------- */

/* The client's policy cache: (service, operation) → the failure mode last fetched and when. */
idem__pcache *idem__pcache_new(void); /* NULL on allocation failure */
void idem__pcache_free(idem__pcache *p);

/* What a BeginStep answer said of (service, operation)'s failure mode (IDEM_FAIL_CLOSED /
 * IDEM_FAIL_OPEN; another value is ignored), kept as if fetched now: the step helper's
 * fail-open check then needs no GetPolicy of its own. Nothing when policies are never fetched. */
void idem__policy_heard(idem_client *c, const char *service, const char *operation, int mode);

/* When no failure mode of (service, operation) is cached: fetches it with GetPolicy (at most
 * one attempt per refresh period, bounded by timeout_ms). Never fails: errors keep the cache. */
void idem__policy_learn(idem_client *c, const char *service, const char *operation,
                        int64_t timeout_ms);

/* The cached failure mode (IDEM_FAIL_CLOSED / IDEM_FAIL_OPEN), 0 when never fetched. */
int idem__policy_cached_mode(idem_client *c, const char *service, const char *operation);

/* Whether a step that failed with err runs unguarded (docs/api.md §20): the client keeps a
 * journal, (service, operation)'s cached policy is fail-open, and no coordinator could decide
 * since since_ms (monotonic; idem__unreachable). */
bool idem__fail_open(idem_client *c, const char *service, const char *operation,
                     const idem_error *err, int64_t since_ms);

/* Appends one journal line (format in idem.h) with O_APPEND and fsync. source "client" or
 * "server". IDEM_OK or IDEM_DATA_LOSS (err filled). Thread-safe. */
int idem__journal_append(const char *path, const char *source, const char *tenant,
                         const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                         const idem_result *res, idem_error *err);

#endif
