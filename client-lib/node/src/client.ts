// client.ts — IdemClient: connect (addresses, tenant, token, TLS) and one method per RPC of
// idem.v1 that a participant or an operator uses, each bounded by a deadline and cancellable by
// an AbortSignal; the step helper runStep lives in run.ts. Bad input is an INVALID_ARGUMENT
// IdemError naming the field, found before any call.
import * as fs from 'fs';
import * as grpc from '@grpc/grpc-js';
import { IdemError, invalid } from './errors';
import { Journal } from './journal';
import { Transport } from './transport';
import {
  BeginResult, FailureMode, Outcome, OUTCOME_WORDS, Policy, Saga, StepKey, StepRecord,
  beginFromWire, keyToWire, modeFromWire, modeToWire, outcomeToWire, policyFromWire,
  recordFromWire,
} from './types';
import {
  BODY_MAX, FINGERPRINT_MAX, checkAddress, checkGlobalId, checkKey, checkName, checkTenant, toBytes,
} from './validate';
import { nowMs } from './time';
import { RunOptions, RunReport, StepAction, runStep } from './run';
import { TracerProvider, checkTraceHeaders, traceMetadata } from './trace';
import type { BeginOptions, CallOptions, CompleteInput } from './types';
export type { BeginOptions, CallOptions, CompleteInput } from './types';

export interface ConnectOptions {
  /** "host:port", a list "h1:p1,h2:p2", or an array of them (high availability: calls go to
   *  the leader, found from standbys' idem-leader answers or by trying the next address) */
  address: string | string[];
  /** sent as idem-tenant; a server with authentication on ignores it */
  tenant?: string;
  /** sent as "authorization: Bearer TOKEN" */
  token?: string;
  /** per call, ms; default 2000 */
  deadlineMs?: number;
  /** the unguarded-execution journal (fail-open, docs/api.md §20); none: a fail-open step is
   *  refused like a fail-closed one when no coordinator can decide */
  journalPath?: string;
  /** how long a fetched policy is fresh, ms; default 30000; < 0 never fetch */
  policyRefreshMs?: number;
  /** TLS: on when true or when any tls* file is given. Files are PEM paths (or Buffers),
   *  read by connect: an unreadable one is INVALID_ARGUMENT naming the field. */
  tls?: boolean;
  tlsCa?: string | Buffer;
  tlsCert?: string | Buffer;
  tlsKey?: string | Buffer;
  /** the name the server's certificate must carry instead of the address's host */
  tlsServerName?: string;
  /** makes runStep's idem.step spans (docs/sdk-node.md); default @opentelemetry/api's global
   *  provider. Every call sends its context's traceparent either way. */
  tracerProvider?: TracerProvider;
}

export interface Resolution extends CompleteInput {
  reason: string;
  actor?: string;
}

interface PolicyEntry {
  mode?: FailureMode;
  leaseMs: number;
  triedMs: number;
  fetchedMs: number;
}

function readPem(field: string, v: string | Buffer | undefined): Buffer | undefined {
  if (v === undefined) return undefined;
  if (Buffer.isBuffer(v)) return v;
  try {
    return fs.readFileSync(v);
  } catch (e) {
    throw invalid(field, `cannot read ${v}: ${(e as Error).message}`);
  }
}


function checkOutcome(field: string, o: unknown): Outcome {
  if (!OUTCOME_WORDS.includes(o as Outcome))
    throw invalid(field, 'must be "succeeded", "failed", "retryable" or "unknown"');
  return o as Outcome;
}

function checkMs(field: string, v: unknown, max: number): number {
  if (v === undefined) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max)
    throw invalid(field, `must be an integer from 0 to ${max}`);
  return v;
}

export class IdemClient {
  /** the tenant named in journal lines ("default" when none was given) */
  readonly tenant: string;
  readonly deadlineMs: number;
  /** @internal */ readonly tracerProvider: TracerProvider | undefined;
  /** @internal */ readonly transport: Transport;
  /** @internal */ readonly journal: Journal | undefined;
  private readonly policyRefreshMs: number;
  private readonly policies = new Map<string, PolicyEntry>();

  private constructor(o: ConnectOptions, addresses: string[]) {
    this.tenant = o.tenant ?? 'default';
    this.deadlineMs = o.deadlineMs && o.deadlineMs > 0 ? o.deadlineMs : 2000;
    this.tracerProvider = o.tracerProvider;
    this.policyRefreshMs = o.policyRefreshMs ?? 30000;
    this.journal = o.journalPath ? new Journal(o.journalPath) : undefined;
    const ca = readPem('tlsCa', o.tlsCa);
    const cert = readPem('tlsCert', o.tlsCert);
    const key = readPem('tlsKey', o.tlsKey);
    if (!!cert !== !!key) throw invalid(cert ? 'tlsKey' : 'tlsCert', 'mutual TLS needs both tlsCert and tlsKey');
    const useTls = !!(o.tls || ca || cert || key || o.tlsServerName);
    const credentials = useTls ? grpc.credentials.createSsl(ca ?? null, key ?? null, cert ?? null)
      : grpc.credentials.createInsecure();
    const channelOptions: grpc.ChannelOptions = {
      'grpc.primary_user_agent': 'idem-client-node/0.2.0',
      // a restarted or newly elected node must not sit behind the default reconnect backoff
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1000,
    };
    if (o.tlsServerName) {
      channelOptions['grpc.ssl_target_name_override'] = o.tlsServerName;
      channelOptions['grpc.default_authority'] = o.tlsServerName;
    }
    const tenant = o.tenant;
    const auth = o.token ? `Bearer ${o.token}` : undefined;
    this.transport = new Transport({
      addresses, credentials, channelOptions,
      metadata: () => {
        const md = new grpc.Metadata();
        if (tenant !== undefined) md.set('idem-tenant', tenant);
        if (auth) md.set('authorization', auth);
        return md;
      },
    });
  }

  /** Creates a client (channels connect lazily). Throws an INVALID_ARGUMENT IdemError naming
   *  the field for a malformed address, tenant, deadline or unreadable TLS file. */
  static connect(o: ConnectOptions): IdemClient {
    if (!o || typeof o !== 'object') throw invalid('options', 'are missing');
    const list = (Array.isArray(o.address) ? o.address : [o.address])
      .flatMap((a) => (typeof a === 'string' ? a.split(',') : [a]))
      .map((a) => (typeof a === 'string' ? a.trim() : a))
      .filter((a) => a !== '');
    if (list.length === 0) throw invalid('address', 'is missing');
    if (list.length > 16) throw invalid('address', 'names more than 16 coordinators');
    const addresses = list.map((a) => checkAddress('address', a));
    if (o.tenant !== undefined) checkTenant('tenant', o.tenant);
    if (o.token !== undefined && (typeof o.token !== 'string' || !/^[\x21-\x7e]+$/.test(o.token)))
      throw invalid('token', 'must be printable ASCII without spaces');
    if (o.deadlineMs !== undefined && (typeof o.deadlineMs !== 'number' || !(o.deadlineMs >= 0)))
      throw invalid('deadlineMs', 'must be a number >= 0');
    if (o.journalPath !== undefined && typeof o.journalPath !== 'string')
      throw invalid('journalPath', 'must be a path');
    return new IdemClient(o, addresses);
  }

  /** Closes every channel; calls in flight fail. */
  close(): void {
    this.transport.close();
  }

  /** @internal */
  call(service: 'coordinator' | 'admin', method: string, req: unknown, co: CallOptions = {},
       extraMs = 0, repeatable = true): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
    const deadlineMs = co.deadlineMs && co.deadlineMs > 0 ? co.deadlineMs : this.deadlineMs;
    checkTraceHeaders('traceparent', co);
    return this.transport.unary(service, method, req, {
      timeoutMs: deadlineMs + extraMs, signal: co.signal, repeatable, metadata: traceMetadata(co.context, co),
    });
  }

  /* --- sagas ---------------------------------------------------------------------------------- */

  /** BeginSaga: a new global id (UUIDv7); with a requestId, a repeat returns the same id with
   *  created = false. */
  async beginSaga(o: { requestId?: string; sagaType?: string; labels?: Record<string, string> } = {},
                  co?: CallOptions): Promise<{ globalId: string; created: boolean; createdUnixMs: number }> {
    if (o.requestId !== undefined && !/^[\x20-\x7e]{1,255}$/.test(o.requestId))
      throw invalid('requestId', 'must be 1-255 printable ASCII characters');
    const req = { request_id: o.requestId ?? '', saga_type: o.sagaType ?? '', labels: o.labels ?? {} };
    const r = await this.call('coordinator', 'BeginSaga', req, co, 0, !!o.requestId);
    return { globalId: String(r.global_id), created: !!r.created, createdUnixMs: Number(r.created_unix_ms) };
  }

  /** GetSaga: the saga and all its steps (follows the server's pages, one call each). */
  async getSaga(globalId: string, co?: CallOptions): Promise<Saga> {
    checkGlobalId('globalId', globalId);
    let token = '';
    let saga: Saga | undefined;
    for (let pages = 0; pages < 100000; pages++) {
      const r = await this.call('coordinator', 'GetSaga', { global_id: globalId, page_token: token }, co);
      if (!saga) {
        saga = {
          globalId: String(r.global_id), sagaType: String(r.saga_type ?? ''),
          createdUnixMs: Number(r.created_unix_ms), labels: { ...(r.labels ?? {}) }, steps: [],
        };
      }
      for (const s of r.steps ?? []) saga.steps.push(recordFromWire(s));
      token = String(r.next_page_token ?? '');
      if (!token) return saga;
    }
    throw new IdemError('BAD_RESPONSE', 'GetSaga pages do not end');
  }

  /* --- steps (raw) ---------------------------------------------------------------------------- */

  /** LookupStep: the step's record (NOT_FOUND when none). */
  async lookup(key: StepKey, co?: CallOptions): Promise<StepRecord> {
    checkKey(key);
    return recordFromWire(await this.call('coordinator', 'LookupStep', { key: keyToWire(key) }, co));
  }

  /** BeginStep. With waitMs the coordinator holds the call while the step is in progress. */
  async beginStep(key: StepKey, o: BeginOptions = {}, co?: CallOptions): Promise<BeginResult> {
    checkKey(key);
    const fp = toBytes('fingerprint', o.fingerprint, FINGERPRINT_MAX);
    const leaseMs = checkMs('leaseMs', o.leaseMs, 3600000);
    const waitMs = checkMs('waitMs', o.waitMs, 60000);
    const req = { key: keyToWire(key), fingerprint: fp, lease_ms: leaseMs, wait_ms: waitMs };
    const r = await this.call('coordinator', 'BeginStep', req, co, waitMs);
    // every answer names the operation's failure mode (none from an older coordinator)
    const mode = modeFromWire(r.failure_mode);
    if (mode && this.policyRefreshMs >= 0) {
      const k = `${key.service}\0${key.operation}`;
      const e = this.policies.get(k) ?? { leaseMs: 0, triedMs: 0, fetchedMs: 0 };
      e.mode = mode;
      e.triedMs = e.fetchedMs = nowMs();
      this.policies.set(k, e);
    }
    return beginFromWire(r);
  }

  /** CompleteStep for attempt. */
  async completeStep(key: StepKey, attempt: number, res: CompleteInput, co?: CallOptions): Promise<StepRecord> {
    checkKey(key);
    if (!Number.isInteger(attempt) || attempt < 1) throw invalid('attempt', 'must be an integer >= 1');
    if (!res || typeof res !== 'object') throw invalid('result', 'is missing');
    const outcome = checkOutcome('outcome', res.outcome);
    const body = toBytes('body', res.body, BODY_MAX);
    const req = { key: keyToWire(key), attempt, outcome: outcomeToWire(outcome), code: res.code ?? 0, body };
    const r = await this.call('coordinator', 'CompleteStep', req, co);
    return recordFromWire(r.record ?? {});
  }

  /** ExtendLease: pushes the lease of attempt forward (leaseMs 0 = the policy's). */
  async extendLease(key: StepKey, attempt: number, leaseMs = 0, co?: CallOptions): Promise<{ leaseExpiresUnixMs: number }> {
    checkKey(key);
    if (!Number.isInteger(attempt) || attempt < 1) throw invalid('attempt', 'must be an integer >= 1');
    checkMs('leaseMs', leaseMs, 3600000);
    const r = await this.call('coordinator', 'ExtendLease', { key: keyToWire(key), attempt, lease_ms: leaseMs }, co);
    return { leaseExpiresUnixMs: Number(r.lease_expires_unix_ms) };
  }

  /* --- policies ------------------------------------------------------------------------------- */

  /** GetPolicy: the effective policy of (service, operation); also refreshes the cache. */
  async getPolicy(service: string, operation: string, co?: CallOptions): Promise<Policy> {
    checkName('service', service);
    checkName('operation', operation);
    const k = `${service}\0${operation}`;
    const e = this.policies.get(k) ?? { leaseMs: 0, triedMs: 0, fetchedMs: 0 };
    e.triedMs = nowMs();
    this.policies.set(k, e);
    const r = await this.call('coordinator', 'GetPolicy', { service, operation }, co);
    const mode = modeFromWire(r.failure_mode);
    if (mode) {
      e.mode = mode;
      e.leaseMs = Number(r.lease_ms) || 0;
      e.fetchedMs = nowMs();
    }
    return policyFromWire(r);
  }

  /** Fetches the policy now, so an outage right after start-up is handled by the operation's
   *  failure mode rather than as "never known". */
  async prefetchPolicy(service: string, operation: string, co?: CallOptions): Promise<void> {
    await this.getPolicy(service, operation, co);
  }

  /** Admin.SetPolicy (admin role). service/operation may be "*". */
  async setPolicy(p: { service: string; operation: string; failureMode: FailureMode; retentionS?: number;
                       leaseMs?: number; keyRetentionS?: number }, co?: CallOptions): Promise<Policy> {
    if (!p || typeof p !== 'object') throw invalid('policy', 'is missing');
    checkName('service', p.service, true);
    checkName('operation', p.operation, true);
    if (p.failureMode !== 'fail-open' && p.failureMode !== 'fail-closed')
      throw invalid('failureMode', 'must be "fail-open" or "fail-closed"');
    const req = {
      service: p.service, operation: p.operation, failure_mode: modeToWire(p.failureMode),
      retention_s: p.retentionS || 86400, lease_ms: p.leaseMs || 30000, key_retention_s: p.keyRetentionS ?? 0,
    };
    return policyFromWire(await this.call('admin', 'SetPolicy', req, co));
  }

  /** Admin.DeletePolicy: whether the tenant had that row. */
  async deletePolicy(service: string, operation: string, co?: CallOptions): Promise<boolean> {
    checkName('service', service, true);
    checkName('operation', operation, true);
    return !!(await this.call('admin', 'DeletePolicy', { service, operation }, co)).deleted;
  }

  /** Admin.ResolveStep: settles a stuck IN_PROGRESS or UNKNOWN step by hand. After a lost try
   *  a SUCCEEDED or FAILED resolution is repeated (a repeat of the resolution that settled the
   *  step is answered OK); a RETRYABLE one is not: the lost try may have released the step and a
   *  new attempt begun, which a repeat (no attempt in the request to fence it) would release
   *  while its caller still runs. The error then has outcomeUnknown set (docs/api.md §20). */
  async resolveStep(key: StepKey, r: Resolution, co?: CallOptions): Promise<StepRecord> {
    checkKey(key);
    if (!r || typeof r !== 'object') throw invalid('resolution', 'is missing');
    const outcome = checkOutcome('outcome', r.outcome);
    if (!r.reason) throw invalid('reason', 'is empty');
    const req = {
      key: keyToWire(key), outcome: outcomeToWire(outcome), code: r.code ?? 0,
      body: toBytes('body', r.body, BODY_MAX), reason: r.reason, actor: r.actor ?? '',
    };
    return recordFromWire(await this.call('admin', 'ResolveStep', req, co, 0, outcome !== 'retryable'));
  }

  /** Admin.GetStatus of the node calls go to. */
  async getStatus(co?: CallOptions): Promise<{ nodeId: string; leader: boolean; leaderAddress: string; epoch: number;
                                               storeOk: boolean; electionOk: boolean; version: string }> {
    const r = await this.call('admin', 'GetStatus', {}, co);
    return {
      nodeId: String(r.node_id), leader: !!r.leader, leaderAddress: String(r.leader_address),
      epoch: Number(r.epoch), storeOk: !!r.store_ok, electionOk: !!r.election_ok, version: String(r.version),
    };
  }

  /* --- the step helper ------------------------------------------------------------------------ */

  /** Runs one guarded step (see run.ts): BeginStep → action on PROCEED → CompleteStep; REPLAY
   *  returns the stored result without running it. */
  runStep(key: StepKey, action: StepAction, o?: RunOptions): Promise<RunReport> {
    return runStep(this, key, action, o);
  }

  /* --- the policy cache (internal) ------------------------------------------------------------ */

  /** @internal Fetches the policy when the cached copy is older than policyRefreshMs (one
   *  fetch per period, whatever its result). */
  async refreshPolicy(service: string, operation: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.policyRefreshMs < 0) return;
    const e = this.policies.get(`${service}\0${operation}`);
    if (e && nowMs() - e.triedMs < this.policyRefreshMs) return;
    try {
      await this.getPolicy(service, operation, { deadlineMs: timeoutMs, signal });
    } catch {
      /* a failed fetch keeps the old copy until the next period */
    }
  }

  /** @internal */
  cachedPolicy(service: string, operation: string): { mode?: FailureMode; leaseMs: number } | undefined {
    return this.policies.get(`${service}\0${operation}`);
  }
}

