/* metrics_text.c — the text every family of /metrics is written with (metrics_internal.h): HELP
 * and TYPE lines (OpenMetrics-aware), samples of group-aware series, and the groups' names. */
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "metrics.h"
#include "metrics_internal.h"

/* the groups (metrics_set_groups): 0 or 1 = no group label */
static _Atomic size_t g_n_groups;
static const char *g_group_names[METRICS_GROUPS_MAX];

/* The rendering under way on this thread is OpenMetrics (metrics_render_openmetrics). */
static _Thread_local bool tl_om;

void metrics__set_group_names(size_t n, const char *const *names) {
  if (n > METRICS_GROUPS_MAX) n = METRICS_GROUPS_MAX;
  for (size_t i = 0; i < n; i++) g_group_names[i] = names[i];
  atomic_store(&g_n_groups, n);
}

int metrics__groups(void) {
  size_t n = atomic_load(&g_n_groups);
  return n > 1 ? (int)n : 1;
}

void metrics__set_om(bool om) {
  tl_om = om;
}

bool metrics__om(void) {
  return tl_om;
}

/* In OpenMetrics a counter family is named without the _total its samples carry. */
void metrics__help(FILE *f, const char *name, const char *type, const char *text) {
  int n = (int)strlen(name);
  if (tl_om && strcmp(type, "counter") == 0 && n > 6 && strcmp(name + n - 6, "_total") == 0)
    n -= 6;
  fprintf(f, "# HELP %.*s %s\n# TYPE %.*s %s\n", n, name, text, n, name, type);
}

void metrics__sample(FILE *f, const char *name, int group, const char *key, const char *label,
                     unsigned long long v) {
  bool grouped = atomic_load(&g_n_groups) > 1;
  if (grouped && key)
    fprintf(f, "%s{group=\"%s\",%s=\"%s\"} %llu\n", name, g_group_names[group], key, label, v);
  else if (grouped)
    fprintf(f, "%s{group=\"%s\"} %llu\n", name, g_group_names[group], v);
  else if (key)
    fprintf(f, "%s{%s=\"%s\"} %llu\n", name, key, label, v);
  else
    fprintf(f, "%s %llu\n", name, v);
}

void metrics__sample_f(FILE *f, const char *name, int group, double v) {
  if (atomic_load(&g_n_groups) > 1)
    fprintf(f, "%s{group=\"%s\"} %.9g\n", name, g_group_names[group], v);
  else
    fprintf(f, "%s %.9g\n", name, v);
}
