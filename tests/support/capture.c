/* capture.c — idemctl's output captured, a file read whole (capture.h). */
#include "capture.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "spawn.h"
#include "testutil.h"

#ifndef IDEMCTL_BIN
#error "IDEMCTL_BIN must name the idemctl binary"
#endif

#define H_CTL_MAX_ARGS 32

/* The file at path into buf (up to cap - 1 bytes, NUL-terminated; "" without it), removed. */
static void take(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
  buf[n] = '\0';
  if (f) fclose(f);
  unlink(path);
}

void h_idemctl(h_ctl *r, const char *addr, const char *tenant, const char *first, ...) {
  const char *argv[5 + H_CTL_MAX_ARGS + 1] = {IDEMCTL_BIN, "--addr", addr};
  int argc = 3;
  if (tenant) {
    argv[argc++] = "--tenant";
    argv[argc++] = tenant;
  }
  int base = argc;
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a; a = va_arg(ap, const char *)) {
    cr_assert_lt(argc - base, H_CTL_MAX_ARGS, "h_idemctl: more than %d arguments", H_CTL_MAX_ARGS);
    argv[argc++] = a;
  }
  va_end(ap);
  argv[argc] = NULL;
  char tag[64], out[96], err[96];
  h_unique("idemctl", tag, sizeof tag);
  snprintf(out, sizeof out, "/tmp/idem-%s.out", tag);
  snprintf(err, sizeof err, "/tmp/idem-%s.err", tag);
  r->status = spawn_run(argv, &(spawn_opts){.out_log = out, .err_log = err}, 60000);
  take(out, r->out, sizeof r->out);
  take(err, r->err, sizeof r->err);
}

char *h_read_file(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "cannot read %s", path);
  size_t cap = 1 << 16, n = 0, got;
  char *buf = malloc(cap);
  cr_assert_not_null(buf);
  while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      cr_assert_not_null(buf);
    }
  }
  buf[n] = '\0';
  fclose(f);
  return buf;
}
