/* test_hostport.c — util/hostport: the one parser of the addresses idem is given, from a table
 * (every form, each way it can be malformed), its formatting back with a bound port, and which
 * hosts count as this machine only. */
#include <criterion/criterion.h>
#include <string.h>

#include "util/hostport.h"

typedef struct hp_case {
  const char *in;
  unsigned flags;
  bool ok;
  hostport_kind kind;
  const char *host, *port;
  bool v6, local;
} hp_case;

static const hp_case CASES[] = {
    {"127.0.0.1:50051", 0, true, HOSTPORT_TCP, "127.0.0.1", "50051", false, true},
    {"localhost:1", 0, true, HOSTPORT_TCP, "localhost", "1", false, true},
    {"0.0.0.0:8080", 0, true, HOSTPORT_TCP, "0.0.0.0", "8080", false, false},
    {":8080", 0, true, HOSTPORT_TCP, "", "8080", false, false},
    {"10.1.2.3:0", 0, true, HOSTPORT_TCP, "10.1.2.3", "0", false, false},
    {"[::1]:50051", 0, true, HOSTPORT_TCP, "::1", "50051", true, true},
    {"[::ffff:127.0.0.2]:5", 0, true, HOSTPORT_TCP, "::ffff:127.0.0.2", "5", true, true},
    {"[2001:db8::1]:443", 0, true, HOSTPORT_TCP, "2001:db8::1", "443", true, false},
    {"unix:/tmp/idem.sock", 0, true, HOSTPORT_UNIX, "/tmp/idem.sock", "", false, true},
    {"unix-abstract:idem-a", 0, true, HOSTPORT_UNIX_ABSTRACT, "idem-a", "", false, true},
    {"unix:/tmp/x.sock", HOSTPORT_TCP_ONLY, false, 0, NULL, NULL, false, false},
    {"unix-abstract:x", HOSTPORT_TCP_ONLY, false, 0, NULL, NULL, false, false},
    {"unix:", 0, false, 0, NULL, NULL, false, false},
    {"unix-abstract:", 0, false, 0, NULL, NULL, false, false},
    {"127.0.0.1", 0, false, 0, NULL, NULL, false, false},
    {"127.0.0.1", HOSTPORT_PORT_OPTIONAL, true, HOSTPORT_TCP, "127.0.0.1", "", false, true},
    {"[::1]", HOSTPORT_PORT_OPTIONAL, true, HOSTPORT_TCP, "::1", "", true, true},
    {"127.0.0.1:", 0, false, 0, NULL, NULL, false, false},
    {"127.0.0.1:http", 0, false, 0, NULL, NULL, false, false},
    {"127.0.0.1:80x", 0, false, 0, NULL, NULL, false, false},
    {"127.0.0.1:123456789", 0, false, 0, NULL, NULL, false, false},
    {"[::1:50051", 0, false, 0, NULL, NULL, false, false},
    {"[::1]x:50051", 0, false, 0, NULL, NULL, false, false},
    {"::1:50051", 0, false, 0, NULL, NULL, false, false},
    {"", 0, false, 0, NULL, NULL, false, false},
};

Test(hostport, every_form_of_the_table) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const hp_case *c = &CASES[i];
    hostport hp;
    bool ok = hostport_parse(c->in, c->flags, &hp);
    cr_expect_eq(ok, c->ok, "\"%s\" (flags %u): parse %d, want %d", c->in, c->flags, ok, c->ok);
    if (!ok || !c->ok) continue;
    cr_expect_eq(hp.kind, c->kind, "\"%s\": kind", c->in);
    cr_expect_str_eq(hp.host, c->host, "\"%s\": host", c->in);
    cr_expect_str_eq(hp.port, c->port, "\"%s\": port", c->in);
    cr_expect_eq(hp.v6, c->v6, "\"%s\": v6", c->in);
    cr_expect_eq(hostport_is_local(&hp), c->local, "\"%s\": local", c->in);
  }
}

Test(hostport, null_and_a_host_too_long_are_refused) {
  hostport hp;
  cr_assert(!hostport_parse(NULL, 0, &hp));
  char big[300];
  memset(big, 'a', 270);
  memcpy(big + 270, ":1", 3);
  cr_assert(!hostport_parse(big, 0, &hp));
}

/* The address a node reports (GetStatus, idem-leader): the bound port replaces the one given,
 * and a unix or unix-abstract socket is reported as given — not as "unix-abstract:PORT". */
Test(hostport, format_puts_the_bound_port_back) {
  static const struct {
    const char *in;
    int port;
    const char *want;
  } F[] = {
      {"127.0.0.1:0", 41234, "127.0.0.1:41234"},
      {"[::1]:0", 7, "[::1]:7"},
      {":0", 9, ":9"},
      {"unix:/run/idem.sock", 1, "unix:/run/idem.sock"},
      {"unix-abstract:idem-node-a", 1, "unix-abstract:idem-node-a"},
  };
  for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
    hostport hp;
    char buf[300];
    cr_assert(hostport_parse(F[i].in, 0, &hp), "%s", F[i].in);
    cr_assert(hostport_format(&hp, F[i].port, buf, sizeof buf));
    cr_expect_str_eq(buf, F[i].want);
  }
  hostport hp;
  char small[8];
  cr_assert(hostport_parse("127.0.0.1:0", 0, &hp));
  cr_assert(!hostport_format(&hp, 50051, small, sizeof small), "a short buffer is refused");
}
