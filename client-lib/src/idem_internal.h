/* idem_internal.h — what the files of libidem share; never installed.
 *
 * Symbols here are prefixed idem__ (and hidden from libidem.so by its version script).
 * Only client.c and tls.c talk to gRPC; calls.c and run.c see protobuf-c messages and
 * idem_error.
 */
#ifndef IDEM_INTERNAL_H
#define IDEM_INTERNAL_H

#include <idem/idem.h>
#include <protobuf-c/protobuf-c.h>

#include "idem/v1/coordinator.pb-c.h"

/* Every RPC the library knows; the table in client.c gives each its path. */
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

/* --- slot groups: route.c (docs/api.md §17) ------------------------------------------- */
/* What the client knows of the cluster's groups: the slot map (from GetTopology) and each
 * group's leader (from the map and from redirects). Thread-safe. */
typedef struct idem__topo idem__topo;
idem__topo *idem__topo_new(void);
void idem__topo_free(idem__topo *t);
/* The saga request m names (a global id, or BeginSaga's request id); "" when none. */
const char *idem__route_id(idem__method m, const ProtobufCMessage *req);
/* The leader of id's group into addr; false when no map or no leader is known. */
bool idem__topo_leader(idem__topo *t, const char *tenant, const char *id, char *addr, size_t cap);
/* A redirect named group's leader (for id): noted. True when the map should be fetched now
 * (none yet, or it disagrees with the redirect; at most once a second). */
bool idem__topo_redirect(idem__topo *t, const char *tenant, const char *id, const char *group,
                         const char *leader);
/* A try sent to addr got no answer from a coordinator (unreachable, or killed by a draining
 * node's gRPC): addr leads no group as far as the client knows, until a map or a redirect says
 * so again; meanwhile calls of those groups go where the client's calls go (and a standby's
 * redirect names the new leader). */
void idem__topo_unreachable(idem__topo *t, const char *addr);
/* The named group's leader into addr; false when not known. */
bool idem__topo_group_leader(idem__topo *t, const char *group, char *addr, size_t cap);
/* Takes a GetTopology answer (a newer or equal version replaces the map). */
void idem__topo_set(idem__topo *t, const Idem__V1__Topology *pb);
/* idem_get_topology's answer, kept by the client for routing (client.c). */
void idem__topology_taken(idem_client *c, const Idem__V1__Topology *t);
/* Topology.move into *out (zeroed, active false, when pb is NULL): moves.c. IDEM_OK, or
 * IDEM_BAD_RESPONSE (a string longer than its field; *out is then zeroed). */
int idem__slot_move_from_pb(const Idem__V1__SlotMove *pb, idem_slot_move *out, idem_error *err);

/* --- security: tls.c ------------------------------------------------------------------- */
struct grpc_channel_credentials;
/* Whether opt asks for TLS (tls, or any tls_* file). */
bool idem__tls_wanted(const idem_options *opt);
/* The credentials every channel of the client uses: insecure, or TLS from opt's files (read
 * now). IDEM_OK with *out owned (grpc_channel_credentials_release), or an error naming the
 * field. Call between grpc_init and grpc_shutdown. */
int idem__credentials(const idem_options *opt, struct grpc_channel_credentials **out,
                      idem_error *err);

/* The gRPC path of a method ("/idem.v1.Coordinator/BeginStep"). */
const char *idem__method_path(idem__method m);

/* One unary RPC: packs req, sends it with the client's metadata under a deadline of
 * timeout_ms (0 = the client's deadline_ms), waits for the answer and unpacks it with
 * resp_desc. Failover: UNAVAILABLE is retried within that deadline — at once at the
 * leader a standby named (idem-leader), else on the next address after a full-jitter backoff;
 * a try whose outcome is unknown is repeated (same request, same key) only when that is
 * harmless (every method but BeginSaga without a request id), and the final error then says
 * outcome_unknown. On IDEM_OK *resp owns a message the caller frees with
 * protobuf_c_message_free_unpacked(*resp, NULL). On error *resp is NULL and err (if not NULL)
 * holds the status code, the server's message, idem-retry-after-ms, idem-leader and
 * outcome_unknown. Thread-safe: one completion queue per call. */
int idem__unary(idem_client *c, idem__method m, const ProtobufCMessage *req,
                const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
                ProtobufCMessage **resp, idem_error *err);

/* idem__unary for a call that acts on one store group's steps (docs/api.md §17): sent with
 * idem-group metadata, first to that group's leader when the client knows it. */
int idem__unary_group(idem_client *c, idem__method m, const ProtobufCMessage *req,
                      const char *group, const ProtobufCMessageDescriptor *resp_desc,
                      int64_t timeout_ms, ProtobufCMessage **resp, idem_error *err);

/* The client's default per-call deadline in milliseconds (> 0). */
int64_t idem__client_deadline_ms(const idem_client *c);

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

/* idem_step_begin / idem_step_complete with an explicit per-call timeout (0 = the client's). */
int idem__step_begin(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                     uint32_t lease_ms, uint32_t wait_ms, int64_t timeout_ms, idem_begin *out,
                     idem_error *err);
int idem__step_complete(idem_client *c, const idem_step_key *key, uint64_t attempt,
                        idem_outcome outcome, int32_t code, const void *body, size_t body_len,
                        int64_t timeout_ms, idem_record *out, idem_error *err);

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

/* The client's policy cache: (service, operation) → failure mode and when it was fetched. */
typedef struct idem__pcache idem__pcache;
idem__pcache *idem__pcache_new(void); /* NULL on allocation failure */
void idem__pcache_free(idem__pcache *p);
/* Records a fetch of (svc, op) made at now_ms (monotonic): mode IDEM_FAIL_CLOSED / _OPEN when it
 * succeeded, 0 when it failed (the old mode is kept). false when no entry could be made. */
bool idem__pcache_note(idem__pcache *p, const char *svc, const char *op, int64_t now_ms, int mode);
/* Whether (svc, op) is due for a fetch (never tried, or last tried every_ms ago or more); a
 * due entry is marked tried now, so that one thread of many fetches. */
bool idem__pcache_claim(idem__pcache *p, const char *svc, const char *op, int64_t now_ms,
                        int64_t every_ms);
/* The cached failure mode, 0 when never fetched. */
int idem__pcache_mode(idem__pcache *p, const char *svc, const char *op);

/* Accessors of the client's options (client.c). */
idem__pcache *idem__client_pcache(const idem_client *c);
const char *idem__client_tenant(const idem_client *c);        /* "default" when none was given */
const char *idem__client_journal(const idem_client *c);       /* NULL when none */
int64_t idem__client_policy_refresh_ms(const idem_client *c); /* < 0: never fetch */

/* Fetches (service, operation) with GetPolicy when the cached copy is stale (at most one
 * attempt per refresh period, bounded by timeout_ms). Never fails: errors keep the old copy. */
void idem__policy_refresh(idem_client *c, const char *service, const char *operation,
                          int64_t timeout_ms);

/* The cached failure mode (IDEM_FAIL_CLOSED / IDEM_FAIL_OPEN), 0 when never fetched. */
int idem__policy_cached_mode(idem_client *c, const char *service, const char *operation);

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

/* Whether every known coordinator address was called since since_ms (monotonic) and none of
 * them could decide (docs/api.md §20): the one case in which a fail-open operation runs unguarded.
 * Never when a try was lost since since_ms (idem__lost_since). Thread-safe. */
bool idem__none_could_decide(idem_client *c, int64_t since_ms);

/* Whether a call of this client lost a try (CANCELLED with no idem-reason: a draining node's
 * gRPC ended it without saying whether the coordinator had it) since since_ms (monotonic), on any
 * address. Thread-safe. */
bool idem__lost_since(idem_client *c, int64_t since_ms);

/* How many coordinator addresses the client knows now (the list given plus leaders named). */
int idem__client_endpoints(idem_client *c);

/* A call that failed as it does when no coordinator can decide: DEADLINE_EXCEEDED or
 * UNAVAILABLE, and idem__none_could_decide(c, since_ms). */
bool idem__unreachable(idem_client *c, const idem_error *err, int64_t since_ms);

/* Appends one journal line (format in idem.h) with O_APPEND and fsync. source "client" or
 * "server". IDEM_OK or IDEM_DATA_LOSS (err filled). Thread-safe. */
int idem__journal_append(const char *path, const char *source, const char *tenant,
                         const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                         const idem_result *res, idem_error *err);

#endif
