/* config_file.h — the --config file: INI syntax read with libinih (Debian's libinih-dev).
 *
 *   # every command-line flag, by its long name (dashes or underscores), in the top-level
 *   # section or in [server]
 *   listen = 127.0.0.1:50051
 *   pg = postgresql://idem@db/idem
 *   reaper-interval = 60
 *
 *   # seed policies, one section each: [policy "SERVICE OPERATION"] or [policy SERVICE/OPERATION]
 *   [policy "payment charge"]
 *   failure_mode = fail-closed        ; or fail-open
 *   retention = 7d                    ; ms, s, m, h, d (a bare number is seconds)
 *   key_retention = 365d              ; optional (docs/api.md §12): keys kept longer than bodies
 *   lease = 30s
 *   tenant = shop                     ; optional: default "*" = every tenant
 *
 * This module only parses; the caller decides what an option means (node/options.c applies it with
 * the same code as the flag; flags and environment variables win over the file).
 */
#ifndef IDEM_CONFIG_FILE_H
#define IDEM_CONFIG_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "../domain/policy.h"

/* Called for each option line: name with '_' turned into '-', value (both valid only during
 * the call). Return 0 to accept, or non-zero when the name is unknown (the load then fails
 * naming the line's key). */
typedef int (*config_option_fn)(void *arg, const char *name, const char *value);

typedef struct config_seeds {
  policy_row *rows; /* owned: free() */
  size_t n;
} config_seeds;

/* Parses path: options go to on_option, [policy ...] sections become seeds (defaults for keys
 * left out: fail-closed, 24 h, 30 s; tenant "*"). Returns 0 on success; otherwise fills msg
 * (e.g. "config.ini:12: unknown key colour") and returns -1. Seeds are not validated against
 * the policy rules here (coord_policy_validate does that). */
int config_file_load(const char *path, config_option_fn on_option, void *arg,
                     config_seeds *seeds, char *msg, size_t msg_len);

/* Parses a duration (util/duration.h's grammar: "250ms", "30s", "5m", "24h", "7d", a bare
 * number of seconds) into milliseconds. Returns 0, or -1 when malformed or over max_ms. */
int config_parse_duration_ms(const char *v, int64_t max_ms, int64_t *out_ms);

#endif
