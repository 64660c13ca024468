/* console_state.h — what the console keeps between requests: the session table and the store
 * pool (console_session.c), the failed-login counts (console_limits.c), and the console itself
 * (started and stopped by console_http.c). Nothing here writes HTML. */
#ifndef IDEM_CONSOLE_STATE_H
#define IDEM_CONSOLE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../store/store_pool.h"
#include "console.h"

/* --- sessions (console_session.c) --- */
#define CONSOLE_ID_HEX 64    /* 32 random bytes */
#define CONSOLE_OWNER_LEN 32 /* HMAC-SHA-256 of the token (or client address), keyed per table */
#define CONSOLE_SESSIONS_PER_OWNER 32
typedef struct csession {
  char id[CONSOLE_ID_HEX + 1];
  unsigned char owner[CONSOLE_OWNER_LEN]; /* whose session: one token, or one address */
  char csrf[CONSOLE_ID_HEX + 1];
  char tenant[REC_GLOBAL_ID_MAX + 1];
  auth_role role;
  bool dev;             /* development mode: no login */
  int64_t expires_mono; /* monotonic ms */
} csession;
typedef struct sessions sessions;
sessions *console__sessions_new(size_t max);
void console__sessions_free(sessions *s);
/* A new session of owner (the token's bytes, or the client's address in development mode;
 * only a keyed digest is kept). An owner holds at most CONSOLE_SESSIONS_PER_OWNER: its own
 * oldest goes first; when the whole table is full, the oldest of the owner holding the most.
 * So one token (or address) cannot end another's sessions. False: no randomness. */
bool console__sessions_create(sessions *s, const void *owner, size_t owner_len, const char *tenant,
                              auth_role role, bool dev, csession *out);
/* The live session whose id is id (compared in constant time); false when none. */
bool console__sessions_find(sessions *s, const char *id, csession *out);
void console__sessions_set_tenant(sessions *s, const char *id, const char *tenant);
void console__sessions_drop(sessions *s, const char *id);
/* nbytes random bytes (getrandom) as 2*nbytes hex characters + NUL. */
bool console__random_hex(char *out, size_t nbytes);
/* Constant-time equality of two NUL-terminated strings of the same length (else false). */
bool console__secret_equal(const char *a, const char *b);

/* --- login limits (console_limits.c): failed logins per client address --- */
#define CONSOLE_LOGIN_FAILURES_MAX 10 /* failed logins one address may make in a window */
#define CONSOLE_LOGIN_WINDOW_MS 60000 /* the window, from the address's first failure */
typedef struct login_limits login_limits;
login_limits *console__logins_new(void); /* NULL: no memory */
void console__logins_free(login_limits *l);
/* 0 when who (a client address, console__client) may try to log in at now_ms (monotonic); else the
 * milliseconds until it may again. */
int64_t console__logins_check(login_limits *l, const unsigned char *who, size_t n, int64_t now_ms);
/* Counts a failed login of who. */
void console__logins_failed(login_limits *l, const unsigned char *who, size_t n, int64_t now_ms);

struct console {
  console_config cfg;
  char *cert, *key; /* owned copies of the PEM text */
  int port;
  bool tls;
  sessions *sess;
  store_pool *pool;
  struct MHD_Daemon *d;
  struct cguard *guard; /* the whole-request deadline (console_guard.h) */
  login_limits *logins;
  /* the groups (cfg.groups points here); the Slots page's one store handle each (gpools);
   * the pages' handles of each group (pages[g], `threads` each; pages[0] is pool) */
  console_group *groups;
  store_pool **gpools;
  store_pool **pages;
};

#endif
