/* moves.h — helpers for tests of slot moves (docs/api.md §18) on a tests/support/groups.h
 * cluster: Admin.MoveSlots and GetTopology as raw calls (their answers decoded), waits for a
 * move's phase and end, row counts by slot in a group's database, what a move can leave behind,
 * client traffic on g1's slots that remembers every acknowledged completion, for the history
 * check after, and the scene the move tests share: that traffic running, a MoveSlots on a
 * thread of its own. */
#ifndef IDEM_TEST_MOVES_H
#define IDEM_TEST_MOVES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "groups.h"
#include "idem/v1/coordinator.pb-c.h"

typedef struct move_answer {
  int status;
  char details[512];
  char reason[64]; /* the idem-reason trailer ("" on OK) */
  uint64_t version, steps, sagas;
  int64_t paused_ms;
  bool replayed;
} move_answer;

/* MoveSlots sent to node `at` (deadline 90 s); 0 / NULL fields are left out of the request. */
move_answer h_move_slots(const h_groups *cl, int at, uint32_t from, uint32_t to,
                         const char *group, const char *rid, bool dry_run);

/* The same with MoveSlotsRequest.max_rows_per_s (0: left out, the server's --move-max-rate). */
move_answer h_move_slots_rate(const h_groups *cl, int at, uint32_t from, uint32_t to,
                              const char *group, const char *rid, bool dry_run,
                              uint32_t max_rows_per_s);

/* GetTopology of node `at` (NULL when it does not answer; free with
 * idem__v1__topology__free_unpacked). */
Idem__V1__Topology *h_topology(const h_groups *cl, int at);

/* Waits (polling every 20 ms) until node `at`'s map shows a move in phase ("copying", ...):
 * whether it did within timeout_ms. */
bool h_wait_move_phase(const h_groups *cl, int at, const char *phase, int64_t timeout_ms);
/* Waits (polling every 100 ms) until node `at` answers GetTopology with no move under way:
 * whether it did within timeout_ms. */
bool h_wait_move_ended(const h_groups *cl, int at, int64_t timeout_ms);

/* The group serving slot in node `at`'s map into out ("" when unknown). */
void h_group_of_slot(const h_groups *cl, int at, uint32_t slot, char *out, size_t cap);
/* Whether node `at`'s map gives slot to group (false when the node does not answer): a condition
 * for H_WAIT. */
bool h_slot_is(const h_groups *cl, int at, uint32_t slot, const char *group);

/* Rows of table in database url with slot in from..to. */
long long h_count_rows(const char *url, const char *table, uint32_t from, uint32_t to);

/* The bigint of the first row of sql (no parameters) in database url. */
long long h_sql_count(const char *url, const char *sql);

/* What moves left in the cluster's two databases: publications, subscriptions and replication
 * slots named idem_move_%. */
long long h_move_leftovers(const h_groups *cl);

/* Traffic: threads running h_traffic_run do BeginStep + CompleteStep on fresh keys of g1 (body =
 * the global id) until stop; a fresh key answered anything but PROCEED counts in dup_proceed. */
#define ACKED_MAX 20000
typedef struct traffic {
  const h_groups *cl;
  atomic_bool stop;
  atomic_int pairs, errors, dup_proceed;
  char (*acked)[48]; /* global ids whose CompleteStep was acknowledged (body = the id) */
  atomic_int n_acked;
  atomic_int threads; /* gives each thread its own ids */
} traffic;
void *h_traffic_run(void *arg);

/* A move under load, as the move tests set it up: T (zeroed; its cl set here and its acked
 * allocated: free it after) runs on one thread, *th, started here, until 50 pairs are acknowledged
 * (20 s at most: the test fails when they are not). Returns g1's leader, the node that drives a move of g1's slots (the
 * test fails when g1 has none). */
int h_move_under_load(const h_groups *cl, traffic *T, pthread_t *th);

/* MoveSlots (h_move_slots, not a dry run) on a thread of its own: the caller fills in cl to rid,
 * h_bg_move_start sends it; done turns true once its answer is in a; h_bg_move_join waits for
 * it. */
typedef struct h_bg_move {
  const h_groups *cl;
  int at; /* the node asked */
  uint32_t from, to;
  const char *group, *rid;
  move_answer a;
  atomic_bool done;
  pthread_t th;
} h_bg_move;
void h_bg_move_start(h_bg_move *m);
void h_bg_move_join(h_bg_move *m);

/* Every acknowledged completion answers REPLAY with its body: how many do not. */
int h_lost_results(const h_groups *cl, traffic *T);

#endif
