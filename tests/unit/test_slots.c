/* test_slots.c — the slot function (domain/slot.h) and the slot map (slots/slotmap.h). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/slot.h"
#include "slots/slotmap.h"

/* The published FNV-1a 64 vectors, then §17's rule over tenant + NUL + id (the same vectors are
 * in client-lib/conformance/idempotency-key.json for the SDKs). */
Test(slot, fnv1a64_published_vectors) {
  cr_expect_eq(slot_fnv1a64("", 0, SLOT_FNV_OFFSET), UINT64_C(0xcbf29ce484222325));
  cr_expect_eq(slot_fnv1a64("a", 1, SLOT_FNV_OFFSET), UINT64_C(0xaf63dc4c8601ec8c));
  cr_expect_eq(slot_fnv1a64("foobar", 6, SLOT_FNV_OFFSET), UINT64_C(0x85944171f73967e8));
}

/* criterion re-executes the binary for each test: parameters hold text, not pointers */
typedef struct slot_case {
  char tenant[16], id[48];
  uint32_t slots, want;
} slot_case;

ParameterizedTestParameters(slot, of) {
  static slot_case cases[] = {
      {"default", "0190a0b0-0000-7000-8000-000000000001", 256, 167},
      {"acme", "order-42", 65536, 57580},
      {"t", "", 1, 0},
      {"default", "req-1", 2, 0},
  };
  return cr_make_param_array(slot_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(slot_case *c, slot, of) {
  cr_expect_eq(slot_of(c->tenant, c->id, c->slots), c->want, "%s/%s mod %u", c->tenant, c->id,
               c->slots);
}

Test(slot, the_nul_separates_tenant_from_id) {
  /* "ab" + "c" and "a" + "bc" are different keys */
  cr_expect_neq(slot_of("ab", "c", 65536), slot_of("a", "bc", 65536));
}

Test(slotmap, equal_split_covers_every_slot_once_in_order) {
  const char *names[] = {"g1", "g2", "g3"};
  slotmap *m = slotmap_equal(256, names, 3);
  cr_assert_not_null(m);
  cr_expect_eq(m->n_ranges, 3);
  cr_expect_eq(m->ranges[0].from, 0);
  cr_expect_eq(m->ranges[0].to, 85); /* 86 + 85 + 85 */
  cr_expect_eq(m->ranges[1].from, 86);
  cr_expect_eq(m->ranges[2].to, 255);
  cr_expect_str_eq(slotmap_range_of(m, 86)->group, "g2");
  cr_expect_str_eq(slotmap_range_of(m, 255)->group, "g3");
  cr_expect_null(slotmap_range_of(m, 256));
  cr_expect_eq(slotmap_count(m, "g1") + slotmap_count(m, "g2") + slotmap_count(m, "g3"), 256);
  slotmap_free(m);
  cr_expect_null(slotmap_equal(2, names, 3), "more groups than slots");
}

Test(slotmap, json_round_trip) {
  const char *names[] = {"a", "b"};
  slotmap *m = slotmap_equal(16, names, 2);
  m->ranges[1].moving = true;
  snprintf(m->ranges[1].to_group, sizeof m->ranges[1].to_group, "c");
  char *j = slotmap_json(m);
  cr_assert_not_null(j);
  char why[128] = "";
  slotmap *p = slotmap_parse(j, strlen(j), why, sizeof why);
  cr_assert_not_null(p, "%s: %s", j, why);
  cr_expect_eq(p->version, 1);
  cr_expect_eq(p->slots, 16);
  cr_expect_eq(p->n_ranges, 2);
  cr_expect_eq(p->ranges[1].from, 8);
  cr_expect(p->ranges[1].moving);
  cr_expect_str_eq(p->ranges[1].to_group, "c");
  cr_expect_not(p->ranges[0].moving);
  free(j);
  slotmap_free(p);
  slotmap_free(m);
}

typedef struct bad_map {
  char json[160], why[48];
} bad_map;

ParameterizedTestParameters(slotmap, refuses) {
  static bad_map cases[] = {
      {"[]", "not a JSON object"},
      {"{\"slots\":4,\"ranges\":[{\"from\":0,\"to\":3,\"group\":\"a\"}]}", "version"},
      {"{\"version\":1,\"slots\":0,\"ranges\":[]}", "slots"},
      {"{\"version\":1,\"slots\":70000,\"ranges\":[]}", "slots"},
      {"{\"version\":1,\"slots\":4,\"ranges\":[]}", "ranges: missing or empty"},
      {"{\"version\":1,\"slots\":4,\"ranges\":[{\"from\":0,\"to\":2,\"group\":\"a\"}]}",
       "end at slot 2"},
      {"{\"version\":1,\"slots\":4,\"ranges\":[{\"from\":0,\"to\":1,\"group\":\"a\"},"
       "{\"from\":1,\"to\":3,\"group\":\"b\"}]}",
       "ranges[1]: starts at 1, expected 2"},
      {"{\"version\":1,\"slots\":4,\"ranges\":[{\"from\":0,\"to\":1,\"group\":\"a\"},"
       "{\"from\":3,\"to\":3,\"group\":\"b\"}]}",
       "ranges[1]: starts at 3, expected 2"},
      {"{\"version\":1,\"slots\":4,\"ranges\":[{\"from\":0,\"to\":4,\"group\":\"a\"}]}",
       "ranges[0]: from and to"},
      {"{\"version\":1,\"slots\":4,\"ranges\":[{\"from\":0,\"to\":3,\"group\":\"a b\"}]}",
       "ranges[0]: group name 'a b'"},
      {"{\"version\":1,\"slots\":4,\"ranges\":[{\"from\":0,\"to\":3,\"group\":\"a\","
       "\"moving\":true}]}",
       "ranges[0]: to_group"},
  };
  return cr_make_param_array(bad_map, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_map *c, slotmap, refuses) {
  char why[160] = "";
  slotmap *m = slotmap_parse(c->json, strlen(c->json), why, sizeof why);
  cr_expect_null(m, "%s", c->json);
  cr_expect(strstr(why, c->why) != NULL, "%s: got '%s', want '%s'", c->json, why, c->why);
  slotmap_free(m);
}

Test(slotmap, group_names_follow_the_tenant_rule) {
  char why[160];
  cr_expect(slotmap_name_ok("g-1.eu_west", why, sizeof why));
  cr_expect_not(slotmap_name_ok("", why, sizeof why));
  cr_expect_not(slotmap_name_ok("a/b", why, sizeof why));
  cr_expect(strstr(why, "byte 2") != NULL, "%s", why);
  char longname[80];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  cr_expect_not(slotmap_name_ok(longname, why, sizeof why));
}
