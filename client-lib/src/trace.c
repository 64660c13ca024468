/* trace.c — the calling thread's W3C trace context (idem_trace_set, docs/api.md §22), sent as
 * metadata by every call (client.c), and the trace ids a StepRecord carries. */
#include <grpc/grpc.h>
#include <stdio.h>
#include <string.h>

#include "idem_internal.h"

/* The thread's context: "" = none. */
static _Thread_local char tl_parent[IDEM_TRACE_HEADER_MAX + 1];
static _Thread_local char tl_state[IDEM_TRACE_HEADER_MAX + 1];

/* Whether v can travel as a metadata value: printable ASCII, at most IDEM_TRACE_HEADER_MAX. */
static bool header_ok(const char *v) {
  size_t n = 0;
  for (; v[n]; n++)
    if (n >= IDEM_TRACE_HEADER_MAX || v[n] < 0x20 || v[n] > 0x7e) return false;
  return true;
}

int idem_trace_set(const char *traceparent, const char *tracestate, idem_error *err) {
  idem__err_reset(err);
  const char *p = traceparent ? traceparent : "", *st = p[0] && tracestate ? tracestate : "";
  if (!header_ok(p))
    return idem__fail(err, IDEM_INVALID_ARGUMENT,
                      "traceparent: at most %d bytes of printable ASCII", IDEM_TRACE_HEADER_MAX);
  if (!header_ok(st))
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "tracestate: at most %d bytes of printable ASCII",
                      IDEM_TRACE_HEADER_MAX);
  snprintf(tl_parent, sizeof tl_parent, "%s", p);
  snprintf(tl_state, sizeof tl_state, "%s", st);
  return IDEM_OK;
}

size_t idem__trace_md(struct grpc_metadata *md) {
  size_t n = 0;
  if (tl_parent[0]) {
    md[n].key = grpc_slice_from_static_string("traceparent");
    md[n++].value = grpc_slice_from_static_string(tl_parent);
    if (tl_state[0]) {
      md[n].key = grpc_slice_from_static_string("tracestate");
      md[n++].value = grpc_slice_from_static_string(tl_state);
    }
  }
  return n;
}

static void trace_id_copy(char dst[IDEM_TRACE_ID_MAX + 1], const char *src) {
  dst[0] = '\0';
  if (src && strlen(src) == IDEM_TRACE_ID_MAX) memcpy(dst, src, IDEM_TRACE_ID_MAX + 1);
}

void idem__trace_ids_from_pb(const Idem__V1__StepRecord *pb, idem_trace_ids *ids) {
  trace_id_copy(ids->begin, pb->begin_trace_id);
  trace_id_copy(ids->complete, pb->complete_trace_id);
}
