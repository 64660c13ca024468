/* log.h — one line per event on stderr, as text or JSON (--log-format). Thread-safe.
 * Never pass secrets (tokens) to these functions. */
#ifndef IDEM_LOG_H
#define IDEM_LOG_H

typedef enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;
typedef enum log_format { LOG_TEXT, LOG_JSON } log_format;

void log_init(log_format fmt, log_level min_level);

/* msg is a short lower-case sentence; kv is an optional NULL-terminated list of
 * key, value string pairs added as fields: log_kv(LOG_INFO, "step begun", "tenant", t, NULL).
 * A NULL value leaves its field out. */
void log_kv(log_level lvl, const char *msg, ...) __attribute__((sentinel));

/* printf-style convenience without fields. */
void log_msg(log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
