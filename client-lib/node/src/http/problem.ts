// problem.ts — the middleware's own error answers as RFC 9457 problem documents
// (docs/http-middleware.md): type = problem base + "#" + the case's anchor, title, status,
// detail (which rule, which key), retryable; 409 and 503 carry Retry-After in whole seconds.
import type { ServerResponse } from 'http';

export type ProblemCase = 'key-missing' | 'key-malformed' | 'fingerprint-mismatch' | 'in-progress' | 'coordinator-unavailable' | 'compensated';

const CASES: Record<ProblemCase, { status: number; title: string; retryable: boolean }> = {
  'key-missing': { status: 400, title: 'Idempotency-Key missing', retryable: false },
  'key-malformed': { status: 400, title: 'Idempotency-Key malformed', retryable: false },
  'fingerprint-mismatch': { status: 422, title: 'Idempotency-Key reused', retryable: false },
  'in-progress': { status: 409, title: 'Request in progress', retryable: true },
  'coordinator-unavailable': { status: 503, title: 'Idempotency coordinator unavailable', retryable: true },
  compensated: { status: 422, title: 'Request compensated', retryable: false },
};

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  retryable: boolean;
}

export function problem(base: string, c: ProblemCase, detail: string): Problem {
  const k = CASES[c];
  return { type: `${base}#${c}`, title: k.title, status: k.status, detail, retryable: k.retryable };
}

/** Whole seconds, rounded up from milliseconds, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil((ms > 0 ? ms : 0) / 1000));
}

/** Writes p as application/problem+json (with Retry-After when retryAfterMs is given). */
export function sendProblem(res: ServerResponse, p: Problem, retryAfterMs?: number): void {
  const body = Buffer.from(JSON.stringify(p), 'utf8');
  res.statusCode = p.status;
  res.setHeader('Content-Type', 'application/problem+json');
  res.setHeader('Content-Length', String(body.length));
  if (retryAfterMs !== undefined) res.setHeader('Retry-After', String(retryAfterSeconds(retryAfterMs)));
  res.end(body);
}
