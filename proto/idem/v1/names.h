/* names.h — the one table of the contract's enum words (docs/api.md §2), shared by the server,
 * libidem and idemctl, so that logs, --json, tables and metrics spell a value alike.
 *
 * Header-only and self-contained (no other include of ours): each table is indexed by the
 * proto enum's number; a number outside the table reads as "invalid". Words are lower case
 * with underscores, as the README, the logs and `idemctl --json` print them. State 0 (no
 * record: "from=none" in a log line) is "none"; outcome and decision 0 are "unspecified".
 */
#ifndef IDEM_V1_NAMES_H
#define IDEM_V1_NAMES_H

#include <stddef.h>
#include <string.h>

static const char *const idem_state_words[] = {"none",    "in_progress", "succeeded", "failed",
                                               "unknown", "abandoned",   "released"};
static const char *const idem_outcome_words[] = {"unspecified", "succeeded", "failed", "retryable",
                                                 "unknown"};
static const char *const idem_decision_words[] = {
    "unspecified",      "proceed", "replay", "skip_null_compensation", "skip_already_compensated",
    "proceed_unguarded"};
static const char *const idem_phase_words[] = {"unspecified", "forward", "compensation"};
static const char *const idem_failure_mode_words[] = {"unspecified", "fail-closed", "fail-open"};

#define IDEM_WORD_OF(table, v) \
  ((v) >= 0 && (size_t)(v) < sizeof(table) / sizeof(table)[0] ? (table)[(size_t)(v)] : "invalid")

static inline const char *idem_word_state(int v) {
  return IDEM_WORD_OF(idem_state_words, v);
}
static inline const char *idem_word_outcome(int v) {
  return IDEM_WORD_OF(idem_outcome_words, v);
}
static inline const char *idem_word_decision(int v) {
  return IDEM_WORD_OF(idem_decision_words, v);
}
static inline const char *idem_word_phase(int v) {
  return IDEM_WORD_OF(idem_phase_words, v);
}
static inline const char *idem_word_failure_mode(int v) {
  return IDEM_WORD_OF(idem_failure_mode_words, v);
}

/* What happened to a record that no caller's attempt finished (docs/api.md §3; docs/limits.md),
 * from its phase, state and attempt (the proto numbers), so that a console page, a table or
 * --json never shows it as a step that ran:
 *  - "null_compensation": a compensation stored as succeeded with attempt 0. No compensation
 *    ran: its forward never ran, was released or failed, so there was nothing to undo. The
 *    stored outcome (succeeded, code 0, empty body) is only what a retry is told.
 *  - "never_ran": a forward tombstoned abandoned with attempt 0: its compensation came first;
 *    a later BeginStep of the forward is skipped.
 *  - "abandoned": a forward whose attempt was given up when its compensation came (its lease
 *    had run out, or it was released); it may have partly run; its late CompleteStep is
 *    refused and it is not run again.
 * "none": the record is what its state says. */
#define IDEM_SKIP_NONE 0
#define IDEM_SKIP_NULL_COMPENSATION 1
#define IDEM_SKIP_NEVER_RAN 2
#define IDEM_SKIP_ABANDONED 3
static const char *const idem_skip_words[] = {"none", "null_compensation", "never_ran",
                                              "abandoned"};
/* The same, as a phrase for a table or a page. */
static const char *const idem_skip_phrases[] = {
    "", "skipped: null compensation (no compensation ran; nothing to undo)",
    "skipped: never ran (its compensation came first)",
    "abandoned after its compensation (not run again; a late completion is refused)"};

static inline int idem_skip_of(int phase, int state, unsigned long long attempt) {
  if (phase == 2 /* compensation */ && state == 2 /* succeeded */ && attempt == 0)
    return IDEM_SKIP_NULL_COMPENSATION;
  if (phase == 1 /* forward */ && state == 5 /* abandoned */)
    return attempt == 0 ? IDEM_SKIP_NEVER_RAN : IDEM_SKIP_ABANDONED;
  return IDEM_SKIP_NONE;
}
static inline const char *idem_word_skip(int v) {
  return IDEM_WORD_OF(idem_skip_words, v);
}
static inline const char *idem_phrase_skip(int v) {
  return IDEM_WORD_OF(idem_skip_phrases, v);
}

/* The number whose word is w in table (n entries), from first on; -1 when none is. */
static inline int idem_word_find(const char *const *table, size_t n, size_t first, const char *w) {
  for (size_t i = first; i < n; i++)
    if (strcmp(table[i], w) == 0) return (int)i;
  return -1;
}

#define IDEM_WORD_COUNT(table) (sizeof(table) / sizeof(table)[0])

#endif
