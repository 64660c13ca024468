// errors.ts — IdemError: every failure of the SDK, as a value that carries the gRPC code name,
// the coordinator's idem-reason (docs/api.md §5), the leader it named, its retry hint, the
// message and the coordinator's detail and hint. Decide on code and reason, never on the message.
import * as grpc from '@grpc/grpc-js';

/** gRPC's code names, plus the SDK's own: STEP_FAILED (the action reported retryable),
 *  STEP_UNKNOWN (runStep lost a try and its deadline passed before an answer said what the step
 *  did: outcomeUnknown is set, report too when the action ran; docs/api.md §20), BAD_RESPONSE
 *  (the coordinator's answer could not be used). */
export type IdemCode =
  | 'CANCELLED' | 'UNKNOWN' | 'INVALID_ARGUMENT' | 'DEADLINE_EXCEEDED' | 'NOT_FOUND'
  | 'ALREADY_EXISTS' | 'PERMISSION_DENIED' | 'RESOURCE_EXHAUSTED' | 'FAILED_PRECONDITION'
  | 'ABORTED' | 'OUT_OF_RANGE' | 'UNIMPLEMENTED' | 'INTERNAL' | 'UNAVAILABLE' | 'DATA_LOSS'
  | 'UNAUTHENTICATED' | 'STEP_FAILED' | 'STEP_UNKNOWN' | 'BAD_RESPONSE';

export interface IdemErrorFields {
  /** the coordinator's idem-reason word; '' when no coordinator answered or the SDK failed */
  reason?: string;
  /** UNAVAILABLE from a standby: the leader's host:port it named; '' otherwise */
  leader?: string;
  /** the coordinator's idem-detail (more about what happened) and idem-hint (what to do about
   *  it); '' when none. For people: decide on code and reason, never on these (docs/api.md §5) */
  detail?: string;
  hint?: string;
  /** ABORTED because the step is in progress: the coordinator's idem-retry-after-ms; 0 otherwise */
  retryAfterMs?: number;
  /** DEADLINE_EXCEEDED / UNAVAILABLE / a CANCELLED the caller did not cause, after the request
   *  was sent, or a repeat after that refused: the coordinator may have acted. Not set on a
   *  refusal that proves no try acted (BeginStep fingerprint-mismatch; CompleteStep
   *  finished-differently, or lease-lost of a SUCCEEDED or FAILED outcome: docs/api.md §20) */
  outcomeUnknown?: boolean;
  /** INVALID_ARGUMENT found by the SDK before any call: the offending field */
  field?: string;
  /** the gRPC status code number, when the error came from a call */
  grpcCode?: number;
  /** runStep: the report of a run whose action did run (STEP_FAILED, lease lost, a failed
   *  Complete, a journal that could not be written) */
  report?: unknown;
}

export class IdemError extends Error {
  readonly code: IdemCode;
  readonly reason: string;
  readonly leader: string;
  readonly detail: string;
  readonly hint: string;
  readonly retryAfterMs: number;
  outcomeUnknown: boolean;
  readonly field: string;
  readonly grpcCode: number | undefined;
  report: unknown;

  constructor(code: IdemCode, message: string, f: IdemErrorFields = {}) {
    super(message);
    this.name = 'IdemError';
    this.code = code;
    this.reason = f.reason ?? '';
    this.leader = f.leader ?? '';
    this.detail = f.detail ?? '';
    this.hint = f.hint ?? '';
    this.retryAfterMs = f.retryAfterMs ?? 0;
    this.outcomeUnknown = f.outcomeUnknown ?? false;
    this.field = f.field ?? '';
    this.grpcCode = f.grpcCode;
    this.report = f.report;
  }
}

/** The code name of a gRPC status number ('UNKNOWN' for one out of range). */
export function codeName(code: number): IdemCode {
  const name = (grpc.status as unknown as Record<number, string>)[code];
  return (typeof name === 'string' && name !== 'OK' ? name : 'UNKNOWN') as IdemCode;
}

/** An INVALID_ARGUMENT found before any call, naming the field. */
export function invalid(field: string, what: string): IdemError {
  return new IdemError('INVALID_ARGUMENT', `${field}: ${what}`, { field, reason: '' });
}

function mdString(md: grpc.Metadata | undefined, name: string): string {
  if (!md) return '';
  const v = md.get(name);
  if (v.length === 0) return '';
  const s = v[0];
  return typeof s === 'string' ? s : s.toString('utf8');
}

/** An IdemError from a failed grpc-js call (its trailers carry the coordinator's details). */
export function fromServiceError(e: grpc.ServiceError): IdemError {
  const md = e.metadata;
  const reason = mdString(md, 'idem-reason');
  const hasLeader = md ? md.get('idem-leader').length > 0 : false;
  const leader = mdString(md, 'idem-leader');
  const ra = Number.parseInt(mdString(md, 'idem-retry-after-ms'), 10);
  let code = codeName(e.code);
  // Every answer of a coordinator carries idem-reason (docs/api.md §5): an INTERNAL or UNKNOWN
  // without one is grpc-js's own (a connection reset or closed mid-call, "Received RST_STREAM"),
  // i.e. no coordinator answered: the same as UNAVAILABLE.
  if (!reason && (code === 'INTERNAL' || code === 'UNKNOWN')) code = 'UNAVAILABLE';
  // gRPC cannot tell whether an UNAVAILABLE came before or after the request reached the
  // coordinator, unless a standby named the leader (it did nothing): be conservative.
  const outcomeUnknown = code === 'DEADLINE_EXCEEDED' || (code === 'UNAVAILABLE' && !hasLeader);
  return new IdemError(code, e.details || code.toLowerCase().replace(/_/g, ' '), {
    reason,
    leader,
    detail: mdString(md, 'idem-detail'),
    hint: mdString(md, 'idem-hint'),
    retryAfterMs: Number.isFinite(ra) && ra > 0 ? ra : 0,
    outcomeUnknown,
    grpcCode: e.code,
  });
}

/** Whether the error came from a standby that named the leader (nothing was done there). */
export function fromStandby(e: IdemError): boolean {
  return e.code === 'UNAVAILABLE' && !e.outcomeUnknown;
}
