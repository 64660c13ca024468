/* cmd_move.c — idemctl slots move FROM-TO --to GROUP (docs/api.md §18): Admin.MoveSlots, which
 * blocks until the move ends. The request id (made here unless --request-id) is printed when the
 * wait runs out, so that the same command with it waits for the move again; a repeat after the
 * move ended answers its first result ("(replayed)"). The source group is read from the
 * topology before the call (the response names only what moved). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idemctl.h"

#define MOVE_TIMEOUT_MS 600000       /* --timeout's default: a move of many rows takes minutes */
#define MOVE_TIMEOUT_MAX_MS 86400000 /* a day */
#define SLOT_MAX 65535               /* docs/api.md §17: at most 65536 slots */

/* One slot number: decimal digits only, 0..SLOT_MAX. */
static bool parse_slot(const char *s, size_t len, uint32_t *out) {
  if (len == 0 || len > 5) return false;
  uint32_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (uint32_t)(s[i] - '0');
  }
  if (v > SLOT_MAX) return false;
  *out = v;
  return true;
}

/* "FROM-TO" or "N" into *from, *to. EXIT_OK or the usage error's exit status (printed). */
static int parse_span(ctl *c, const char *arg, uint32_t *from, uint32_t *to) {
  const char *dash = strchr(arg, '-');
  bool ok = dash ? parse_slot(arg, (size_t)(dash - arg), from) &&
                       parse_slot(dash + 1, strlen(dash + 1), to)
                 : parse_slot(arg, strlen(arg), from) && ((*to = *from), true);
  if (!ok)
    return ctl_usage_error(c,
                           "slots move: FROM-TO: want two slot numbers like 0-63 (or one slot, "
                           "each 0 to %d), not '%s'",
                           SLOT_MAX, arg);
  if (*from > *to)
    return ctl_usage_error(c, "slots move: FROM-TO: %u-%u runs backwards (want FROM <= TO)", *from,
                           *to);
  return EXIT_OK;
}

/* The group serving every slot of from..to, as the topology says before the move (a move with
 * this request id under way: its source); "" when split over groups. IDEM_OK, or the error of
 * GetTopology in *e (nothing answers: no point in waiting --timeout for a move). */
static int source_group(ctl *c, uint32_t from, uint32_t to, const char *rid, char *out, size_t cap,
                        idem_error *e) {
  out[0] = '\0';
  idem_topology t;
  idem_slot_move mv;
  int rc = idem_get_topology_move(ctl_client(c), &t, &mv, e);
  if (rc != IDEM_OK) return rc;
  if (mv.active && strcmp(mv.request_id, rid) == 0) {
    snprintf(out, cap, "%s", mv.source);
  } else {
    for (size_t i = 0; i < t.n_ranges; i++) {
      const idem_slot_range *r = &t.ranges[i];
      if (r->from <= from && to <= r->to) snprintf(out, cap, "%s", r->group);
    }
  }
  idem_topology_clear(&t);
  return IDEM_OK;
}

static void print_json(const idem_move *m, const char *source, const idem_move_result *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "request_id", r->request_id);
  cJSON_AddNumberToObject(o, "from", m->from);
  cJSON_AddNumberToObject(o, "to", m->to);
  if (source[0])
    cJSON_AddStringToObject(o, "source", source);
  else
    cJSON_AddNullToObject(o, "source");
  cJSON_AddStringToObject(o, "group", m->group);
  cJSON_AddBoolToObject(o, "dry_run", m->dry_run);
  cJSON_AddNumberToObject(o, "version", (double)r->version);
  cJSON_AddNumberToObject(o, "steps_moved", (double)r->steps_moved);
  cJSON_AddNumberToObject(o, "sagas_moved", (double)r->sagas_moved);
  cJSON_AddNumberToObject(o, "paused_ms", (double)r->paused_ms);
  cJSON_AddBoolToObject(o, "replayed", r->replayed);
  json_print(o);
}

static void print_text(const idem_move *m, const char *source, const idem_move_result *r) {
  char span[32], from[IDEM_GROUP_NAME_MAX + 8] = "";
  snprintf(span, sizeof span, m->from == m->to ? "slot %u" : "slots %u-%u", m->from, m->to);
  /* a repeat after the move ended reads the map with the target already serving them */
  if (source[0] && strcmp(source, m->group) != 0) snprintf(from, sizeof from, " from %s", source);
  if (m->dry_run)
    printf(
        "dry run: %s would move%s to %s: %llu steps and %llu sagas (map version %llu); "
        "nothing changed\n",
        span, from, m->group, (unsigned long long)r->steps_moved,
        (unsigned long long)r->sagas_moved, (unsigned long long)r->version);
  else
    printf("moved %s%s to %s: map version %llu, %llu steps and %llu sagas, paused %lld ms%s\n",
           span, from, m->group, (unsigned long long)r->version, (unsigned long long)r->steps_moved,
           (unsigned long long)r->sagas_moved, (long long)r->paused_ms,
           r->replayed ? " (replayed)" : "");
}

int cmd_slots_move(ctl *c) {
  if (c->npos < 1) return ctl_usage_error(c, "slots move: FROM-TO is required (e.g. 0-63)");
  idem_move m;
  memset(&m, 0, sizeof m);
  int rc = parse_span(c, c->pos[0], &m.from, &m.to);
  if (rc != EXIT_OK) return rc;
  m.group = ctl_flag_value(c, "to");
  if (!m.group || !*m.group) return ctl_usage_error(c, "--to is required (the target group)");
  m.dry_run = ctl_has(c, "dry-run");
  m.timeout_ms = MOVE_TIMEOUT_MS;
  const char *v = ctl_flag_value(c, "timeout");
  if (v && (!fmt_parse_duration(v, &m.timeout_ms) || m.timeout_ms < 1000 ||
            m.timeout_ms > MOVE_TIMEOUT_MAX_MS))
    return ctl_usage_error(c, "--timeout: expected seconds from 1 to 86400 (or 30s, 10m, 1h)");
  uint32_t rate = 0;
  if ((v = ctl_flag_value(c, "max-rate"))) {
    char *end = NULL;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (!*v || *v == '-' || *end || errno || n < 1 || n > 10000000)
      return ctl_usage_error(c, "--max-rate: expected rows per second from 1 to 10000000, not '%s'",
                             v);
    rate = (uint32_t)n;
  }
  char made[40];
  m.request_id = ctl_flag_value(c, "request-id");
  if (m.request_id && !*m.request_id) return ctl_usage_error(c, "--request-id: empty");
  if (!m.request_id) {
    if (!ctl_new_request_id(made)) return ctl_usage_error(c, "cannot make a request id");
    m.request_id = made;
  }

  char source[IDEM_GROUP_NAME_MAX + 1];
  idem_move_result r;
  idem_error e = {0};
  if (source_group(c, m.from, m.to, m.request_id, source, sizeof source, &e) != IDEM_OK)
    return ctl_fail("slots move: reading the slot map", &e);
  if (idem_move_slots_rate(ctl_client(c), &m, rate, &r, &e) != IDEM_OK) {
    int code = ctl_fail("slots move", &e);
    if (e.code == IDEM_DEADLINE_EXCEEDED || e.outcome_unknown)
      fprintf(stderr,
              "idemctl: the move may go on: `idemctl slots` shows it; to wait for it again:\n"
              "  idemctl slots move %s --to %s --request-id %s\n",
              c->pos[0], m.group, m.request_id);
    return code;
  }
  if (c->json)
    print_json(&m, source, &r);
  else
    print_text(&m, source, &r);
  return EXIT_OK;
}
