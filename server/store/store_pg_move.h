/* store_pg_move.h — the PostgreSQL side of moving slots between groups (docs/api.md §18), on
 * PostgreSQL's own logical replication: a publication on the source filtered to the slots (PG 15
 * row filters; the tables' replica identity FULL while it runs, so updates and deletes carry the
 * slot), a replication slot made first (so that a source and target in one PostgreSQL cluster
 * work too), a subscription on the target, and the blocks (idem_slot_blocks, version 9 of the
 * schema) that keep a store from writing slots it does not serve. Audit rows that arrive take
 * the target's own ids (version 10: a replica trigger renumbers them).
 *
 * A move session (store_pg_move_session) holds one connection to each side, the source's and
 * the target's, for the life of a move's drive (application_name idem-move: pg_stat_activity
 * shows them); a connection lost is made again by the next call on that side. Every call is
 * bounded by deadline and is idempotent: a call repeated after a crash, or on an object already
 * made or already gone, does nothing more. Names: publication, slot and subscription are
 * idem_move_<id>, the id checked (slot_move_id_ok's rule) when the session opens, before any SQL
 * sees it. A session is used by one thread at a time.
 * These functions are the PostgreSQL backend's move sub-table (store.h store_move_ops, through
 * store_postgres); only store/ and the store's own tests include this header.
 */
#ifndef IDEM_STORE_PG_MOVE_H
#define IDEM_STORE_PG_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "store.h"

/* A move session (store.h store_move) and its sides. */
typedef struct store_move store_pg_move_session;
typedef store_move_side store_pg_move_side;

/* A session for the move id of slots from..to from the store src to the store dst (conninfo
 * strings, copied). id NULL: checks and counts only (a request's, before the move exists).
 * ERR_INVALID naming id when it is not "m" and 16 lowercase hex digits. No connection is made
 * before the first call. */
err_code store_pg_move_session_open(const char *src, const char *dst, const char *id,
                                    uint32_t from, uint32_t to, store_pg_move_session **out,
                                    err_t *err);
/* Closes both connections (NULL: nothing). */
void store_pg_move_session_close(store_pg_move_session *s);

/* ERR_PRECONDITION naming what is missing: the source needs wal_level=logical, version 10 of
 * the schema and every row's slot filled; the target version 10 and a superuser role (CREATE
 * SUBSCRIPTION in PG 15). what names the side in the message ("group g2"). */
err_code store_pg_move_check(store_pg_move_session *s, store_pg_move_side side, const char *what,
                             int64_t deadline, err_t *err);

/* The server's identity "<system identifier>/<timeline of its WAL, 8 hex digits>": another
 * value later means a failover (logical replication slots do not survive one in PG 15). */
err_code store_pg_move_identity(store_pg_move_session *s, store_pg_move_side side, char *out,
                                size_t cap, int64_t deadline, err_t *err);

/* Source: replica identity FULL, the publication, the replication slot. */
err_code store_pg_move_publish(store_pg_move_session *s, int64_t deadline, err_t *err);

/* Target: blocks from..to (moving in), subscribes (audit rows arriving take its own ids; the
 * apply's commits do not wait for a WAL flush: store_pg_move_unblock's commit, synchronous,
 * makes them durable before the target serves). */
err_code store_pg_move_subscribe(store_pg_move_session *s, int64_t deadline, err_t *err);

/* How far the copy is: *synced once every table's initial copy is done, *lag bytes of the
 * source's WAL the target has not confirmed, *rows the target holds in from..to (steps and
 * sagas). ERR_PRECONDITION when the source's replication slot is gone, or when the
 * subscription's workers failed 3 times (a replication that keeps failing: the message points at
 * the target's log). */
err_code store_pg_move_progress(store_pg_move_session *s, bool *synced, int64_t *lag,
                                uint64_t *rows, int64_t deadline, err_t *err);

/* Source: blocks from..to (moving out) and writes the move's mark after every write to them, in
 * one transaction fenced by epoch (ERR_UNAVAILABLE fenced when a newer leader raised the fence).
 * Waits for writes to those tables in flight; later ones are refused (slot-moving). */
err_code store_pg_move_block(store_pg_move_session *s, uint64_t epoch, int64_t deadline,
                             err_t *err);

/* Target: whether the mark has arrived (then everything written before the block has): the
 * target's connection LISTENs on idem_move_marks (schema version 12 announces each mark that
 * arrives) and waits for this move's until it has arrived or until (monotonic ms) passes. */
err_code store_pg_move_wait_marked(store_pg_move_session *s, int64_t until, bool *arrived,
                                   err_t *err);

/* The steps and sagas side holds in from..to (the target's at the handoff; the source's for a
 * dry run). */
err_code store_pg_move_count(store_pg_move_session *s, store_pg_move_side side, uint64_t *steps,
                             uint64_t *sagas, int64_t deadline, err_t *err);

/* Target: drops the subscription; source (when reachable): drops the replication slot. */
err_code store_pg_move_unsubscribe(store_pg_move_session *s, int64_t deadline, err_t *err);

/* side serves from..to again. all: every block there is removed (the target at the handoff: the
 * slots come to it, whatever an earlier move out of it left); else only the blocks this move (its
 * id) put there (a rollback: a block an earlier move left, e.g. the target's own "moving out" of
 * slots it once gave away, is kept). */
err_code store_pg_move_unblock(store_pg_move_session *s, store_pg_move_side side, bool all,
                               int64_t deadline, err_t *err);

/* Deletes side's rows of from..to (blocks or not; with rows false only) and the move's mark;
 * *deleted counts rows. */
err_code store_pg_move_delete(store_pg_move_session *s, store_pg_move_side side, bool rows,
                              int64_t *deleted, int64_t deadline, err_t *err);

/* Source: drops the publication and slot, replica identity back to the default. */
err_code store_pg_move_unpublish(store_pg_move_session *s, int64_t deadline, err_t *err);

/* Target: pauses (ALTER SUBSCRIPTION … DISABLE: its workers stop, the source's walsender with
 * them; the source keeps the WAL) or runs the move's subscription again (ENABLE). */
err_code store_pg_move_pause(store_pg_move_session *s, bool pause, int64_t deadline, err_t *err);

#endif
