'use strict';
// barrier.js — libidem_pg's barrier (client-lib/include/idem/idem_pg.h) in Node on pg: the
// business writes and the step's dedup row commit in ONE local transaction, so an attempt that
// takes over after a crash between that COMMIT and CompleteStep finds the row and keeps the
// earlier attempt's result instead of acting twice. Same table (idem_barrier in the connection's
// schema), same claim, same columns: the C services and the cross-check read it.

const CREATE_SQL = `CREATE TABLE IF NOT EXISTS idem_barrier (
 global_id text NOT NULL, service text NOT NULL, operation text NOT NULL,
 phase smallint NOT NULL, fence bigint NOT NULL CHECK (fence >= 1),
 outcome smallint, code integer NOT NULL DEFAULT 0, body bytea,
 applied_at timestamptz NOT NULL DEFAULT now(),
 PRIMARY KEY (global_id, service, operation, phase))`;

// the claim: a row no attempt has finished, from an older attempt only (fence < attempt)
const CLAIM_SQL = `INSERT INTO idem_barrier (global_id, service, operation, phase, fence)
 VALUES ($1, $2, $3, $4, $5)
 ON CONFLICT (global_id, service, operation, phase) DO UPDATE SET fence = EXCLUDED.fence
 WHERE idem_barrier.fence < EXCLUDED.fence AND idem_barrier.outcome IS NULL
 RETURNING fence`;
const SELECT_SQL = `SELECT fence::text, outcome, code, body FROM idem_barrier
 WHERE global_id = $1 AND service = $2 AND operation = $3 AND phase = $4`;
const FINISH_SQL = `UPDATE idem_barrier SET outcome = $6, code = $7, body = $8, applied_at = now()
 WHERE global_id = $1 AND service = $2 AND operation = $3 AND phase = $4 AND fence = $5`;

// the contract's outcome numbers (idem.v1 Outcome) and the SDK's words
const OUTCOME_NUM = { succeeded: 1, failed: 2, retryable: 3, unknown: 4 };
const OUTCOME_WORD = ['unknown', 'succeeded', 'failed', 'retryable', 'unknown'];
const PHASE_NUM = { forward: 1, compensation: 2 };

/** Creates idem_barrier when missing (serialized between processes). client: a pg client. */
async function barrierInit(client) {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(7342190001)');
    await client.query(CREATE_SQL);
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

class CommitError extends Error {} // COMMIT failed: the effect may have committed

/**
 * Runs effect(client, attempt) → {outcome, code, body} for key exactly once across attempts.
 * Resolves {applied, appliedEarlier, rolledBack, fence, result}; throws on a database error
 * (a CommitError when COMMIT itself failed).
 */
async function barrierRun(client, key, attempt, effect) {
  if (!(attempt >= 1)) throw new Error('barrier: attempt 0');
  const k = [key.globalId, key.service, key.operation, PHASE_NUM[key.phase || 'forward']];
  await client.query('BEGIN');
  let done = false;
  try {
    const claim = await client.query(CLAIM_SQL, [...k, String(attempt)]);
    if (claim.rowCount !== 1) { // applied by an earlier (or concurrent, now committed) attempt
      const r = await client.query(SELECT_SQL, k);
      if (r.rowCount !== 1) throw new Error('barrier read: no row');
      const row = r.rows[0];
      return { appliedEarlier: true, fence: Number(row.fence), result: {
        outcome: row.outcome === null ? 'unknown' : OUTCOME_WORD[row.outcome] || 'unknown',
        code: row.code, body: row.body || Buffer.alloc(0) } };
    }
    const out = await effect(client, attempt);
    if (out.outcome !== 'succeeded' && out.outcome !== 'failed')
      return { rolledBack: true, result: { outcome: 'retryable', code: out.code || 0, body: Buffer.alloc(0) } };
    const body = out.body && out.body.length ? Buffer.from(out.body) : null; // NULL when empty
    const u = await client.query(FINISH_SQL, [...k, String(attempt), OUTCOME_NUM[out.outcome],
      out.code || 0, body]);
    if (u.rowCount !== 1) throw new Error(`barrier record: ${u.rowCount} rows`);
    done = true;
    try {
      await client.query('COMMIT');
    } catch (e) {
      throw new CommitError(`barrier commit: ${e.message}`);
    }
    return { applied: true, fence: attempt, result: { outcome: out.outcome, code: out.code || 0,
      body: body || Buffer.alloc(0) } };
  } finally {
    if (!done) await client.query('ROLLBACK').catch(() => {});
  }
}

module.exports = { barrierInit, barrierRun, CommitError };
