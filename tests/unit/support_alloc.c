/* support_alloc.c — allocation-failure walks for libidem (curl's "torture" model): the Nth
 * allocation made by statically linked code fails, for N = 1, 2, 3, ... until the operation
 * completes without reaching N.
 *
 * Built only into the executables that link with -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc,--wrap=strdup,--wrap=getline,--wrap=free and define IDEM_TEST_ALLOC_WRAP
 * (tests/CMakeLists.txt; the unit/ glob compiles this file into the other unit tests too, where
 * it is empty). The wrap only reaches calls from objects linked into the executable — libidem
 * (idem_client_static), the test and its support code — never those made inside shared
 * libraries (gRPC, protobuf-c, libc's own fopen, Criterion). Counting is armed per thread, only
 * around the libidem call under test, so the test's and the harness's allocations never fail.
 *
 * Every allocation made while armed is remembered until it is freed: after the walk's check
 * step has cleared the outputs, none may be left (a leak, in any build; ASan+LSan then also
 * sees what escapes this bookkeeping).
 */
#ifdef IDEM_TEST_ALLOC_WRAP

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* The interface, declared again in each test file that uses it (test_client_alloc.c). */
#define ALLOC_WALK_MAX 10000
void alloc_arm(long n);
bool alloc_disarm(void);
long alloc_counted(void);
size_t alloc_live(void);
long alloc_walk(const char *name, void *ctx, void (*setup)(void *ctx), int (*run)(void *ctx),
                void (*check)(void *ctx, int rc, bool failed, long n));

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
ssize_t __real_getline(char **line, size_t *cap, FILE *f);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
ssize_t __wrap_getline(char **line, size_t *cap, FILE *f);

/* --- the counter (per thread) --- */

static _Thread_local bool armed;
static _Thread_local long counted, fail_at;
static _Thread_local bool failed;

/* Counts the allocations this thread makes from now on; the nth fails (none when n <= 0). */
void alloc_arm(long n) {
  counted = 0;
  fail_at = n;
  failed = false;
  armed = true;
}

/* Stops counting; whether the nth allocation was reached (and failed). */
bool alloc_disarm(void) {
  armed = false;
  return failed;
}

/* Allocations counted between the last alloc_arm and alloc_disarm. */
long alloc_counted(void) {
  return counted;
}

/* Whether this allocation is the one that fails. */
static bool fail_now(void) {
  if (!armed) return false;
  if (++counted != fail_at) return false;
  failed = true;
  return true;
}

/* --- live allocations made while armed --- */

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static void **live;
static size_t n_live, cap_live;

static void live_add(void *p) {
  if (!p) return;
  pthread_mutex_lock(&live_mu);
  if (n_live == cap_live) {
    size_t cap = cap_live ? cap_live * 2 : 256;
    void **grown = __real_realloc(live, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&live_mu);
      fprintf(stderr, "support_alloc: out of memory for the bookkeeping\n");
      abort();
    }
    live = grown;
    cap_live = cap;
  }
  live[n_live++] = p;
  pthread_mutex_unlock(&live_mu);
}

static void live_remove(void *p) {
  if (!p) return;
  pthread_mutex_lock(&live_mu);
  for (size_t i = n_live; i-- > 0;)
    if (live[i] == p) {
      live[i] = live[--n_live];
      break;
    }
  pthread_mutex_unlock(&live_mu);
}

/* Allocations made while armed (any thread's arming) and not freed yet. */
size_t alloc_live(void) {
  pthread_mutex_lock(&live_mu);
  size_t n = n_live;
  pthread_mutex_unlock(&live_mu);
  return n;
}

/* --- the wrapped functions --- */

void *__wrap_malloc(size_t n) {
  if (fail_now()) return NULL;
  void *p = __real_malloc(n);
  if (armed) live_add(p);
  return p;
}

void *__wrap_calloc(size_t n, size_t size) {
  if (fail_now()) return NULL;
  void *p = __real_calloc(n, size);
  if (armed) live_add(p);
  return p;
}

void *__wrap_realloc(void *p, size_t n) {
  if (fail_now()) return NULL; /* p stays valid, as after a real failure */
  void *q = __real_realloc(p, n);
  if (q) {
    live_remove(p);
    if (armed) live_add(q);
  }
  return q;
}

void __wrap_free(void *p) {
  live_remove(p);
  __real_free(p);
}

char *__wrap_strdup(const char *s) {
  if (fail_now()) return NULL;
  size_t n = strlen(s) + 1;
  char *d = __real_malloc(n);
  if (d) {
    memcpy(d, s, n);
    if (armed) live_add(d);
  }
  return d;
}

/* getline grows its buffer with libc's own malloc (not counted): each call counts as one
 * allocation that may fail, as a real getline does, with ENOMEM and the stream not at EOF. */
ssize_t __wrap_getline(char **line, size_t *cap, FILE *f) {
  if (fail_now()) {
    errno = ENOMEM;
    return -1;
  }
  return __real_getline(line, cap, f);
}

/* --- the walk --- */

/* For N = 1, 2, ...: setup(ctx) (may be NULL; not armed), run(ctx) with the Nth allocation
 * failing, then check(ctx, rc, failed, N) (not armed), which asserts on what run returned and
 * frees every output. Afterwards no allocation made during run may be left. Stops at the first
 * N that run never reached (the operation completed) and returns it: the walk covered 1..N. */
long alloc_walk(const char *name, void *ctx, void (*setup)(void *ctx), int (*run)(void *ctx),
                void (*check)(void *ctx, int rc, bool failed, long n)) {
  for (long n = 1;; n++) {
    cr_assert_leq(n, ALLOC_WALK_MAX, "%s: still failing at N = %ld", name, n);
    if (setup) setup(ctx);
    size_t before = alloc_live();
    alloc_arm(n);
    int rc = run(ctx);
    bool hit = alloc_disarm();
    long seen = alloc_counted();
    check(ctx, rc, hit, n);
    cr_assert_eq(alloc_live(), before, "%s: N = %ld (%s): %zu allocation(s) not freed", name, n,
                 hit ? "failed there" : "completed", alloc_live() - before);
    if (!hit) {
      fprintf(stderr, "alloc walk %s: N = 1..%ld (%ld allocations when none fails)\n", name, n,
              seen);
      return n;
    }
  }
}

#else
typedef int support_alloc_unused; /* not an alloc-wrap executable: nothing here */
#endif
