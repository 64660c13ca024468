/* record.c — clearing and copying the step records of record.h (owned bodies). */
#include "record.h"

#include <stdlib.h>
#include <string.h>

void step_rec_clear(step_rec *r) {
  if (!r) return;
  free(r->body);
  memset(r, 0, sizeof *r);
}

bool step_rec_copy(step_rec *dst, const step_rec *src) {
  *dst = *src;
  dst->body = NULL;
  if (src->body_len > 0) {
    dst->body = malloc(src->body_len);
    if (!dst->body) {
      memset(dst, 0, sizeof *dst);
      return false;
    }
    memcpy(dst->body, src->body, src->body_len);
  }
  return true;
}

void saga_view_clear(saga_view *v) {
  if (!v) return;
  for (size_t i = 0; i < v->n_steps; i++) step_rec_clear(&v->steps[i]);
  free(v->steps);
  for (size_t i = 0; i < v->n_labels; i++) {
    free(v->labels[i].key);
    free(v->labels[i].value);
  }
  free(v->labels);
  memset(v, 0, sizeof *v);
}
