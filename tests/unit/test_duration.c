/* test_duration.c — util/duration: the one duration grammar (config file, idemctl, console),
 * from a table. */
#include <criterion/criterion.h>

#include "util/duration.h"

static const struct {
  const char *in;
  int64_t max_ms;
  bool ok;
  int64_t ms;
} CASES[] = {
    {"250ms", 0, true, 250},      {"30s", 0, true, 30000},       {"5m", 0, true, 300000},
    {"24h", 0, true, 86400000},   {"7d", 0, true, 604800000},    {"90", 0, true, 90000},
    {"0", 0, true, 0},            {" 5 m ", 0, true, 300000},    {"5M", 0, true, 300000},
    {"10MS", 0, true, 10},        {"1h", 3600000, true, 3600000}, {"2h", 3600000, false, 0},
    {"", 0, false, 0},            {"   ", 0, false, 0},          {"s", 0, false, 0},
    {"-5s", 0, false, 0},         {"+5s", 0, false, 0},          {"1.5h", 0, false, 0},
    {"1h30m", 0, false, 0},       {"5 minutes", 0, false, 0},    {"5x", 0, false, 0},
    {"5mss", 0, false, 0},        {"99999999999999999999", 0, false, 0},
    {"9223372036854775807d", 0, false, 0},
};

Test(duration, the_grammar_from_a_table) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    int64_t ms = -7;
    bool ok = duration_parse(CASES[i].in, CASES[i].max_ms, &ms);
    cr_expect_eq(ok, CASES[i].ok, "\"%s\": %d, want %d", CASES[i].in, ok, CASES[i].ok);
    if (CASES[i].ok) cr_expect_eq(ms, CASES[i].ms, "\"%s\": %lld ms", CASES[i].in, (long long)ms);
    else cr_expect_eq(ms, -7, "\"%s\": the output was touched", CASES[i].in);
  }
  cr_expect(!duration_parse(NULL, 0, &(int64_t){0}));
}
