/* test_slotmove.c — a move of slots as data (slots/slotmove.h): the checks of a request against a
 * map, the map of each phase (split, switch, end with neighbours merged) and the record's JSON
 * inside the map's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slots/slotmap.h"
#include "slots/slotmove.h"

static bool known(void *arg, const char *name) {
  (void)arg;
  return strcmp(name, "g1") == 0 || strcmp(name, "g2") == 0 || strcmp(name, "g3") == 0;
}

static slotmap *two_groups(void) { /* g1 0-31, g2 32-63 */
  const char *names[] = {"g1", "g2"};
  slotmap *m = slotmap_equal(64, names, 2);
  cr_assert(m);
  return m;
}

static slot_move a_move(uint32_t from, uint32_t to, const char *src, const char *dst) {
  slot_move mv = {0};
  snprintf(mv.id, sizeof mv.id, "m0123456789abcdef");
  snprintf(mv.request_id, sizeof mv.request_id, "req-1");
  mv.from = from;
  mv.to = to;
  snprintf(mv.source, sizeof mv.source, "%s", src);
  snprintf(mv.target, sizeof mv.target, "%s", dst);
  mv.phase = MOVE_PLANNED;
  mv.started_ms = 1700000000000;
  return mv;
}

Test(slotmove, requests_are_checked_against_the_map_naming_the_field) {
  slotmap *m = two_groups();
  char src[SLOTMAP_NAME_MAX], why[320];
  struct {
    uint32_t from, to;
    const char *group, *word;
    slot_move_check_result want;
  } cases[] = {
      {0, 15, "g2", "", MOVE_CHECK_OK},         {64, 70, "g2", "from:", MOVE_CHECK_INVALID},
      {5, 3, "g2", "to:", MOVE_CHECK_INVALID},  {0, 64, "g2", "to:", MOVE_CHECK_INVALID},
      {0, 3, "g9", "group:", MOVE_CHECK_INVALID}, {0, 3, "g1", "already", MOVE_CHECK_INVALID},
      {30, 33, "g3", "span groups", MOVE_CHECK_INVALID}, {0, 3, "", "group:", MOVE_CHECK_INVALID},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    why[0] = '\0';
    slot_move_check_result r = slotmap_move_check(m, cases[i].from, cases[i].to, cases[i].group,
                                                  known, NULL, src, why, sizeof why);
    cr_expect_eq(r, cases[i].want, "case %zu: %s", i, why);
    cr_expect(strstr(why, cases[i].word), "case %zu names %s: %s", i, cases[i].word, why);
  }
  cr_expect_eq(slotmap_move_check(m, 40, 50, "g1", known, NULL, src, why, sizeof why),
               MOVE_CHECK_OK);
  cr_expect_str_eq(src, "g2", "the source is the slots' group");
  slot_move mv = a_move(0, 15, "g1", "g2");
  slotmap *busy = slotmap_move_begin(m, &mv);
  cr_expect_eq(slotmap_move_check(busy, 40, 50, "g1", known, NULL, src, why, sizeof why),
               MOVE_CHECK_BUSY, "a second move while one runs");
  cr_expect(strstr(why, "req-1"), "names the move under way: %s", why);
  slotmap_free(busy);
  slotmap_free(m);
}

Test(slotmove, each_phase_is_a_new_version_and_the_end_merges_neighbours) {
  slotmap *m = two_groups();
  slot_move mv = a_move(8, 15, "g1", "g2"); /* the middle of g1's range */
  slotmap *b = slotmap_move_begin(m, &mv);
  cr_assert(b);
  cr_expect_eq(b->version, m->version + 1);
  cr_assert_eq(b->n_ranges, 4, "g1 0-7, moving 8-15, g1 16-31, g2 32-63");
  cr_expect(b->ranges[1].moving && b->ranges[1].from == 8 && b->ranges[1].to == 15);
  cr_expect_str_eq(b->ranges[1].group, "g1", "still the source's until the switch");
  cr_expect_str_eq(b->ranges[1].to_group, "g2");
  cr_expect_eq(slotmap_count(b, "g1"), 32);
  mv.phase = MOVE_SWITCHED;
  slotmap *s = slotmap_move_switch(b, &mv);
  cr_assert(s);
  cr_expect_eq(s->version, b->version + 1);
  cr_expect_str_eq(slotmap_range_of(s, 10)->group, "g2");
  cr_expect_not(slotmap_range_of(s, 10)->moving);
  cr_expect_eq(slotmap_count(s, "g1"), 24);
  cr_expect_eq(s->move->phase, MOVE_SWITCHED);
  slotmap *e = slotmap_move_end(s);
  cr_assert(e);
  cr_expect_null(e->move);
  cr_expect_eq(e->n_ranges, 4, "g1 0-7, g2 8-15, g1 16-31, g2 32-63 (no equal neighbours)");
  /* a rollback ends the planned map: the range is g1's again, in one piece */
  slotmap *r = slotmap_move_end(b);
  cr_expect_eq(r->n_ranges, 2, "g1 0-31 merged again, g2 32-63");
  cr_expect_eq(r->ranges[0].to, 31);
  slotmap *maps[] = {m, b, s, e, r};
  for (size_t i = 0; i < 5; i++) slotmap_free(maps[i]);
}

Test(slotmove, the_record_travels_in_the_maps_json) {
  slotmap *m = two_groups();
  slot_move mv = a_move(0, 15, "g1", "g2");
  mv.phase = MOVE_BLOCKED;
  mv.blocked_ms = 1700000000500;
  mv.steps_moved = 12345;
  mv.max_rows_per_s = 4321;
  snprintf(mv.note, sizeof mv.note, "why \"quoted\"");
  slotmap *b = slotmap_move_begin(m, &mv);
  char *json = slotmap_json(b);
  cr_assert(json);
  char why[256] = "";
  slotmap *p = slotmap_parse(json, strlen(json), why, sizeof why);
  cr_assert(p, "%s: %s", why, json);
  cr_assert(p->move);
  cr_expect_str_eq(p->move->id, mv.id);
  cr_expect_str_eq(p->move->request_id, "req-1");
  cr_expect_eq(p->move->phase, MOVE_BLOCKED);
  cr_expect_eq(p->move->blocked_ms, mv.blocked_ms);
  cr_expect_eq(p->move->steps_moved, 12345);
  cr_expect_str_eq(p->move->note, mv.note);
  cr_expect_eq(p->move->max_rows_per_s, 4321, "the throttle travels with the record");
  cr_expect(p->ranges[0].moving);
  /* a record with a bad phase makes the map invalid, naming it */
  char *bad = strdup(json);
  char *ph = strstr(bad, "\"blocked\"");
  cr_assert(ph);
  memcpy(ph, "\"blockxd\"", 9);
  cr_expect_null(slotmap_parse(bad, strlen(bad), why, sizeof why));
  cr_expect(strstr(why, "move: phase"), "%s", why);
  free(bad);
  free(json);
  slotmap_free(p);
  slotmap_free(b);
  slotmap_free(m);
}

Test(slotmove, request_ids_follow_the_rule) {
  char why[128];
  cr_expect(slot_move_request_id_ok("move-1.a_B", why, sizeof why));
  cr_expect_not(slot_move_request_id_ok("", why, sizeof why));
  cr_expect(strstr(why, "request_id"), "%s", why);
  cr_expect_not(slot_move_request_id_ok("a b", why, sizeof why));
  cr_expect(strstr(why, "byte 2"), "%s", why);
  char longer[80];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  cr_expect_not(slot_move_request_id_ok(longer, why, sizeof why));
}

/* The move id names replication objects in SQL: a record read from etcd with any other id is
 * refused before a store sees it; the servers the copy began on travel with the record. */
Test(slotmove, a_record_with_a_bad_move_id_is_refused_and_the_servers_travel) {
  slotmap *m = two_groups();
  slot_move mv = a_move(0, 15, "g1", "g2");
  snprintf(mv.src_server, sizeof mv.src_server, "7312345678901234567/00000001");
  snprintf(mv.dst_server, sizeof mv.dst_server, "7312345678901234568/00000002");
  slotmap *b = slotmap_move_begin(m, &mv);
  char *json = slotmap_json(b), why[256] = "";
  cr_assert(json);
  slotmap *p = slotmap_parse(json, strlen(json), why, sizeof why);
  cr_assert(p, "%s", why);
  cr_expect_str_eq(p->move->src_server, mv.src_server);
  cr_expect_str_eq(p->move->dst_server, mv.dst_server);
  slotmap_free(p);
  const char *bad_ids[] = {"m0123456789abcdeX", "m0123456789ABCDEF", "x0123456789abcdef",
                           "m0123456789abcde", "m1; DROP TABLE x"};
  for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
    slot_move bm = mv;
    snprintf(bm.id, sizeof bm.id, "%s", bad_ids[i]);
    slotmap *bb = slotmap_move_begin(m, &bm);
    char *bj = slotmap_json(bb);
    why[0] = '\0';
    cr_expect_null(slotmap_parse(bj, strlen(bj), why, sizeof why), "id %s", bad_ids[i]);
    cr_expect(strstr(why, "move: id"), "%s: %s", bad_ids[i], why);
    free(bj);
    slotmap_free(bb);
  }
  free(json);
  slotmap_free(b);
  slotmap_free(m);
}

/* A kept result reads back whole; one that cannot be read is an error, not zero counts. */
Test(slotmove, a_kept_result_reads_back_and_a_bad_one_is_an_error) {
  slot_move mv = a_move(0, 15, "g1", "g2");
  mv.steps_moved = 120;
  mv.sagas_moved = 40;
  mv.paused_ms = 180;
  char *json = slot_move_result_json(&mv, 7, NULL), why[200] = "";
  cr_assert(json);
  slot_move_result r;
  cr_assert(slot_move_result_parse(json, strlen(json), &r, why, sizeof why), "%s", why);
  cr_expect_eq(r.version, 7);
  cr_expect_eq(r.steps_moved, 120);
  cr_expect_eq(r.sagas_moved, 40);
  cr_expect_eq(r.paused_ms, 180);
  cr_expect(r.has_params && r.from == 0 && r.to == 15);
  cr_expect_str_eq(r.target, "g2");
  cr_expect_str_eq(r.error, "");
  free(json);
  json = slot_move_result_json(&mv, 7, "cut short");
  cr_assert(slot_move_result_parse(json, strlen(json), &r, why, sizeof why), "%s", why);
  cr_expect_str_eq(r.error, "cut short");
  free(json);
  const char *bad[] = {"", "{", "{}", "[1]", "{\"version\":\"7\",\"error\":\"\"}",
                       "{\"version\":7}", "{\"version\":7,\"error\":\"\",\"steps_moved\":-1}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    why[0] = '\0';
    cr_expect_not(slot_move_result_parse(bad[i], strlen(bad[i]), &r, why, sizeof why), "%s",
                  bad[i]);
    cr_expect(why[0], "says why: %s", bad[i]);
  }
}
