/* console_guard.h — the console's defence against slow clients (console_guard.c): every
 * request must arrive whole, headers and body, within a deadline counted from the moment the
 * connection starts waiting for it (its opening, or the end of the previous reply). A
 * libmicrohttpd idle timeout cannot do that: a client sending a byte every few seconds is
 * never idle. A watchdog thread shuts down (shutdown(2)) the socket of a connection past its
 * deadline; libmicrohttpd then sees the end of the stream and closes the connection. */
#ifndef IDEM_CONSOLE_GUARD_H
#define IDEM_CONSOLE_GUARD_H

#include <microhttpd.h>
#include <stdint.h>

typedef struct cguard cguard;

/* Starts the watchdog (checks twice a second). NULL: out of memory or no thread. */
cguard *console__guard_start(int64_t deadline_ms);

/* Stops the watchdog and frees g. Call after MHD_stop_daemon (every connection closed). NULL
 * is fine. */
void console__guard_stop(cguard *g);

/* The MHD_OPTION_NOTIFY_CONNECTION callback (cls = the guard): a connection starts waiting for
 * its first request when it opens, and is forgotten when it closes. */
void console__guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                           enum MHD_ConnectionNotificationCode toe);

/* From the access handler: the whole request has arrived; no deadline while it is answered. */
void console__guard_request_in(struct MHD_Connection *conn);

/* From MHD_OPTION_NOTIFY_COMPLETED: the reply is done; the next request's deadline starts. */
void console__guard_reply_done(struct MHD_Connection *conn);

#endif
