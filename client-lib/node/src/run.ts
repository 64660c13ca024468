// run.ts — runStep, the step helper, with idem_step_run's semantics (client-lib/include/idem/
// idem.h): BeginStep (waiting on the coordinator while the step is in progress elsewhere, or
// backing off by idem-retry-after-ms; UNAVAILABLE and lost tries (a draining node's CANCELLED)
// retried with jittered backoff inside the run's deadline, at BeginStep and CompleteStep; a run
// that lost a try and ran out of time throws STEP_UNKNOWN) → on PROCEED the action, with its lease extended while it runs → CompleteStep with
// what it reported. REPLAY returns the stored result without running; a SKIP decision runs
// nothing. When no coordinator could decide (docs/api.md §20) a fail-open operation with a
// journal runs unguarded and is journaled in libidem's line format.
import { IdemError, invalid } from './errors';
import { REASONS } from './reasons';
import type { Journal } from './journal';
import type { Transport } from './transport';
import { lostTries } from './transport';
import { journalLine } from './journal';
import {
  BeginOptions, BeginResult, CallOptions, CompleteInput, Decision, FailureMode, Outcome, OUTCOME_WORDS, StepKey,
  StepRecord, StepResult,
} from './types';
import { BODY_MAX, FINGERPRINT_MAX, checkKey, toBytes } from './validate';
import { backoffMs, cancelled, nowMs, sleep } from './time';
import { EVENTS, OtelContext, StepSpan, TracerProvider, checkTraceHeaders, startStepSpan, withContext } from './trace';

/** What runStep needs of a client (IdemClient is one): declared here so that run.ts does not
 *  import client.ts, which imports run.ts. */
export interface StepClient {
  readonly tenant: string;
  readonly deadlineMs: number;
  readonly tracerProvider?: TracerProvider;
  readonly transport: Transport;
  readonly journal: Journal | undefined;
  beginStep(key: StepKey, o?: BeginOptions, co?: CallOptions): Promise<BeginResult>;
  completeStep(key: StepKey, attempt: number, res: CompleteInput, co?: CallOptions): Promise<StepRecord>;
  extendLease(key: StepKey, attempt: number, leaseMs?: number, co?: CallOptions): Promise<{ leaseExpiresUnixMs: number }>;
  refreshPolicy(service: string, operation: string, timeoutMs: number, signal?: AbortSignal): Promise<void>;
  cachedPolicy(service: string, operation: string): { mode?: FailureMode; leaseMs: number } | undefined;
}

const WAIT_MS_MAX = 60000;

export interface StepContext {
  key: Required<StepKey>;
  /** the fencing number: pass it on to your own writes */
  attempt: number;
  /** an earlier attempt's lease expired: it may have partly run */
  takeover: boolean;
  /** nothing is recorded for this run (PROCEED_UNGUARDED, or fail-open with no coordinator) */
  unguarded: boolean;
  /** aborted when the run is cancelled or the lease was lost (another caller may take over) */
  signal: AbortSignal;
}

/** What the action reports. A missing or invalid outcome completes as 'unknown'. */
export interface StepOutput {
  outcome?: Outcome;
  code?: number;
  body?: Buffer | Uint8Array | string;
}

export type StepAction = (ctx: StepContext) => StepOutput | Promise<StepOutput>;

export interface RunOptions {
  /** the request's fingerprint (≤ 64 bytes): the same key with another one is refused */
  fingerprint?: Buffer | Uint8Array | string;
  /** the whole run, retries included; default 10000 */
  deadlineMs?: number;
  /** 0 / absent = the policy's */
  leaseMs?: number;
  /** first retry waits up to this; default 50 */
  backoffBaseMs?: number;
  /** cap of one wait; default 1000 */
  backoffMaxMs?: number;
  /** a step in progress elsewhere: 'wait' on the coordinator (default), 'backoff' (retry ABORTED
   *  with backoff, as noWait), or 'fail' (throw ABORTED / in-progress at once) */
  inProgress?: 'wait' | 'backoff' | 'fail';
  /** same as inProgress: 'backoff' */
  noWait?: boolean;
  /** extend the lease while the action runs (default true) */
  extendLease?: boolean;
  /** cancels the run: waits and calls stop (CANCELLED); an action that ran is still completed */
  signal?: AbortSignal;
  /** the OpenTelemetry context the idem.step span is a child of (default the active one) */
  context?: OtelContext;
  /** the caller's W3C trace context when it has no active span (e.g. an incoming request's
   *  headers): the idem.step span's remote parent, and what the calls send without
   *  @opentelemetry/api */
  traceparent?: string;
  tracestate?: string;
}

export interface RunReport {
  /** of the BeginStep that settled the run */
  decision: Decision;
  attempt: number;
  /** the action was called in this run */
  ran: boolean;
  takeover: boolean;
  /** the stored result was returned instead */
  replayed: boolean;
  /** ran with nothing recorded */
  unguarded: boolean;
  /** the unguarded run was appended to the journal */
  journaled: boolean;
  /** the action's (ran) or the stored one (replayed); absent on a SKIP */
  result?: StepResult;
  /** REPLAY past retention: outcome and code only */
  resultExpired: boolean;
  /** BeginStep calls retried after ABORTED / UNAVAILABLE */
  beginRetries: number;
}

interface Conf {
  span: StepSpan;
  /** what every call of the run carries: its trace context */
  trace: Pick<CallOptions, 'context' | 'traceparent' | 'tracestate'>;
  /** monotonic: when the run began (lost tries since then make a spent deadline STEP_UNKNOWN) */
  beganMs: number;
  endMs: number;
  leaseMs: number;
  baseMs: number;
  maxMs: number;
  callMs: number;
  mode: 'wait' | 'backoff' | 'fail';
  signal?: AbortSignal;
}

function positive(field: string, v: number | undefined, dflt: number): number {
  if (v === undefined || v === 0) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw invalid(field, 'must be a number >= 0');
  return v;
}

/** A lost try (Transport.lostTry marked it): CANCELLED without idem-reason that the caller did
 *  not cause. */
function lostTry(e: IdemError): boolean {
  return lostTries.has(e);
}

/** The error of a run whose deadline ended the retries of `call` with e: STEP_UNKNOWN when a try
 *  of the client was lost since the run began (the step may have begun, or been stored, on it),
 *  else e. */
function givenUp(c: StepClient, conf: Conf, call: string, e: IdemError): IdemError {
  const retried = e.code === 'UNAVAILABLE' || e.code === 'DEADLINE_EXCEEDED' || e.code === 'ABORTED';
  if (!(retried || lostTry(e)) || !c.transport.lostSince(conf.beganMs)) return e;
  return new IdemError('STEP_UNKNOWN', `${call}: a try was lost and the run's deadline passed before an ` +
    `answer said what it did (last: ${e.code}${e.reason ? ' ' + e.reason : ''})`, { outcomeUnknown: true });
}

async function beginWithRetries(c: StepClient, key: StepKey, fp: Buffer, conf: Conf,
                                report: RunReport): Promise<BeginResult> {
  let last: IdemError | undefined;
  for (let n = 0; ; n++) {
    const left = conf.endMs - nowMs();
    if (left <= 0) break;
    const waitMs = conf.mode === 'wait' ? Math.floor(Math.min(left, WAIT_MS_MAX)) : 0;
    const timeout = Math.max(1, Math.floor(Math.min(conf.callMs + waitMs, left)));
    try {
      // the client adds waitMs to the call's deadline; give it what is left of the run
      return await c.beginStep(key, { fingerprint: fp, leaseMs: conf.leaseMs, waitMs },
        { deadlineMs: Math.max(1, timeout - waitMs), signal: conf.signal, ...conf.trace });
    } catch (x) {
      const e = x as IdemError;
      last = e;
      if (e.code === 'CANCELLED' && conf.signal?.aborted) throw e;
      // no answer in time from one of several coordinators: another may decide (§20)
      const elsewhere = e.code === 'DEADLINE_EXCEEDED' && c.transport.endpoints > 1;
      if (e.code === 'ABORTED' && conf.mode === 'fail') throw e;
      // a call deadline that ran into the run's, after a lost try: STEP_UNKNOWN (givenUp)
      if (e.code === 'DEADLINE_EXCEEDED' && !elsewhere) throw givenUp(c, conf, 'BeginStep', e);
      if (e.code !== 'ABORTED' && e.code !== 'UNAVAILABLE' && !elsewhere && !lostTry(e)) throw e;
      let wait = backoffMs(conf.baseMs, conf.maxMs, n);
      if (e.code === 'ABORTED' && e.retryAfterMs > 0) wait = Math.max(wait, Math.min(e.retryAfterMs, conf.maxMs));
      if (nowMs() + wait >= conf.endMs) throw givenUp(c, conf, 'BeginStep', e);
      // in progress under another caller's lease
      if (e.code === 'ABORTED') conf.span.event(EVENTS.waiting, { 'idem.error.reason': e.reason, 'idem.wait_ms': wait });
      await sleep(wait, conf.signal);
      report.beginRetries++;
    }
  }
  throw last ? givenUp(c, conf, 'BeginStep', last) : new IdemError('DEADLINE_EXCEEDED', 'run deadline exceeded');
}

/** The first Complete always gets the client's full per-call deadline (leaving the step in
 *  progress would make it run again after its lease); retries stay inside the run's deadline. */
async function completeWithRetries(c: StepClient, key: StepKey, attempt: number, res: StepResult,
                                   conf: Conf): Promise<number> {
  for (let n = 0; ; n++) {
    let timeout = conf.callMs;
    if (n > 0) timeout = Math.min(timeout, conf.endMs - nowMs());
    try {
      const rec = await c.completeStep(key, attempt, res, { deadlineMs: Math.max(1, Math.floor(timeout)), ...conf.trace });
      return rec.result?.completedUnixMs ?? 0;
    } catch (x) {
      const e = x as IdemError;
      if (e.code !== 'UNAVAILABLE' && e.code !== 'DEADLINE_EXCEEDED' && !lostTry(e)) throw e;
      const wait = backoffMs(conf.baseMs, conf.maxMs, n);
      if (nowMs() + wait >= conf.endMs) throw givenUp(c, conf, 'CompleteStep', e);
      await sleep(wait);
    }
  }
}

/** Extends the lease every third of it until stopped; resolves with the error that lost it. */
async function keepLease(c: StepClient, key: StepKey, attempt: number, leaseMs: number, askMs: number,
                         conf: Conf, stop: AbortSignal, onLost: (e: IdemError) => void): Promise<void> {
  const every = Math.max(20, Math.floor(leaseMs / 3));
  while (!stop.aborted) {
    try {
      await sleep(every, stop);
    } catch {
      return;
    }
    try {
      const r = await c.extendLease(key, attempt, askMs, {
        deadlineMs: Math.min(c.deadlineMs, Math.max(every, 100)), signal: stop, ...conf.trace,
      });
      conf.span.event(EVENTS.leaseExtended, { 'idem.lease_expires_unix_ms': r.leaseExpiresUnixMs });
    } catch (x) {
      const e = x as IdemError;
      if (stop.aborted) return;
      if (e.code === 'ABORTED' || e.code === 'NOT_FOUND' || e.code === 'FAILED_PRECONDITION') {
        conf.span.event(EVENTS.leaseLost, { 'idem.error.reason': e.reason || REASONS.leaseLost });
        onLost(new IdemError('ABORTED', `lease lost while the action ran: ${e.message}`, {
          reason: e.reason || REASONS.leaseLost, grpcCode: e.grpcCode,
        }));
        return;
      }
      // UNAVAILABLE, a deadline: try again at the next tick while the lease may still run
    }
  }
}

async function callAction(action: StepAction, ctx: StepContext): Promise<{ res: StepResult; thrown?: unknown }> {
  let out: StepOutput | undefined;
  try {
    out = await action(ctx);
  } catch (thrown) {
    // the action may or may not have acted: UNKNOWN, with the error's message
    const msg = thrown instanceof Error ? thrown.message : String(thrown);
    const body = Buffer.from(msg, 'utf8').subarray(0, 1024);
    return { res: { outcome: 'unknown', code: 0, body, completedUnixMs: 0 }, thrown };
  }
  const outcome: Outcome = out && OUTCOME_WORDS.includes(out.outcome as Outcome) ? (out.outcome as Outcome) : 'unknown';
  const code = out && Number.isInteger(out.code) ? (out.code as number) : 0;
  const body = toBytes('body', out?.body, BODY_MAX);
  return { res: { outcome, code, body, completedUnixMs: 0 } };
}

/** Runs one step inside its idem.step span (docs/sdk-node.md): a child of o.context, else of
 *  the active span, else of o.traceparent. Every call of the run and the action run in it. */
export async function runStep(c: StepClient, key: StepKey, action: StepAction, o: RunOptions = {}): Promise<RunReport> {
  checkKey(key);
  if (typeof action !== 'function') throw invalid('action', 'is not a function');
  checkTraceHeaders('traceparent', o);
  const span = startStepSpan(c.tracerProvider, o.context, o, {
    'idem.service': key.service, 'idem.operation': key.operation, 'idem.global_id': key.globalId,
    'idem.phase': key.phase ?? 'forward',
  });
  try {
    const report = await run(c, key, action, o, span);
    span.end();
    return report;
  } catch (x) {
    span.end(x);
    throw x;
  }
}

async function run(c: StepClient, key: StepKey, action: StepAction, o: RunOptions, span: StepSpan): Promise<RunReport> {
  const fp = toBytes('fingerprint', o.fingerprint, FINGERPRINT_MAX);
  const conf: Conf = {
    span,
    trace: { context: span.context, traceparent: o.traceparent, tracestate: o.tracestate },
    beganMs: nowMs(),
    endMs: nowMs() + positive('deadlineMs', o.deadlineMs, 10000),
    leaseMs: Math.floor(positive('leaseMs', o.leaseMs, 0)),
    baseMs: positive('backoffBaseMs', o.backoffBaseMs, 50),
    maxMs: positive('backoffMaxMs', o.backoffMaxMs, 1000),
    callMs: c.deadlineMs,
    mode: o.inProgress ?? (o.noWait ? 'backoff' : 'wait'),
    signal: o.signal,
  };
  if (conf.maxMs < conf.baseMs) conf.maxMs = conf.baseMs;
  if (o.signal?.aborted) throw cancelled(o.signal);
  const fullKey: Required<StepKey> = { ...key, phase: key.phase ?? 'forward' };

  // fail-open: the failure mode comes with every BeginStep answer (client.ts), so nothing is
  // called before the first try; an older coordinator's answer names none, and then the policy
  // is fetched after it

  const report: RunReport = {
    decision: 'PROCEED', attempt: 0, ran: false, takeover: false, replayed: false, unguarded: false,
    journaled: false, resultExpired: false, beginRetries: 0,
  };
  let b: BeginResult;
  let source: 'client' | 'server' = 'server';
  const beganMs = nowMs();
  try {
    b = await beginWithRetries(c, fullKey, fp, conf, report);
  } catch (x) {
    const e = x as IdemError;
    // no coordinator can decide (every known address called during this run: none answered, or
    // each said its store or election is down): a fail-open operation with a journal runs (§20)
    const unreachable = (e.code === 'DEADLINE_EXCEEDED' || e.code === 'UNAVAILABLE') &&
      c.transport.noneCouldDecide(beganMs);
    if (!unreachable || !c.journal || c.cachedPolicy(key.service, key.operation)?.mode !== 'fail-open') throw e;
    b = {
      decision: 'PROCEED_UNGUARDED', attempt: 0, leaseExpiresUnixMs: 0, takeover: false, expiresUnixMs: 0,
      resultExpired: false, resultExpiresUnixMs: 0,
    };
    source = 'client';
  }

  if (source === 'server' && !c.cachedPolicy(key.service, key.operation)?.mode) {
    await c.refreshPolicy(key.service, key.operation, conf.callMs, o.signal);
  }
  report.decision = b.decision;
  report.attempt = b.attempt;
  span.setDecision(b.decision, b.attempt);
  switch (b.decision) {
    case 'REPLAY':
      span.event(EVENTS.replay);
      report.replayed = true;
      report.result = b.result;
      report.resultExpired = b.resultExpired;
      return report;
    case 'SKIP_NULL_COMPENSATION':
    case 'SKIP_ALREADY_COMPENSATED':
      return report;
    case 'PROCEED':
    case 'PROCEED_UNGUARDED':
      break;
    default:
      throw new IdemError('BAD_RESPONSE', `unknown decision ${String(b.decision)}`);
  }

  const unguarded = b.decision === 'PROCEED_UNGUARDED';
  const actionCtl = new AbortController();
  const onRunAbort = () => actionCtl.abort(o.signal?.reason);
  o.signal?.addEventListener('abort', onRunAbort, { once: true });
  let lost: IdemError | undefined;
  const stopLease = new AbortController();
  let leaseLoop: Promise<void> = Promise.resolve();
  if (!unguarded && o.extendLease !== false) {
    const leaseMs = conf.leaseMs || c.cachedPolicy(key.service, key.operation)?.leaseMs ||
      Math.max(300, b.leaseExpiresUnixMs - Date.now());
    leaseLoop = keepLease(c, fullKey, b.attempt, leaseMs, conf.leaseMs, conf, stopLease.signal, (e) => {
      lost = e;
      actionCtl.abort(e);
    });
  }
  report.ran = true;
  report.takeover = b.takeover;
  if (b.takeover) span.event(EVENTS.takeover, { 'idem.attempt': b.attempt });
  report.unguarded = unguarded;
  const ctx: StepContext = {
    key: fullKey, attempt: b.attempt, takeover: b.takeover, unguarded, signal: actionCtl.signal,
  };
  let done: { res: StepResult; thrown?: unknown };
  try {
    done = await withContext(span.context, () => callAction(action, ctx));
  } catch (x) {
    stopLease.abort();
    await leaseLoop;
    o.signal?.removeEventListener('abort', onRunAbort);
    const e = x instanceof IdemError ? x : new IdemError('INVALID_ARGUMENT', String(x));
    e.report = report;
    throw e;
  }
  stopLease.abort();
  await leaseLoop;
  o.signal?.removeEventListener('abort', onRunAbort);
  report.result = done.res;

  if (lost) {
    lost.report = report;
    throw lost; // another caller may have taken over: this attempt's Complete would be refused
  }

  if (unguarded && c.journal) {
    try {
      await c.journal.append(journalLine(Date.now(), source, c.tenant, fullKey, fp, done.res));
    } catch (x) {
      throw new IdemError('DATA_LOSS', `journal ${c.journal.path}: ${(x as Error).message}`, { report });
    }
    report.journaled = true;
  }
  if (!unguarded) {
    try {
      report.result.completedUnixMs = await completeWithRetries(c, fullKey, b.attempt, done.res, conf);
    } catch (x) {
      const e = x as IdemError;
      e.report = report;
      throw e;
    }
  }
  if (done.thrown !== undefined) throw done.thrown;
  if (done.res.outcome === 'retryable')
    throw new IdemError('STEP_FAILED', 'the action reported a retryable failure; the key was released', { report });
  return report;
}
