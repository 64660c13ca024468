/* metrics_internal.h — what the files of metrics/ share. metrics_text.c: the HELP/TYPE lines
 * (OpenMetrics-aware), samples of group-aware series, the groups' names; metrics.c calls the
 * renderers of metrics_ops.c and metrics_store.c. */
#ifndef IDEM_METRICS_INTERNAL_H
#define IDEM_METRICS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The groups the group-aware series are rendered for (names outlive the metrics). */
void metrics__set_group_names(size_t n, const char *const *names);
/* How many groups the series are rendered for (1 without groups). */
int metrics__groups(void);
/* Whether this thread renders OpenMetrics now (set around one rendering). */
void metrics__set_om(bool om);
bool metrics__om(void);

void metrics__help(FILE *f, const char *name, const char *type, const char *text);
/* `name{group="g",key="label"} v`: the group label only with groups, the other only with key. */
void metrics__sample(FILE *f, const char *name, int group, const char *key, const char *label,
                     unsigned long long v);
/* metrics__sample for a real value (%.9g), without a second label. */
void metrics__sample_f(FILE *f, const char *name, int group, double v);

/* metrics_store.c: the group commit's histograms. */
void metrics__render_store(FILE *f);
/* metrics_stages.c: the stages of a step call. */
void metrics__render_stages(FILE *f);
/* metrics.c: the name of method m (metrics_rpc_name), NULL if unnamed. */
const char *metrics__rpc_name(int m);
/* metrics_ops.c: errors by reason, the reaper's last round. */
void metrics__render_ops(FILE *f);

#endif
