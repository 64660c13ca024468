/* strerror.c — idem_strerror: the text of an idem_code, from the one IDEM_CODES table in
 * <idem/idem.h>. */
#include <idem/idem.h>

const char *idem_strerror(int code) {
  switch (code) {
#define IDEM__X(name, value, text) \
  case value:                      \
    return text;
    IDEM_CODES(IDEM__X)
#undef IDEM__X
  }
  return "unknown error code";
}
