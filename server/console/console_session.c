/* console_session.c — the server-side session table (console_state.h).
 * A session id and a CSRF token are 32 bytes from getrandom(2), in hex; each lives
 * CONSOLE_SESSION_TTL_MS. The table holds at most `max` sessions and each owner (a token, or a
 * client address in development mode) at most CONSOLE_SESSIONS_PER_OWNER: an owner's new
 * session replaces its own oldest, so logging in again and again ends nobody else's. */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../util/clock.h"
#include "console_state.h"

struct sessions {
  pthread_mutex_t mu;
  csession *rows; /* id[0] == '\0': free */
  size_t max;
  unsigned char key[32]; /* the owner digests' HMAC key: random, never leaves the process */
};

bool console__random_hex(char *out, size_t nbytes) {
  unsigned char raw[64];
  if (nbytes > sizeof raw) return false;
  size_t got = 0;
  while (got < nbytes) {
    ssize_t n = getrandom(raw + got, nbytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += (size_t)n;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < nbytes; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[2 * nbytes] = '\0';
  OPENSSL_cleanse(raw, sizeof raw);
  return true;
}

bool console__secret_equal(const char *a, const char *b) {
  size_t n = strlen(a);
  if (n == 0 || n != strlen(b)) return false;
  return CRYPTO_memcmp(a, b, n) == 0;
}

sessions *console__sessions_new(size_t max) {
  sessions *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->rows = calloc(max, sizeof *s->rows);
  if (!s->rows) {
    free(s);
    return NULL;
  }
  s->max = max;
  char hex[2 * sizeof s->key + 1];
  if (!console__random_hex(hex, sizeof s->key)) {
    free(s->rows);
    free(s);
    return NULL;
  }
  memcpy(s->key, hex, sizeof s->key); /* 32 of the 64 hex characters: 128 random bits */
  OPENSSL_cleanse(hex, sizeof hex);
  pthread_mutex_init(&s->mu, NULL);
  return s;
}

void console__sessions_free(sessions *s) {
  if (!s) return;
  OPENSSL_cleanse(s->rows, s->max * sizeof *s->rows);
  OPENSSL_cleanse(s->key, sizeof s->key);
  free(s->rows);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

typedef struct owner_row {
  const unsigned char *owner;
  int64_t expires;
  size_t i;
} owner_row;

static int by_owner(const void *a, const void *b) {
  const owner_row *x = a, *y = b;
  int c = memcmp(x->owner, y->owner, CONSOLE_OWNER_LEN);
  return c ? c : (x->expires > y->expires) - (x->expires < y->expires);
}

/* The table is full of live sessions: the oldest row of the owner holding the most (ties: the
 * older row). SIZE_MAX when out of memory. */
static size_t evict_from_largest(sessions *s) {
  owner_row *v = malloc(s->max * sizeof *v);
  if (!v) return SIZE_MAX;
  for (size_t i = 0; i < s->max; i++)
    v[i] = (owner_row){s->rows[i].owner, s->rows[i].expires_mono, i};
  qsort(v, s->max, sizeof *v, by_owner);
  size_t best = SIZE_MAX, best_n = 0;
  for (size_t i = 0, j; i < s->max; i = j) {
    for (j = i + 1; j < s->max && memcmp(v[j].owner, v[i].owner, CONSOLE_OWNER_LEN) == 0; j++) {
    }
    /* v[i] is this owner's oldest row */
    if (j - i > best_n || (j - i == best_n && v[i].expires < s->rows[best].expires_mono)) {
      best_n = j - i;
      best = v[i].i;
    }
  }
  free(v);
  return best;
}

bool console__sessions_create(sessions *s, const void *owner, size_t owner_len, const char *tenant,
                              auth_role role, bool dev, csession *out) {
  csession n = {.role = role, .dev = dev};
  unsigned int olen = 0;
  if (!console__random_hex(n.id, CONSOLE_ID_HEX / 2) ||
      !console__random_hex(n.csrf, CONSOLE_ID_HEX / 2) ||
      !HMAC(EVP_sha256(), s->key, (int)sizeof s->key, owner, owner_len, n.owner, &olen) ||
      olen != CONSOLE_OWNER_LEN)
    return false;
  snprintf(n.tenant, sizeof n.tenant, "%s", tenant);
  int64_t now = clock_mono_ms();
  n.expires_mono = now + CONSOLE_SESSION_TTL_MS;
  pthread_mutex_lock(&s->mu);
  size_t free_row = SIZE_MAX, mine_oldest = SIZE_MAX, mine = 0;
  for (size_t i = 0; i < s->max; i++) {
    csession *r = &s->rows[i];
    if (!r->id[0] || r->expires_mono <= now) {
      if (free_row == SIZE_MAX) free_row = i;
      continue;
    }
    if (memcmp(r->owner, n.owner, CONSOLE_OWNER_LEN) != 0) continue;
    mine++;
    if (mine_oldest == SIZE_MAX || r->expires_mono < s->rows[mine_oldest].expires_mono)
      mine_oldest = i;
  }
  size_t pick = mine >= CONSOLE_SESSIONS_PER_OWNER ? mine_oldest
                : free_row != SIZE_MAX             ? free_row
                                                   : evict_from_largest(s);
  if (pick != SIZE_MAX) s->rows[pick] = n;
  pthread_mutex_unlock(&s->mu);
  if (pick == SIZE_MAX) return false;
  *out = n;
  return true;
}

/* The row of id, or NULL; every live row is compared (constant time in the match). */
static csession *find_locked(sessions *s, const char *id, int64_t now) {
  csession *hit = NULL;
  if (strlen(id) != CONSOLE_ID_HEX) return NULL;
  for (size_t i = 0; i < s->max; i++) {
    csession *r = &s->rows[i];
    bool live = r->id[0] && r->expires_mono > now;
    if (CRYPTO_memcmp(r->id, id, CONSOLE_ID_HEX) == 0 && live) hit = r;
  }
  return hit;
}

bool console__sessions_find(sessions *s, const char *id, csession *out) {
  pthread_mutex_lock(&s->mu);
  csession *r = find_locked(s, id, clock_mono_ms());
  if (r) *out = *r;
  pthread_mutex_unlock(&s->mu);
  return r != NULL;
}

void console__sessions_set_tenant(sessions *s, const char *id, const char *tenant) {
  pthread_mutex_lock(&s->mu);
  csession *r = find_locked(s, id, clock_mono_ms());
  if (r) snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
  pthread_mutex_unlock(&s->mu);
}

void console__sessions_drop(sessions *s, const char *id) {
  pthread_mutex_lock(&s->mu);
  csession *r = find_locked(s, id, clock_mono_ms());
  if (r) OPENSSL_cleanse(r, sizeof *r);
  pthread_mutex_unlock(&s->mu);
}
