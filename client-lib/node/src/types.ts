// types.ts — the SDK's values (camelCase, the contract's words for enums) and their conversion
// from and to idem.v1's wire messages (docs/api.md §2).
import type { OtelContext } from './trace';
import { IdemError } from './errors';

export type Phase = 'forward' | 'compensation';
export type Outcome = 'succeeded' | 'failed' | 'retryable' | 'unknown';
export type Decision =
  | 'PROCEED' | 'REPLAY' | 'SKIP_NULL_COMPENSATION' | 'SKIP_ALREADY_COMPENSATED' | 'PROCEED_UNGUARDED';
export type StepState =
  | 'none' | 'in_progress' | 'succeeded' | 'failed' | 'unknown' | 'abandoned' | 'released';
export type FailureMode = 'fail-closed' | 'fail-open';

export interface StepKey {
  globalId: string;
  service: string;
  operation: string;
  /** default 'forward' */
  phase?: Phase;
}

export interface StepResult {
  outcome: Outcome;
  code: number;
  body: Buffer;
  completedUnixMs: number;
}

export interface BeginResult {
  decision: Decision;
  attempt: number;
  leaseExpiresUnixMs: number;
  takeover: boolean;
  expiresUnixMs: number;
  /** REPLAY: the stored result */
  result?: StepResult;
  /** REPLAY past the policy's retention_s: outcome and code only (docs/api.md §12) */
  resultExpired: boolean;
  resultExpiresUnixMs: number;
}

export interface StepRecord {
  tenant: string;
  key: Required<StepKey>;
  state: StepState;
  attempt: number;
  fingerprint: Buffer;
  result?: StepResult;
  createdUnixMs: number;
  updatedUnixMs: number;
  leaseExpiresUnixMs: number;
  expiresUnixMs: number;
  resultExpired: boolean;
  /** the trace id (32 lower-case hex) of the BeginStep that began the current attempt; '' none */
  beginTraceId: string;
  /** of the CompleteStep, ResolveStep or reaper action that finished it; '' none */
  completeTraceId: string;
}

export interface Saga {
  globalId: string;
  sagaType: string;
  createdUnixMs: number;
  labels: Record<string, string>;
  steps: StepRecord[];
}

export interface Policy {
  service: string;
  operation: string;
  failureMode: FailureMode;
  retentionS: number;
  leaseMs: number;
  keyRetentionS: number;
  updatedUnixMs: number;
}

/* --- wire words ------------------------------------------------------------------------------ */

const PHASES: Record<string, Phase> = { PHASE_FORWARD: 'forward', PHASE_COMPENSATION: 'compensation' };
const OUTCOMES: Record<string, Outcome> = {
  OUTCOME_SUCCEEDED: 'succeeded', OUTCOME_FAILED: 'failed', OUTCOME_RETRYABLE: 'retryable',
  OUTCOME_UNKNOWN: 'unknown',
};
const STATES: Record<string, StepState> = {
  STEP_STATE_UNSPECIFIED: 'none', STEP_STATE_IN_PROGRESS: 'in_progress',
  STEP_STATE_SUCCEEDED: 'succeeded', STEP_STATE_FAILED: 'failed', STEP_STATE_UNKNOWN: 'unknown',
  STEP_STATE_ABANDONED: 'abandoned', STEP_STATE_RELEASED: 'released',
};
const MODES: Record<string, FailureMode> = {
  FAILURE_MODE_FAIL_CLOSED: 'fail-closed', FAILURE_MODE_FAIL_OPEN: 'fail-open',
};

export const OUTCOME_WORDS: readonly Outcome[] = ['succeeded', 'failed', 'retryable', 'unknown'];

export function phaseToWire(p: Phase | undefined): string {
  return p === 'compensation' ? 'PHASE_COMPENSATION' : 'PHASE_FORWARD';
}
export function outcomeToWire(o: Outcome): string {
  return `OUTCOME_${o.toUpperCase()}`;
}
export function modeToWire(m: FailureMode): string {
  return m === 'fail-open' ? 'FAILURE_MODE_FAIL_OPEN' : 'FAILURE_MODE_FAIL_CLOSED';
}
export function modeFromWire(m: unknown): FailureMode | undefined {
  return MODES[String(m)];
}

/* --- wire messages ---------------------------------------------------------------------------- */

/* eslint-disable @typescript-eslint/no-explicit-any */
type Wire = any;

export function keyToWire(k: StepKey): Wire {
  return { global_id: k.globalId, service: k.service, operation: k.operation, phase: phaseToWire(k.phase) };
}

function num(v: unknown): number {
  return typeof v === 'number' ? v : Number(v ?? 0);
}

function buf(v: unknown): Buffer {
  return Buffer.isBuffer(v) ? v : Buffer.from((v as Uint8Array | undefined) ?? []);
}

export function resultFromWire(r: Wire): StepResult | undefined {
  if (!r) return undefined;
  const outcome = OUTCOMES[String(r.outcome)];
  if (!outcome) return undefined;
  return { outcome, code: num(r.code), body: buf(r.body), completedUnixMs: num(r.completed_unix_ms) };
}

export function beginFromWire(b: Wire): BeginResult {
  const d = String(b.decision ?? '');
  if (!d.startsWith('DECISION_') || d === 'DECISION_UNSPECIFIED')
    throw new IdemError('BAD_RESPONSE', `unknown decision ${d}`);
  const decision = d.slice('DECISION_'.length) as Decision;
  return {
    decision,
    attempt: num(b.attempt),
    leaseExpiresUnixMs: num(b.lease_expires_unix_ms),
    takeover: !!b.takeover,
    expiresUnixMs: num(b.expires_unix_ms),
    result: decision === 'REPLAY' ? resultFromWire(b.result) : undefined,
    resultExpired: !!b.result_expired,
    resultExpiresUnixMs: num(b.result_expires_unix_ms),
  };
}

export function recordFromWire(r: Wire): StepRecord {
  const k = r.key ?? {};
  return {
    tenant: String(r.tenant ?? ''),
    key: {
      globalId: String(k.global_id ?? ''), service: String(k.service ?? ''),
      operation: String(k.operation ?? ''), phase: PHASES[String(k.phase)] ?? 'forward',
    },
    state: STATES[String(r.state)] ?? 'none',
    attempt: num(r.attempt),
    fingerprint: buf(r.fingerprint),
    result: resultFromWire(r.result),
    createdUnixMs: num(r.created_unix_ms),
    updatedUnixMs: num(r.updated_unix_ms),
    leaseExpiresUnixMs: num(r.lease_expires_unix_ms),
    expiresUnixMs: num(r.expires_unix_ms),
    resultExpired: !!r.result_expired,
    beginTraceId: String(r.begin_trace_id ?? ''),
    completeTraceId: String(r.complete_trace_id ?? ''),
  };
}

export function policyFromWire(p: Wire): Policy {
  return {
    service: String(p.service ?? ''),
    operation: String(p.operation ?? ''),
    failureMode: modeFromWire(p.failure_mode) ?? 'fail-closed',
    retentionS: num(p.retention_s),
    leaseMs: num(p.lease_ms),
    keyRetentionS: num(p.key_retention_s),
    updatedUnixMs: num(p.updated_unix_ms),
  };
}

/** Per-call options: a deadline (ms, default the client's) and a signal that cancels the call
 *  (it then fails with CANCELLED). */
export interface CallOptions {
  deadlineMs?: number;
  signal?: AbortSignal;
  /** the OpenTelemetry context whose span's traceparent the call sends (default the active one;
   *  needs @opentelemetry/api) */
  context?: OtelContext;
  /** a W3C traceparent (and tracestate) sent when there is no span to send (no
   *  @opentelemetry/api, or no active span): e.g. an incoming request's header */
  traceparent?: string;
  tracestate?: string;
}

export interface BeginOptions {
  fingerprint?: Buffer | Uint8Array | string;
  /** 0 / absent = the policy's lease */
  leaseMs?: number;
  /** 0-60000: wait on a step in progress (docs/api.md §12); the call's deadline grows by it */
  waitMs?: number;
}

export interface CompleteInput {
  outcome: Outcome;
  code?: number;
  body?: Buffer | Uint8Array | string;
}
