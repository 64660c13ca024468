/* config_file.c — INI parsing with libinih (see config_file.h). */
#include "config_file.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/duration.h"

typedef struct load_state {
  config_option_fn on_option;
  void *arg;
  config_seeds *seeds;
  char section[128];  /* the last section seen, to start a new seed once */
  policy_row *cur;    /* the seed of the current [policy ...] section */
  char err[200];      /* the first error */
} load_state;

int config_parse_duration_ms(const char *v, int64_t max_ms, int64_t *out_ms) {
  return duration_parse(v, max_ms, out_ms) ? 0 : -1;
}

/* "policy \"svc op\"", "policy svc/op", "policy \"svc/op\"" → service, operation. */
static int parse_policy_section(const char *section, char *svc, size_t svc_n, char *op,
                                size_t op_n) {
  const char *p = section + 6; /* after "policy" */
  while (isspace((unsigned char)*p)) p++;
  char buf[160];
  size_t len = strlen(p);
  if (len >= 2 && p[0] == '"' && p[len - 1] == '"') {
    p++;
    len -= 2;
  }
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, p, len);
  buf[len] = '\0';
  char *sep = strpbrk(buf, "/ \t");
  if (!sep) return -1;
  *sep = '\0';
  char *o = sep + 1;
  while (*o == ' ' || *o == '\t') o++;
  if (!*buf || !*o || strpbrk(o, "/ \t")) return -1;
  if (strlen(buf) >= svc_n || strlen(o) >= op_n) return -1;
  snprintf(svc, svc_n, "%s", buf);
  snprintf(op, op_n, "%s", o);
  return 0;
}

static int fail(load_state *st, const char *fmt, const char *a, const char *b) {
  if (!st->err[0]) snprintf(st->err, sizeof st->err, fmt, a, b);
  return 0;
}

static int on_policy_key(load_state *st, const char *section, const char *name,
                         const char *value) {
  policy *p = &st->cur->p;
  int64_t ms;
  if (strcmp(name, "failure-mode") == 0 || strcmp(name, "mode") == 0) {
    if (strcasecmp(value, "fail-open") == 0 || strcasecmp(value, "fail_open") == 0 ||
        strcasecmp(value, "open") == 0)
      p->mode = FAILURE_MODE_FAIL_OPEN;
    else if (strcasecmp(value, "fail-closed") == 0 || strcasecmp(value, "fail_closed") == 0 ||
             strcasecmp(value, "closed") == 0)
      p->mode = FAILURE_MODE_FAIL_CLOSED;
    else
      return fail(st, "[%s] failure_mode: expected fail-open or fail-closed, got %s", section,
                  value);
  } else if (strcmp(name, "retention") == 0) {
    if (config_parse_duration_ms(value, (int64_t)POLICY_RETENTION_MAX_S * 1000, &ms) != 0 ||
        ms < 1000 || ms % 1000 != 0)
      return fail(st, "[%s] retention: expected whole seconds from 1s to 90d, got %s", section,
                  value);
    p->retention_s = (uint32_t)(ms / 1000);
  } else if (strcmp(name, "key-retention") == 0) { /* docs/api.md §12; checked against retention later */
    if (config_parse_duration_ms(value, (int64_t)POLICY_KEY_RETENTION_MAX_S * 1000, &ms) != 0 ||
        ms % 1000 != 0)
      return fail(st, "[%s] key_retention: expected 0 or whole seconds up to 400d, got %s",
                  section, value);
    p->key_retention_s = (uint32_t)(ms / 1000);
  } else if (strcmp(name, "lease") == 0) {
    if (config_parse_duration_ms(value, POLICY_LEASE_MAX_MS, &ms) != 0 || ms < 1)
      return fail(st, "[%s] lease: expected a duration from 1ms to 1h, got %s", section, value);
    p->lease_ms = (uint32_t)ms;
  } else if (strcmp(name, "tenant") == 0) {
    if (!*value || strlen(value) >= sizeof st->cur->tenant)
      return fail(st, "[%s] tenant: expected a tenant name or *, got %s", section, value);
    snprintf(st->cur->tenant, sizeof st->cur->tenant, "%s", value);
  } else {
    return fail(st, "[%s] unknown key %s", section, name);
  }
  return 1;
}

static int handler(void *user, const char *section, const char *name_in, const char *value) {
  load_state *st = user;
  char name[64];
  size_t i = 0;
  for (; name_in[i] && i < sizeof name - 1; i++)
    name[i] = name_in[i] == '_' ? '-' : (char)tolower((unsigned char)name_in[i]);
  name[i] = '\0';

  if (strncmp(section, "policy", 6) == 0 && (section[6] == ' ' || section[6] == '\t')) {
    if (!st->cur || strcmp(st->section, section) != 0) {
      config_seeds *s = st->seeds;
      policy_row *grown = realloc(s->rows, (s->n + 1) * sizeof *grown);
      if (!grown) return fail(st, "%s%s", "out of memory", "");
      s->rows = grown;
      st->cur = &s->rows[s->n++];
      memset(st->cur, 0, sizeof *st->cur);
      snprintf(st->cur->tenant, sizeof st->cur->tenant, "%s", POLICY_ANY);
      char svc[REC_NAME_MAX + 1], op[REC_NAME_MAX + 1];
      if (parse_policy_section(section, svc, sizeof svc, op, sizeof op) != 0)
        return fail(st, "[%s] expected [policy \"SERVICE OPERATION\"] or [policy SERVICE/OPERATION]%s",
                    section, "");
      policy_default(svc, op, &st->cur->p);
      snprintf(st->section, sizeof st->section, "%s", section);
    }
    return on_policy_key(st, section, name, value);
  }
  if (section[0] && strcmp(section, "server") != 0)
    return fail(st, "unknown section [%s]%s", section, "");
  if (st->on_option(st->arg, name, value) != 0) return fail(st, "unknown key %s%s", name_in, "");
  return 1;
}

int config_file_load(const char *path, config_option_fn on_option, void *arg,
                     config_seeds *seeds, char *msg, size_t msg_len) {
  memset(seeds, 0, sizeof *seeds);
  load_state st;
  memset(&st, 0, sizeof st);
  st.on_option = on_option;
  st.arg = arg;
  st.seeds = seeds;
  int rc = ini_parse(path, handler, &st);
  if (rc == 0 && !st.err[0]) return 0;
  if (rc == -1)
    snprintf(msg, msg_len, "%s: cannot open the file: %s", path, strerror(errno));
  else if (rc == -2)
    snprintf(msg, msg_len, "%s: out of memory", path);
  else if (st.err[0])
    snprintf(msg, msg_len, "%s:%d: %s", path, rc, st.err);
  else
    snprintf(msg, msg_len, "%s:%d: syntax error (or a line over 200 characters)", path, rc);
  free(seeds->rows);
  memset(seeds, 0, sizeof *seeds);
  return -1;
}
