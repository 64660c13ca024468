/* stream_cpu.h — bench/stream-cpu: CPU per message of a bidirectional gRPC stream against unary
 * calls (whether the step stream of docs/api.md §21 pays). One server process (server.c) echoes; one client process
 * (client.c) keeps 1/16/64 calls or messages in flight and measures both processes' CPU.
 *
 * The wire: a generic service, no protobuf on it. Every message is a run of filler bytes of the
 * size a real idem.v1 message of a typical step packs to (sizes.c); the stream's messages carry
 * a header before it: the call's id (8 bytes, little endian) and its kind (1 byte, a
 * sc_kind), so that answers, which may come in any order, are matched by id.
 *   /idem.bench.Echo/Begin      unary: a BeginStepRequest's size in, a BeginStepResponse's out
 *   /idem.bench.Echo/Complete   unary: the same for CompleteStep
 *   /idem.bench.Echo/Steps      bidirectional: header + request size in, header + response out
 *   /idem.bench.Echo/StepsBuffered  the same, but each side sends a message with more queued
 *                               behind it with GRPC_WRITE_BUFFER_HINT (it may wait for the next)
 */
#ifndef IDEM_BENCH_STREAM_CPU_H
#define IDEM_BENCH_STREAM_CPU_H

#include <stddef.h>
#include <stdint.h>

#define SC_METHOD_BEGIN "/idem.bench.Echo/Begin"
#define SC_METHOD_COMPLETE "/idem.bench.Echo/Complete"
#define SC_METHOD_STEPS "/idem.bench.Echo/Steps"
#define SC_METHOD_STEPS_BUFFERED "/idem.bench.Echo/StepsBuffered"
#define SC_HEADER 9 /* id (8) + kind (1) before a stream message's payload */

typedef enum { SC_BEGIN = 0, SC_COMPLETE = 1 } sc_kind;

/* The packed sizes, in bytes, of the four messages of one step: [kind][0] request, [kind][1]
 * response. */
typedef struct sc_sizes {
  size_t size[2][2];
} sc_sizes;

/* Packs a typical step's BeginStep and CompleteStep requests and responses with protobuf-c
 * (sizes.c says which step) and fills *out with their sizes. */
void sc_step_sizes(sc_sizes *out);

/* The server: listens on addr (host:port, port 0 = any), prints "port N" on stdout once it
 * serves, then echoes until SIGTERM or SIGINT. 0 on a clean stop. */
int sc_server_main(const char *addr);

/* The client: see client.c for its arguments. */
int sc_client_main(int argc, char **argv);

#endif
