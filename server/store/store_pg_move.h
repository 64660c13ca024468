/* store_pg_move.h — the PostgreSQL side of moving slots between groups (docs/api.md §18), on
 * PostgreSQL's own logical replication: a publication on the source filtered to the slots (PG 15
 * row filters; the tables' replica identity FULL while it runs, so updates and deletes carry the
 * slot), a replication slot made first (so that a source and target in one PostgreSQL cluster
 * work too), a subscription on the target, and the blocks (idem_slot_blocks, version 9 of the
 * schema) that keep a store from writing slots it does not serve. Audit rows that arrive take
 * the target's own ids (version 10: a replica trigger renumbers them).
 *
 * Each call connects to the store(s) it names by conninfo (reusing an idle connection of an
 * earlier call: store_pg_move_disconnect closes them), is bounded by deadline and is
 * idempotent: a call repeated after a crash, or on an object already made or already gone, does
 * nothing more. Names: publication, slot and subscription are idem_move_<id>.
 * Only the composition root (node/) includes this header.
 */
#ifndef IDEM_STORE_PG_MOVE_H
#define IDEM_STORE_PG_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

/* ERR_PRECONDITION naming what is missing: the source needs wal_level=logical, version 10 of
 * the schema and every row's slot filled; the target version 10 and a superuser role (CREATE
 * SUBSCRIPTION in PG 15). what names the side in the message ("group g2"). */
err_code store_pg_move_check(const char *conninfo, bool source, const char *what, int64_t deadline,
                             err_t *err);

/* The server's identity "<system identifier>/<timeline of its WAL, 8 hex digits>": another
 * value later means a failover (logical replication slots do not survive one in PG 15). */
err_code store_pg_move_identity(const char *conninfo, char *out, size_t cap, int64_t deadline,
                                err_t *err);

/* Source: replica identity FULL, the publication, the replication slot. */
err_code store_pg_move_publish(const char *src, const char *id, uint32_t from, uint32_t to,
                               int64_t deadline, err_t *err);

/* Target: blocks from..to (moving in), subscribes (audit rows arriving take its own ids; the
 * apply's commits do not wait for a WAL flush: store_pg_move_unblock's commit, synchronous,
 * makes them durable before the target serves). */
err_code store_pg_move_subscribe(const char *dst, const char *src, const char *id, uint32_t from,
                                 uint32_t to, int64_t deadline, err_t *err);

/* How far the copy is: *synced once every table's initial copy is done, *lag bytes of the
 * source's WAL the target has not confirmed, *rows the target holds in from..to (steps and
 * sagas). ERR_PRECONDITION when the source's replication slot is gone, or when the
 * subscription's workers failed 3 times (a replication that keeps failing: the message points at
 * the target's log). */
err_code store_pg_move_progress(const char *src, const char *dst, const char *id, uint32_t from,
                                uint32_t to, bool *synced, int64_t *lag, uint64_t *rows,
                                int64_t deadline, err_t *err);

/* Source: blocks from..to (moving out) and writes the move's mark after every write to them, in
 * one transaction fenced by epoch (ERR_UNAVAILABLE fenced when a newer leader raised the fence).
 * Waits for writes to those tables in flight; later ones are refused (slot-moving). */
err_code store_pg_move_block(const char *src, const char *id, uint32_t from, uint32_t to,
                             uint64_t epoch, int64_t deadline, err_t *err);

/* Target: whether the mark has arrived (then everything written before the block has), asked
 * every few milliseconds on one connection until it has or until (monotonic ms) passes. */
err_code store_pg_move_wait_marked(const char *dst, const char *id, int64_t until, bool *arrived,
                                   err_t *err);

/* Target: the steps and sagas it holds in from..to. */
err_code store_pg_move_count(const char *dst, uint32_t from, uint32_t to, uint64_t *steps,
                             uint64_t *sagas, int64_t deadline, err_t *err);

/* Target: drops the subscription; source (when reachable): drops the replication slot. */
err_code store_pg_move_unsubscribe(const char *dst, const char *src, const char *id,
                                   int64_t deadline, err_t *err);

/* The store serves from..to again: its blocks there are removed (others' parts kept). */
err_code store_pg_move_unblock(const char *conninfo, uint32_t from, uint32_t to, int64_t deadline,
                               err_t *err);

/* Deletes the rows of from..to (blocks or not) and the move's mark; *deleted counts rows. */
err_code store_pg_move_delete(const char *conninfo, const char *id, uint32_t from, uint32_t to,
                              int64_t *deleted, int64_t deadline, err_t *err);

/* Source: drops the publication and slot, replica identity back to the default. */
err_code store_pg_move_unpublish(const char *src, const char *id, int64_t deadline, err_t *err);

/* Target: pauses (ALTER SUBSCRIPTION … DISABLE: its workers stop, the source's walsender with
 * them; the source keeps the WAL) or runs the move's subscription again (ENABLE). */
err_code store_pg_move_pause(const char *dst, const char *id, bool pause, int64_t deadline,
                             err_t *err);

/* Closes the idle connections the calls above keep (the end of a move's drive). */
void store_pg_move_disconnect(void);

#endif
