// problem.ts — the middleware's own answers as RFC 9457 problem documents
// (docs/http-middleware.md; the table is client-lib/conformance/http-middleware.json's): type =
// problem base + "#" + the case's word, title, status, detail (which rule, which key),
// instance (urn:uuid: + a fresh UUID, also in the log line), retryable, and idempotency_key
// when the request had one; 409 and 503 carry Retry-After in whole seconds.
import { randomUUID } from 'crypto';
import { REASONS } from '../reasons';
import type { ServerResponse } from 'http';

export type ProblemCase = 'key-missing' | 'key-malformed' | 'body-incomplete' | 'in-progress' | 'body-too-large'
  | 'fingerprint-mismatch' | 'compensated' | 'coordinator-refused' | 'middleware-error' | 'coordinator-unavailable'
  | 'target-malformed' | 'body-malformed' | 'stored-answer-invalid';

/** The example servers' own problems (http-middleware.json example_server.problems). */
export type ServerProblemCase = 'request-malformed' | 'not-found' | 'method-not-allowed' | 'header-too-large';

export const PROBLEMS: Record<ProblemCase, { status: number; title: string; retryable: boolean }> = {
  'key-missing': { status: 400, title: 'Idempotency-Key missing', retryable: false },
  'key-malformed': { status: 400, title: 'Idempotency-Key malformed', retryable: false },
  'body-incomplete': { status: 400, title: 'Request body incomplete', retryable: false },
  'in-progress': { status: 409, title: 'Request in progress', retryable: true },
  'body-too-large': { status: 413, title: 'Request body too large', retryable: false },
  'fingerprint-mismatch': { status: 422, title: 'Idempotency-Key reused', retryable: false },
  compensated: { status: 422, title: 'Request compensated', retryable: false },
  'coordinator-refused': { status: 500, title: 'Idempotency coordinator refused the middleware', retryable: false },
  'middleware-error': { status: 500, title: 'Idempotency middleware error', retryable: false },
  'coordinator-unavailable': { status: 503, title: 'Idempotency coordinator unavailable', retryable: true },
  'target-malformed': { status: 400, title: 'Request target malformed', retryable: false },
  'body-malformed': { status: 400, title: 'Request body framing malformed', retryable: false },
  'stored-answer-invalid': { status: 500, title: 'Stored answer invalid', retryable: false },
};

export const SERVER_PROBLEMS: Record<ServerProblemCase, { status: number; title: string; retryable: boolean }> = {
  'request-malformed': { status: 400, title: 'Request malformed', retryable: false },
  'not-found': { status: 404, title: 'Not found', retryable: false },
  'method-not-allowed': { status: 405, title: 'Method not allowed', retryable: false },
  'header-too-large': { status: 431, title: 'Request header fields too large', retryable: false },
};

/** The problem a coordinator error maps to (http-middleware.json coordinator_errors): every
 *  ABORTED (lease-lost included) is in-progress; FAILED_PRECONDITION with fingerprint-mismatch
 *  or no reason is fingerprint-mismatch; UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT
 *  are coordinator-refused; anything else coordinator-unavailable. */
export function problemForError(code: string, reason: string): ProblemCase {
  if (code === 'ABORTED') return 'in-progress';
  if (code === 'FAILED_PRECONDITION' && (reason === REASONS.fingerprintMismatch || reason === '')) return 'fingerprint-mismatch';
  if (code === 'UNAUTHENTICATED' || code === 'PERMISSION_DENIED' || code === 'INVALID_ARGUMENT') return 'coordinator-refused';
  return 'coordinator-unavailable';
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  retryable: boolean;
  idempotency_key?: string;
}

/** A problem document of case c; key is the request's key (undefined when it had none). */
export function problem(base: string, c: ProblemCase | ServerProblemCase, detail: string, key?: string): Problem {
  const k = c in PROBLEMS ? PROBLEMS[c as ProblemCase] : SERVER_PROBLEMS[c as ServerProblemCase];
  const p: Problem = { type: `${base}#${c}`, title: k.title, status: k.status, detail, instance: `urn:uuid:${randomUUID()}`,
    retryable: k.retryable };
  if (key !== undefined) p.idempotency_key = key;
  return p;
}

/** Whole seconds, rounded up from milliseconds, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil((ms > 0 ? ms : 0) / 1000));
}

/** Writes p as application/problem+json, with Retry-After only when it is retryable and the
 *  coordinator gave a hint (retryAfterMs > 0): never made up. */
export function sendProblem(res: ServerResponse, p: Problem, retryAfterMs?: number): void {
  const body = Buffer.from(JSON.stringify(p), 'utf8');
  if (res.headersSent || res.destroyed) return;
  res.statusCode = p.status;
  res.setHeader('Content-Type', 'application/problem+json');
  res.setHeader('Content-Length', String(body.length));
  if (p.retryable && retryAfterMs !== undefined && retryAfterMs > 0) res.setHeader('Retry-After', String(retryAfterSeconds(retryAfterMs)));
  res.end(body);
}

/** The problem of a Node HTTP parser error ('clientError'): framing → body-malformed, a head
 *  over the limit → header-too-large, anything else request-malformed. */
export function clientErrorProblem(code: string | undefined): ProblemCase | ServerProblemCase {
  switch (code) {
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return 'body-malformed';
    case 'HPE_HEADER_OVERFLOW':
      return 'header-too-large';
    default:
      return 'request-malformed';
  }
}

/** The raw answer to a connection whose request Node's parser refused: a problem document (no
 *  stack, no server name), then Connection: close. */
export function clientErrorAnswer(base: string, code: string | undefined): string {
  const c = clientErrorProblem(code);
  const p = problem(base, c, `the request was refused before it reached the application (${c}${code ? `, ${code}` : ''})`);
  const body = JSON.stringify(p);
  const reason = p.status === 431 ? 'Request Header Fields Too Large' : 'Bad Request';
  return `HTTP/1.1 ${p.status} ${reason}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}
