/* store_pg_backend.c — the PostgreSQL backend as store.h's backend table: the functions of
 * store_pg.h and store_pg_move.h, for the folders that see the store through store.h alone. */
#include "store_pg.h"
#include "store_pg_move.h"

static const store_move_ops pg_move_ops = {
    .open = store_pg_move_session_open,
    .close = store_pg_move_session_close,
    .check = store_pg_move_check,
    .identity = store_pg_move_identity,
    .publish = store_pg_move_publish,
    .subscribe = store_pg_move_subscribe,
    .progress = store_pg_move_progress,
    .block = store_pg_move_block,
    .wait_marked = store_pg_move_wait_marked,
    .count = store_pg_move_count,
    .unsubscribe = store_pg_move_unsubscribe,
    .unblock = store_pg_move_unblock,
    .delete_rows = store_pg_move_delete,
    .unpublish = store_pg_move_unpublish,
    .pause = store_pg_move_pause,
};

const store_backend store_postgres = {
    .open = store_pg_open,
    .target = store_pg_target,
    .migrate = store_pg_migrate,
    .schema_newest = store_pg_schema_newest,
    .schema_check = store_pg_schema_check,
    .slots_check = store_pg_slots_check,
    .slots_fill = store_pg_slots_fill,
    .set_slots = store_pg_set_slots,
    .owner_read = store_pg_owner_read,
    .owner_settle = store_pg_owner_settle,
    .fence_raise = store_pg_fence_raise,
    .fence_read = store_pg_fence_read,
    .set_epoch_source = store_pg_set_epoch_source,
    .set_metrics_group = store_pg_set_metrics_group,
    .batcher_start = store_batcher_start,
    .batcher_stop = store_batcher_stop,
    .set_batcher = store_pg_set_batcher,
    .move = &pg_move_ops,
};
