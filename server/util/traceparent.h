/* traceparent.h — W3C Trace Context (https://www.w3.org/TR/trace-context/), the header
 * `traceparent` as a call carries it in its metadata (docs/api.md §22). Plain C: the rpc layer
 * reads the metadata and hands the value here; only the trace id travels further (into coord,
 * as text). */
#ifndef IDEM_TRACEPARENT_H
#define IDEM_TRACEPARENT_H

#include <stdbool.h>
#include <stddef.h>

#define TRACE_ID_LEN 32 /* hex digits of a trace id */
#define SPAN_ID_LEN 16  /* hex digits of a parent (span) id */

/* Parses value (len bytes, not NUL-terminated) as
 * `<2 hex version>-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lower-case hex only.
 * Version ff, an all-zero trace id or an all-zero parent id are invalid. Version 00 must be
 * exactly 55 bytes; a later version may append `-<more>` (the spec's forward compatibility).
 * On success copies the trace id into trace_id (TRACE_ID_LEN + 1 bytes, NUL-terminated) and
 * returns true; otherwise returns false and sets trace_id to "". */
bool traceparent_parse(const char *value, size_t len, char trace_id[TRACE_ID_LEN + 1]);

/* Whether s is a trace id as stored: exactly TRACE_ID_LEN lower-case hex digits, not all zero. */
bool trace_id_valid(const char *s);

#endif
