// problem.ts — the middleware's own answers as RFC 9457 problem documents
// (docs/http-middleware.md; the table is client-lib/conformance/http-middleware.json's): type =
// problem base + "#" + the case's word, title, status, detail (which rule, which key),
// instance (urn:uuid: + a fresh UUID, also in the log line), retryable, and idempotency_key
// when the request had one; 409 and 503 carry Retry-After in whole seconds.
import { randomUUID } from 'crypto';
import type { ServerResponse } from 'http';

export type ProblemCase = 'key-missing' | 'key-malformed' | 'body-incomplete' | 'in-progress' | 'body-too-large'
  | 'fingerprint-mismatch' | 'compensated' | 'coordinator-refused' | 'middleware-error' | 'coordinator-unavailable';

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
};

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
export function problem(base: string, c: ProblemCase, detail: string, key?: string): Problem {
  const k = PROBLEMS[c];
  const p: Problem = { type: `${base}#${c}`, title: k.title, status: k.status, detail, instance: `urn:uuid:${randomUUID()}`,
    retryable: k.retryable };
  if (key !== undefined) p.idempotency_key = key;
  return p;
}

/** Whole seconds, rounded up from milliseconds, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil((ms > 0 ? ms : 0) / 1000));
}

/** Writes p as application/problem+json (with Retry-After when it is retryable). */
export function sendProblem(res: ServerResponse, p: Problem, retryAfterMs?: number): void {
  const body = Buffer.from(JSON.stringify(p), 'utf8');
  if (res.headersSent || res.destroyed) return;
  res.statusCode = p.status;
  res.setHeader('Content-Type', 'application/problem+json');
  res.setHeader('Content-Length', String(body.length));
  if (p.retryable) res.setHeader('Retry-After', String(retryAfterSeconds(retryAfterMs ?? 1000)));
  res.end(body);
}
