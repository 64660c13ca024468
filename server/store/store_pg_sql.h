/* store_pg_sql.h — pieces of SQL text the store's statements share, built from the domain's
 * constants (domain/record.h) so that no state number or rule is written twice. */
#ifndef IDEM_STORE_PG_SQL_H
#define IDEM_STORE_PG_SQL_H

#include "../domain/record.h"

#define PG_SQL_STR_(x) #x
#define PG_SQL_NUM(x) PG_SQL_STR_(x) /* a macro's number as SQL text */

/* The database clock in Unix milliseconds (all nodes agree on it). */
#define PG_NOW_MS "(extract(epoch from clock_timestamp()) * 1000)::bigint"

/* step_rec_live in SQL: the row counts while it is kept (UNKNOWN), unfinished (expires_ms 0) or
 * within its retention at now (an SQL expression in Unix ms). */
#define PG_LIVE_AT(now) \
  "(state = " PG_SQL_NUM(REC_KEPT_STATE) " OR expires_ms = 0 OR expires_ms > " now ")"
#define PG_LIVE PG_LIVE_AT(PG_NOW_MS)

/* step_rec_result_expired in SQL: the row's body is past its retention at now (never while
 * UNKNOWN; result_expires_ms 0 = with the row). */
#define PG_RESULT_EXPIRED_AT(now) \
  "(state <> " PG_SQL_NUM(        \
      REC_KEPT_STATE) " AND result_expires_ms > 0 AND result_expires_ms <= " now ")"

/* step_state_reapable in SQL: the states the reaper never deletes, as an SQL list. */
#define PG_UNREAPABLE_STATES \
  "(" PG_SQL_NUM(REC_STATE_IN_PROGRESS) ", " PG_SQL_NUM(REC_KEPT_STATE) ")"

/* The states a step is open in (IN_PROGRESS, UNKNOWN: what /metrics counts), as an SQL list. */
#define PG_OPEN_STATES "(" PG_SQL_NUM(REC_STATE_IN_PROGRESS) ", " PG_SQL_NUM(REC_STATE_UNKNOWN) ")"

#endif
