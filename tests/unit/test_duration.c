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

Test(duration, words_for_people) {
  static const struct {
    int64_t ms;
    const char *terse, *full;
  } W[] = {
      {0, "0s", "0 s"},           {59999, "59s", "59 s"},          {60000, "1m", "1 min"},
      {3599000, "59m", "59 min"}, {3600000, "1h", "1 h 0 min"},    {9000000, "2h", "2 h 30 min"},
      {172799000, "47h", "47 h 59 min"}, {172800000, "2d", "2 days"}, {-90000, "1m", "1 min"},
  };
  for (size_t i = 0; i < sizeof W / sizeof W[0]; i++) {
    char t[32], f[32];
    duration_words(W[i].ms, true, t, sizeof t);
    duration_words(W[i].ms, false, f, sizeof f);
    cr_expect_str_eq(t, W[i].terse, "%lld ms terse", (long long)W[i].ms);
    cr_expect_str_eq(f, W[i].full, "%lld ms", (long long)W[i].ms);
  }
}

Test(duration, exact_is_read_back_as_it_was) {
  static const struct {
    int64_t ms;
    const char *want;
  } E[] = {{0, "0s"},       {250, "250ms"}, {1000, "1s"},        {90000, "90s"},
           {300000, "5m"},  {86400000, "1d"}, {90061001, "90061001ms"}, {7200000, "2h"}};
  for (size_t i = 0; i < sizeof E / sizeof E[0]; i++) {
    char b[32];
    duration_exact(E[i].ms, b, sizeof b);
    cr_expect_str_eq(b, E[i].want);
    int64_t back = -1;
    cr_expect(duration_parse(b, 0, &back) && back == E[i].ms, "%s read back as %lld", b,
              (long long)back);
  }
}
