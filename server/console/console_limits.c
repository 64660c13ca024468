/* console_limits.c — what guards the login form: failed logins counted per client address (a
 * fixed window per address, in a small table; console_state.h, "login limits"). The form's CSRF
 * token (a double-submit cookie) is written and checked in console_login.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "console_state.h"

#define SLOTS 1024 /* addresses tracked at once; a new one takes the stalest slot of its row */
#define WAYS 4

typedef struct slot {
  unsigned char who[17];
  size_t n;
  int64_t window_end_ms; /* monotonic; 0 = free */
  unsigned failures;
} slot;

struct login_limits {
  pthread_mutex_t mu;
  slot slots[SLOTS];
};

login_limits *console__logins_new(void) {
  login_limits *l = calloc(1, sizeof *l);
  if (l) pthread_mutex_init(&l->mu, NULL);
  return l;
}

void console__logins_free(login_limits *l) {
  if (!l) return;
  pthread_mutex_destroy(&l->mu);
  free(l);
}

static size_t row_of(const unsigned char *who, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ who[i]) * 1099511628211ull;
  return (size_t)(h % (SLOTS / WAYS)) * WAYS;
}

/* The slot of who (under mu): its own, else a free or expired one of its row, else the one
 * whose window ends first. */
static slot *find(login_limits *l, const unsigned char *who, size_t n, int64_t now_ms, bool take) {
  slot *row = &l->slots[row_of(who, n)], *pick = NULL;
  for (int i = 0; i < WAYS; i++) {
    slot *s = &row[i];
    if (s->window_end_ms > now_ms && s->n == n && memcmp(s->who, who, n) == 0) return s;
    if (!pick || s->window_end_ms < pick->window_end_ms) pick = s;
  }
  if (!take) return NULL;
  memcpy(pick->who, who, n);
  pick->n = n;
  pick->window_end_ms = now_ms + CONSOLE_LOGIN_WINDOW_MS;
  pick->failures = 0;
  return pick;
}

int64_t console__logins_check(login_limits *l, const unsigned char *who, size_t n, int64_t now_ms) {
  pthread_mutex_lock(&l->mu);
  slot *s = find(l, who, n, now_ms, false);
  int64_t wait = s && s->failures >= CONSOLE_LOGIN_FAILURES_MAX ? s->window_end_ms - now_ms : 0;
  pthread_mutex_unlock(&l->mu);
  return wait;
}

void console__logins_failed(login_limits *l, const unsigned char *who, size_t n, int64_t now_ms) {
  pthread_mutex_lock(&l->mu);
  slot *s = find(l, who, n, now_ms, true);
  s->failures++;
  pthread_mutex_unlock(&l->mu);
}
