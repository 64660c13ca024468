/* sx_rpc.h — a deliberately small gRPC C core server and client for the saga examples.
 *
 * Server: N threads, each with its own completion queue, each handling one call at a time
 * synchronously (handlers may block on Postgres and on calls to other services). Unary methods
 * only. sx_serve() runs until SIGTERM or SIGINT, then drains and returns.
 * Client: one unary call with a deadline, wait-for-ready (a restarting peer is waited for within
 * the deadline), over a channel with a fast reconnect backoff (50–250 ms).
 */
#ifndef SX_RPC_H
#define SX_RPC_H

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

/* A handler's answer. Set reply (packed immediately by sx_reply_set) for OK, or return a gRPC
 * status code with a message in msg. */
typedef struct sx_reply {
  grpc_byte_buffer *bb;
  char msg[256];
} sx_reply;

/* Packs msg into r (the message may live on the caller's stack). */
void sx_reply_set(sx_reply *r, const ProtobufCMessage *msg);

/* A handler: app is sx_server_config.app, tls what thread_init returned for this thread, in the
 * decoded request (freed by the server after the handler returns). Returns a grpc_status_code. */
typedef int (*sx_handler)(void *app, void *tls, const ProtobufCMessage *in, sx_reply *out);

typedef struct sx_method {
  const char *path; /* "/shop.v1.Payments/Charge" */
  const ProtobufCMessageDescriptor *in;
  sx_handler fn;
} sx_method;

typedef struct sx_server_config {
  const char *listen; /* "127.0.0.1:7001" */
  int threads;        /* 0 = 8 */
  const sx_method *methods;
  size_t n_methods;
  void *app;
  void *(*thread_init)(void *app); /* per-thread state (a PGconn, ...); may be NULL */
  void (*thread_fini)(void *tls);
} sx_server_config;

/* Serves until SIGTERM/SIGINT (blocked in every thread, taken with sigwait). Prints
 * "listening on ADDR" to stdout once the port is bound. Returns 0, or 1 if it could not start. */
int sx_serve(const sx_server_config *cfg);

/* A channel to addr with the examples' reconnect settings (takes a grpc_init reference). Free
 * with sx_channel_close. */
grpc_channel *sx_channel(const char *addr);
void sx_channel_close(grpc_channel *ch);

/* One unary call. On GRPC_STATUS_OK *out owns the decoded reply (free with
 * protobuf_c_message_free_unpacked(*out, NULL)); otherwise *out is NULL and msg holds the
 * status message. Returns the grpc_status_code. */
int sx_call(grpc_channel *ch, const char *path, const ProtobufCMessage *req,
            const ProtobufCMessageDescriptor *out_desc, int64_t timeout_ms,
            ProtobufCMessage **out, char *msg, size_t msg_len);

#endif
