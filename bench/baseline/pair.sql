-- bench/baseline/pair.sql — the pgbench baseline for idem-bench's `pairs` workload.
-- One pgbench transaction = one pair = two database transactions, each committed durably
-- (synchronous_commit on, fsync on):
--   1. BeginStep as plain SQL: insert-if-absent of a fresh IN_PROGRESS record;
--   2. CompleteStep as plain SQL: the update to SUCCEEDED with its result.
-- It writes the coordinator's own table (idem_steps, created by its migrations, with all
-- its indexes and the fencing trigger) under the tenant "bench-baseline"; so pgbench's tps
-- is pairs/s. Keys are fresh and never collide: run id (-D run=, a number unique per run,
-- scripts/bench uses the nanosecond clock) + pgbench client id + a per-client counter (-D n=0;
-- pgbench keeps each client's variables from one transaction to the next).
--   pgbench -n -M prepared -f bench/baseline/pair.sql -D run=$(date +%s%N) -D n=0 \
--           -c 16 -j 2 -T 10 postgresql://...
\set n :n + 1
BEGIN;
INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt,
                        created_ms, updated_ms, lease_expires_ms)
  VALUES ('bench-baseline', concat(:run::text, '-', :client_id::text, '-', :n::text),
          'bench', 'pair', 1, 1, 1,
          (extract(epoch from clock_timestamp()) * 1000)::bigint,
          (extract(epoch from clock_timestamp()) * 1000)::bigint,
          (extract(epoch from clock_timestamp()) * 1000)::bigint + 30000)
  ON CONFLICT DO NOTHING;
COMMIT;
BEGIN;
UPDATE idem_steps
   SET state = 2, outcome = 1, code = 200, body = '\x6f6b'::bytea,
       completed_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint,
       updated_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint,
       lease_expires_ms = 0,
       expires_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint + 604800000
 WHERE tenant = 'bench-baseline' AND global_id = concat(:run::text, '-', :client_id::text, '-', :n::text)
   AND service = 'bench' AND operation = 'pair' AND phase = 1 AND state = 1;
COMMIT;
