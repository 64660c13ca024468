/* duration.h — the one grammar of durations idem reads (the config file's retention, lease and
 * seeds; idemctl's --older-than, --retention, --key-retention, --lease; the console's
 * older_than): a whole number and an optional unit, ms, s, m, h or d (any case); a bare number
 * is seconds; spaces around the number and between it and the unit are allowed. "250ms",
 * "30s", "5m", "24h", "7d", "90". No sign, no fraction, no compound ("1h30m"). */
#ifndef IDEM_UTIL_DURATION_H
#define IDEM_UTIL_DURATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses s into *out_ms. false (and *out_ms untouched) when s does not follow the grammar or
 * is longer than max_ms (max_ms <= 0: no bound but int64's). */
bool duration_parse(const char *s, int64_t max_ms, int64_t *out_ms);

/* The distance ms (>= 0) in words for a person: under a minute in seconds, under an hour in
 * minutes, under two days in hours (with minutes, unless terse), else in days. terse: "45s",
 * "12m", "5h", "3d" (idemctl's tables); else "45 s", "12 min", "5 h 3 min", "3 days" (the
 * console). */
void duration_words(int64_t ms, bool terse, char *buf, size_t cap);

/* ms (>= 0) written back in the grammar, exactly, in the largest unit that divides it: "7d",
 * "24h", "5m", "30s", "250ms" (duration_parse reads it back as ms). */
void duration_exact(int64_t ms, char *buf, size_t cap);

#endif
