/* coord_groups.c — see coord_groups.h. */
#include "coord_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits "<index>~<inner>" (or "" = group 0 from its start); ERR_INVALID naming page_token. */
static err_code split(const char *token, size_t n, size_t *group, const char **inner, err_t *err) {
  *group = 0;
  *inner = "";
  if (!token || !*token) return ERR_OK;
  char *end = NULL;
  unsigned long g = strtoul(token, &end, 10);
  if (end == token || *end != '~' || g >= n)
    return err_set(err, ERR_INVALID, "page_token: not a token of this listing");
  *group = g;
  *inner = end + 1;
  return ERR_OK;
}

/* The next token: group g's own next, or the start of group g + 1, or "" after the last. */
static err_code join(size_t g, size_t n, const char *inner_next, char out[COORD_TOKEN_MAX],
                     err_t *err) {
  int w;
  if (inner_next[0])
    w = snprintf(out, COORD_TOKEN_MAX, "%zu~%s", g, inner_next);
  else if (g + 1 < n)
    w = snprintf(out, COORD_TOKEN_MAX, "%zu~", g + 1);
  else
    w = snprintf(out, COORD_TOKEN_MAX, "%s", "");
  if (w < 0 || w >= COORD_TOKEN_MAX) return err_set(err, ERR_INTERNAL, "page token too long");
  return ERR_OK;
}

/* Names the group in a failure: "group g2: store unavailable". */
static err_code named(const coord_group_view *g, err_code rc, err_t *err) {
  char msg[ERR_MSG_MAX];
  snprintf(msg, sizeof msg, "%s", err->msg);
  int w = snprintf(err->msg, sizeof err->msg, "group %.63s: ", g->name);
  if (w > 0 && (size_t)w < sizeof err->msg)
    snprintf(err->msg + w, sizeof err->msg - (size_t)w, "%.*s",
             (int)(sizeof err->msg - (size_t)w - 1), msg);
  return rc;
}

err_code coord_list_steps_groups(const coord_group_view *g, size_t n, const char *tenant,
                                 const coord_list_in *in, int64_t deadline, step_list *out,
                                 char next_token[COORD_TOKEN_MAX], err_t *err) {
  memset(out, 0, sizeof *out);
  next_token[0] = '\0';
  size_t at;
  const char *inner;
  err_code rc = split(in->page_token, n, &at, &inner, err);
  if (rc != ERR_OK) return rc;
  coord_list_in one = *in;
  one.page_token = inner;
  char next[COORD_TOKEN_MAX];
  rc = coord_list_steps(g[at].ctx, g[at].st, tenant, &one, deadline, out, next, err);
  if (rc == ERR_UNAVAILABLE) return named(&g[at], rc, err);
  if (rc != ERR_OK) return rc;
  rc = join(at, n, next, next_token, err);
  if (rc != ERR_OK) step_list_clear(out);
  return rc;
}

err_code coord_list_audit_groups(const coord_group_view *g, size_t n, const char *tenant,
                                 uint32_t page_size, const char *page_token, int64_t deadline,
                                 audit_list *out, char next_token[COORD_TOKEN_MAX], err_t *err) {
  memset(out, 0, sizeof *out);
  next_token[0] = '\0';
  size_t at;
  const char *inner;
  err_code rc = split(page_token, n, &at, &inner, err);
  if (rc != ERR_OK) return rc;
  char next[COORD_TOKEN_MAX];
  rc =
      coord_list_audit(g[at].ctx, g[at].st, tenant, "", page_size, inner, deadline, out, next, err);
  if (rc == ERR_UNAVAILABLE) return named(&g[at], rc, err);
  if (rc != ERR_OK) return rc;
  rc = join(at, n, next, next_token, err);
  if (rc != ERR_OK) audit_list_clear(out);
  return rc;
}
