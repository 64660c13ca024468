/* console_guard.c — the whole-request deadline of the console (console_guard.h). The
 * connections are a list under one mutex; the watchdog holds it while it calls shutdown(2),
 * and libmicrohttpd tells us a connection closed (MHD_CONNECTION_NOTIFY_CLOSED, which takes the
 * mutex) before it closes the socket, so the watchdog never touches a descriptor reused by
 * something else. */
#include "console_guard.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "../util/clock.h"
#include "../util/log.h"

typedef struct cconn {
  struct cconn *prev, *next;
  struct cguard *g;
  int fd;
  int64_t since; /* monotonic ms it started waiting for a request; 0 = one is being answered */
  bool shut;
} cconn;

struct cguard {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  bool stop;
  int64_t deadline_ms;
  cconn *head;
};

static void *watch(void *arg) {
  cguard *g = arg;
  pthread_mutex_lock(&g->mu);
  while (!g->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 500 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    int64_t now = clock_mono_ms();
    int n = 0;
    for (cconn *c = g->head; c; c = c->next) {
      if (c->shut || !c->since || now - c->since <= g->deadline_ms) continue;
      shutdown(c->fd, SHUT_RDWR); /* MHD reads the end of the stream and closes it */
      c->shut = true;
      n++;
    }
    if (n) {
      char s[16];
      snprintf(s, sizeof s, "%d", n);
      log_kv(LOG_INFO, "console: closed connections whose request did not arrive in time",
             "connections", s, (const char *)NULL);
    }
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

cguard *console__guard_start(int64_t deadline_ms) {
  cguard *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->deadline_ms = deadline_ms;
  clock_cond_init(&g->cv);
  pthread_mutex_init(&g->mu, NULL);
  if (pthread_create(&g->thread, NULL, watch, g) != 0) {
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
    return NULL;
  }
  return g;
}

void console__guard_stop(cguard *g) {
  if (!g) return;
  pthread_mutex_lock(&g->mu);
  g->stop = true;
  pthread_cond_signal(&g->cv);
  pthread_mutex_unlock(&g->mu);
  pthread_join(g->thread, NULL);
  for (cconn *c = g->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
  free(g);
}

void console__guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                           enum MHD_ConnectionNotificationCode toe) {
  cguard *g = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    cconn *c = calloc(1, sizeof *c);
    if (!c || !ci) { /* untracked would mean unbounded: refuse it */
      free(c);
      if (ci) shutdown(ci->connect_fd, SHUT_RDWR);
      return;
    }
    c->g = g;
    c->fd = ci->connect_fd;
    c->since = clock_mono_ms();
    pthread_mutex_lock(&g->mu);
    c->next = g->head;
    if (g->head) g->head->prev = c;
    g->head = c;
    pthread_mutex_unlock(&g->mu);
    *socket_context = c;
    return;
  }
  cconn *c = *socket_context; /* MHD_CONNECTION_NOTIFY_CLOSED */
  if (!c) return;
  pthread_mutex_lock(&g->mu);
  if (c->prev)
    c->prev->next = c->next;
  else
    g->head = c->next;
  if (c->next) c->next->prev = c->prev;
  pthread_mutex_unlock(&g->mu);
  free(c);
  *socket_context = NULL;
}

static void set_since(struct MHD_Connection *conn, int64_t since) {
  const union MHD_ConnectionInfo *sc =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  cconn *c = sc ? sc->socket_context : NULL;
  if (!c) return;
  pthread_mutex_lock(&c->g->mu);
  c->since = since;
  pthread_mutex_unlock(&c->g->mu);
}

void console__guard_request_in(struct MHD_Connection *conn) {
  set_since(conn, 0);
}

void console__guard_reply_done(struct MHD_Connection *conn) {
  set_since(conn, clock_mono_ms());
}
