/* keyring.c — the current token table of a tokens file, swapped atomically on reload. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"

struct auth_keyring {
  pthread_mutex_t mu; /* guards cur (held only to take a reference or to swap) */
  auth_tokens *cur;
  char *path;
};

auth_keyring *auth_keyring_open(const char *path, err_t *err) {
  auth_tokens *t = NULL;
  if (auth_tokens_load(path, &t, err) != ERR_OK) return NULL;
  auth_keyring *k = calloc(1, sizeof *k);
  char *p = strdup(path);
  if (!k || !p) {
    free(k);
    free(p);
    auth_tokens_release(t);
    err_oom(err);
    return NULL;
  }
  pthread_mutex_init(&k->mu, NULL);
  k->cur = t;
  k->path = p;
  return k;
}

err_code auth_keyring_reload(auth_keyring *k, err_t *err) {
  auth_tokens *t = NULL;
  err_code rc = auth_tokens_load(k->path, &t, err); /* outside the lock: calls go on */
  if (rc != ERR_OK) return rc;
  pthread_mutex_lock(&k->mu);
  auth_tokens *old = k->cur;
  k->cur = t;
  pthread_mutex_unlock(&k->mu);
  auth_tokens_release(old); /* freed now, or by the last call still using it */
  return ERR_OK;
}

auth_tokens *auth_keyring_acquire(auth_keyring *k) {
  pthread_mutex_lock(&k->mu);
  auth_tokens *t = auth_tokens_ref(k->cur);
  pthread_mutex_unlock(&k->mu);
  return t;
}

const char *auth_keyring_path(const auth_keyring *k) {
  return k->path;
}

void auth_keyring_free(auth_keyring *k) {
  if (!k) return;
  auth_tokens_release(k->cur);
  pthread_mutex_destroy(&k->mu);
  free(k->path);
  free(k);
}
