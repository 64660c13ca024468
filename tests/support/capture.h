/* capture.h — a program's output for checks: idemctl run to its end with its exit status, stdout
 * and stderr captured, and a file read whole.
 */
#ifndef IDEM_TEST_CAPTURE_H
#define IDEM_TEST_CAPTURE_H

/* One run of idemctl: its exit status (as spawn.h says) and its output, each NUL-terminated and
 * cut at its buffer's size. About 72 KiB: allocate it (calloc) rather than put it on the stack;
 * one h_ctl can take run after run, each overwriting the last. */
typedef struct h_ctl {
  int status;
  char out[65536]; /* stdout */
  char err[8192];  /* stderr */
} h_ctl;

/* Runs this build's idemctl (IDEMCTL_BIN, tests/support/CMakeLists.txt) as
 * `idemctl --addr addr [--tenant tenant] first ...` (the arguments NULL-terminated, at most 32;
 * tenant NULL: no --tenant) to its end (60 s, then killed: status -1), into r. Its output goes
 * through two temporary files, removed after. */
void h_idemctl(h_ctl *r, const char *addr, const char *tenant, const char *first, ...);

/* The whole file at path as a NUL-terminated string (malloc'd: free it). Fails the test when the
 * file cannot be read. */
char *h_read_file(const char *path);

#endif
