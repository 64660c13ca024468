/* version_probe.c — prints idem_version() of the libidem it is linked with (the shared library,
 * libidem.so.0, as a user's program links it): tests/upgrade/test_versions.sh compares it with
 * CMake's project version. */
#include <stdio.h>

#include <idem/idem.h>

int main(void) {
  printf("%s\n", idem_version());
  return 0;
}
