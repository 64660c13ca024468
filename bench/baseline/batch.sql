-- bench/baseline/batch.sql — Postgres's floor for idem's group commit: the
-- statements the coordinator's batcher sends (server/store/store_pg_batch.c), from pgbench,
-- with no coordinator and no gRPC. One pgbench transaction = one database transaction of
-- :batch step transactions, committed durably: BEGIN; the pair locks; the pair read; the
-- multi-row upsert; COMMIT. A client's odd transactions are the Begins of :batch fresh pairs
-- (IN_PROGRESS records), its even ones the Completes of the same pairs (SUCCEEDED records),
-- so pgbench's tps x :batch / 2 is pairs/s.
-- The session looks like the coordinator's batch connections: idem.epoch set (the fencing
-- trigger does its full check) and the same planner settings. The coordinator binds text
-- arrays; here the arrays are built in SQL from generate_series, which costs about as much.
-- A copy of the batcher's SQL: keep them in step. bench/cpu-split --ceiling runs it as
--   pgbench -n -M prepared -f bench/baseline/batch.sql -D run=$(date +%s%N) -D n=0 \
--           -D batch=24 -c 2 -j 1 -T 10 postgresql://...
\set n :n + 1
\set id (:n + 1) / 2
\set done 1 - :n % 2
SELECT set_config('idem.epoch', '1', false),
       set_config('plan_cache_mode', 'force_generic_plan', false),
       set_config('enable_seqscan', 'off', false), set_config('enable_hashjoin', 'off', false),
       set_config('enable_mergejoin', 'off', false);
BEGIN;
SELECT count(pg_advisory_xact_lock(hashtextextended(
         k.t || E'\x1f' || k.g || E'\x1f' || k.s || E'\x1f' || k.o, 0)))
  FROM (SELECT 'bench-floor'::text AS t,
               concat(:run::text, '-', :client_id::text, '-', :id::text, '-', i::text) AS g,
               'bench'::text AS s, 'pair'::text AS o
          FROM generate_series(1, :batch) i) k;
SELECT count(st.phase)
  FROM (SELECT 'bench-floor'::text AS t,
               concat(:run::text, '-', :client_id::text, '-', :id::text, '-', i::text) AS g,
               'bench'::text AS s, 'pair'::text AS o
          FROM generate_series(1, :batch) i) k
  LEFT JOIN LATERAL (SELECT phase, state, attempt, fingerprint, outcome, code, body,
                            completed_ms, created_ms, updated_ms, lease_expires_ms, expires_ms
                       FROM idem_steps r
                      WHERE r.tenant = k.t AND r.global_id = k.g AND r.service = k.s
                        AND r.operation = k.o ORDER BY r.phase) st ON true;
INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt,
                        fingerprint, outcome, code, body, completed_ms, created_ms, updated_ms,
                        lease_expires_ms, expires_ms)
  SELECT 'bench-floor', concat(:run::text, '-', :client_id::text, '-', :id::text, '-', i::text),
         'bench', 'pair', 1, 1 + :done, 1,
         '\x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20'::bytea, :done,
         200 * :done, CASE WHEN :done = 1 THEN '\x6f6b'::bytea ELSE ''::bytea END, 2 * :done, 1,
         1 + :done, 30001 * (1 - :done), 604800000 * :done
    FROM generate_series(1, :batch) i
  ON CONFLICT (tenant, global_id, service, operation, phase) DO UPDATE SET
    state = EXCLUDED.state, attempt = EXCLUDED.attempt, fingerprint = EXCLUDED.fingerprint,
    outcome = EXCLUDED.outcome, code = EXCLUDED.code, body = EXCLUDED.body,
    completed_ms = EXCLUDED.completed_ms, created_ms = EXCLUDED.created_ms,
    updated_ms = EXCLUDED.updated_ms, lease_expires_ms = EXCLUDED.lease_expires_ms,
    expires_ms = EXCLUDED.expires_ms;
COMMIT;
