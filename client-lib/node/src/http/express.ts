// express.ts — idempotency(): the Idempotency-Key middleware for Express (and any connect-style
// (req, res, next) stack), as docs/api.md §19 and docs/http-middleware.md say. For a wrapped
// route it parses the key (400 problem when missing or malformed), reads the request body,
// and runs the route's handler through the client's step helper under the step key
// (global id from the key, service, operation from the route) with the request's fingerprint:
//   first request → the handler runs; its answer is held, stored, then sent;
//   finished → the stored answer, with Idempotent-Replayed: true (and Idempotent-Body-Omitted
//   when it was too large to keep); in progress → 409 (or waits, option wait); another request
//   with the key → 422; no coordinator can decide → 503 (fail-closed) or the handler runs
//   unguarded and is journaled (fail-open, docs/api.md §20).
// A handler's 5xx is stored as retryable (the next retry runs again); 2xx/3xx succeeded, 4xx failed.
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'http';
import type { IdemClient } from '../client';
import { IdemError, invalid } from '../errors';
import type { Outcome } from '../types';
import { checkName } from '../validate';
import { KEY_RULES, keyGlobalId, parseIdempotencyKey, requestFingerprint, routeOperation } from './key';
import { problem, sendProblem } from './problem';
import { decodeStored, encodeStored } from './stored';

export interface IdempotencyOptions {
  client: IdemClient;
  /** the step's service name ([a-z0-9._-], 1-64) */
  service: string;
  /** the step's operation: a name, or one from the request; default method and path
   *  (routeOperation) */
  operation?: string | ((req: IncomingMessage) => string);
  /** response headers stored and replayed, in this order (default ["content-type"]) */
  keepHeaders?: string[];
  /** a response body larger than this is stored without it (default 32768 bytes) */
  maxBodyBytes?: number;
  /** the same key while the first request runs: false (default) answers 409 at once; true or a
   *  number of ms waits that long for the first to finish (true = the deadline) */
  wait?: boolean | number;
  /** how long the middleware may take to get a decision (retries included), ms; default 3000 */
  deadlineMs?: number;
  /** the handler's lease (0 = the policy's); it is extended while the handler runs */
  leaseMs?: number;
  /** where the problem documents' types point (default "docs/http-middleware.md") */
  problemBase?: string;
  /** the largest request body read, bytes (default 1 MiB); more is answered 413 */
  requestBodyLimit?: number;
}

type Next = (err?: unknown) => void;
type Req = IncomingMessage & { body?: unknown; rawBody?: Buffer; originalUrl?: string; idempotencyKey?: string };

function readBody(req: Req, limit: number): Promise<Buffer | 'too-large'> {
  if (Buffer.isBuffer(req.body)) return Promise.resolve(req.body);
  if (Buffer.isBuffer(req.rawBody)) return Promise.resolve(req.rawBody);
  if (req.readableEnded || req.body !== undefined)
    return Promise.reject(new Error('idempotency middleware: the request body was already read; mount it before body parsers (or use express.raw())'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > limit) over = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(over ? 'too-large' : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function isJson(req: IncomingMessage): boolean {
  const t = String(req.headers['content-type'] ?? '').toLowerCase();
  return /^application\/([a-z0-9.+-]*\+)?json\b/.test(t);
}

function outcomeOf(status: number): Outcome {
  if (status >= 500) return 'retryable';
  if (status >= 400) return 'failed';
  return 'succeeded';
}

interface Captured {
  status: number;
  body: Buffer;
}

/** Holds the handler's answer (writeHead/write/end) until flush(); resolves done once it ended. */
function capture(res: ServerResponse): { done: Promise<Captured>; flush: (c: Captured) => void } {
  const orig = { writeHead: res.writeHead, write: res.write, end: res.end };
  const chunks: Buffer[] = [];
  let resolve!: (c: Captured) => void;
  const done = new Promise<Captured>((r) => { resolve = r; });
  const toBuf = (chunk: unknown, enc?: unknown): Buffer | undefined => {
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return undefined;
    if (Buffer.isBuffer(chunk)) return chunk;
    if (chunk instanceof Uint8Array) return Buffer.from(chunk);
    return Buffer.from(String(chunk), (typeof enc === 'string' ? enc : 'utf8') as BufferEncoding);
  };
  const r = res as unknown as Record<string, unknown>;
  r.writeHead = function writeHead(status: number, a?: unknown, b?: unknown) {
    res.statusCode = status;
    if (typeof a === 'string') res.statusMessage = a;
    const headers = (typeof a === 'string' ? b : a) as OutgoingHttpHeaders | string[] | undefined;
    if (Array.isArray(headers)) {
      for (let i = 0; i + 1 < headers.length; i += 2) res.setHeader(headers[i], headers[i + 1]);
    } else if (headers) {
      for (const [k, v] of Object.entries(headers)) if (v !== undefined) res.setHeader(k, v as string);
    }
    return res;
  };
  r.write = function write(chunk: unknown, enc?: unknown, cb?: unknown) {
    const b = toBuf(chunk, enc);
    if (b) chunks.push(b);
    const f = typeof enc === 'function' ? enc : cb;
    if (typeof f === 'function') process.nextTick(f as () => void);
    return true;
  };
  r.end = function end(chunk?: unknown, enc?: unknown, cb?: unknown) {
    const b = toBuf(chunk, enc);
    if (b) chunks.push(b);
    const f = typeof chunk === 'function' ? chunk : typeof enc === 'function' ? enc : cb;
    if (typeof f === 'function') res.once('finish', f as () => void);
    resolve({ status: res.statusCode, body: Buffer.concat(chunks) });
    return res;
  };
  const flush = (c: Captured) => {
    Object.assign(r, orig);
    if (res.headersSent) return;
    res.statusCode = c.status;
    if (!res.hasHeader('transfer-encoding')) res.setHeader('Content-Length', String(c.body.length));
    res.end(c.body);
  };
  return { done, flush };
}

/** The Idempotency-Key middleware for the routes it is mounted on. */
export function idempotency(o: IdempotencyOptions): (req: IncomingMessage, res: ServerResponse, next: Next) => void {
  if (!o || typeof o !== 'object') throw invalid('options', 'are missing');
  if (!o.client || typeof o.client.runStep !== 'function') throw invalid('client', 'must be an IdemClient');
  checkName('service', o.service);
  if (typeof o.operation === 'string') checkName('operation', o.operation);
  const keep = (o.keepHeaders ?? ['content-type']).map((h) => h.toLowerCase());
  const maxBody = o.maxBodyBytes ?? 32768;
  const base = o.problemBase ?? 'docs/http-middleware.md';
  const deadlineMs = o.deadlineMs ?? 3000;
  const bodyLimit = o.requestBodyLimit ?? 1024 * 1024;
  const waitMode = o.wait === undefined || o.wait === false ? 'fail' : 'wait';
  const runDeadline = typeof o.wait === 'number' ? Math.max(o.wait, deadlineMs) : deadlineMs;

  return (req0, res, next) => {
    const req = req0 as Req;
    const raw = req.headers['idempotency-key'];
    const parsed = parseIdempotencyKey(Array.isArray(raw) ? raw.join(', ') : raw);
    if (parsed.error !== undefined) {
      const c = parsed.error === 'missing' ? 'key-missing' : 'key-malformed';
      const shown = typeof raw === 'string' ? ` (Idempotency-Key: ${JSON.stringify(raw.slice(0, 300))})` : '';
      sendProblem(res, problem(base, c, `rule ${parsed.error}: ${KEY_RULES[parsed.error]}${shown}`));
      return;
    }
    const key = parsed.key;
    req.idempotencyKey = key;
    const target = req.originalUrl ?? req.url ?? '/';
    const method = req.method ?? 'GET';
    let operation: string;
    try {
      operation = typeof o.operation === 'function' ? checkName('operation', o.operation(req))
        : o.operation ?? routeOperation(method, target);
    } catch (e) {
      next(e);
      return;
    }
    const stepKey = { globalId: keyGlobalId(key), service: o.service, operation, phase: 'forward' as const };
    const q = JSON.stringify(key);

    readBody(req, bodyLimit).then(async (body) => {
      if (body === 'too-large') {
        res.statusCode = 413;
        res.end();
        return;
      }
      req.rawBody = body;
      if (req.body === undefined) {
        req.body = body;
        if (isJson(req) && body.length > 0) {
          try {
            req.body = JSON.parse(body.toString('utf8'));
          } catch { /* the handler sees the Buffer */ }
        }
      }
      let held: { done: Promise<Captured>; flush: (c: Captured) => void } | undefined;
      let got: Captured | undefined;
      const fingerprint = requestFingerprint(method, target, body);
      try {
        const rep = await o.client.runStep(stepKey, async () => {
          held = capture(res);
          next();
          got = await held.done;
          const headers: [string, string][] = [];
          for (const name of keep) {
            const v = res.getHeader(name);
            if (v === undefined) continue;
            for (const one of Array.isArray(v) ? v : [String(v)]) headers.push([name, one]);
          }
          const { doc } = encodeStored(got.status, headers, got.body, maxBody);
          return { outcome: outcomeOf(got.status), code: got.status, body: doc };
        }, { fingerprint, deadlineMs: runDeadline, inProgress: waitMode, leaseMs: o.leaseMs });
        if (rep.ran && held && got) {
          held.flush(got);
          return;
        }
        if (rep.replayed && rep.result) {
          replay(res, rep.result.code, rep.result.body, rep.resultExpired);
          return;
        }
        // SKIP_ALREADY_COMPENSATED: the saga undid this request; nothing runs again
        sendProblem(res, problem(base, 'compensated',
          `the request with idempotency key ${q} was compensated and does not run again`));
      } catch (x) {
        if (held && got) {
          held.flush(got); // the handler ran (a 5xx it answered, or a failure after it): its answer stands
          return;
        }
        const e = x as IdemError;
        if (!(e instanceof IdemError)) {
          next(e);
          return;
        }
        if (e.code === 'ABORTED' && e.reason !== 'lease-lost') {
          sendProblem(res, problem(base, 'in-progress', `a request with idempotency key ${q} is still being processed`),
            e.retryAfterMs || 1000);
        } else if (e.code === 'FAILED_PRECONDITION' && e.reason === 'fingerprint-mismatch') {
          sendProblem(res, problem(base, 'fingerprint-mismatch',
            `rule fingerprint: idempotency key ${q} was used for another request (method, target or body differ)`));
        } else if (e.code === 'UNAVAILABLE' || e.code === 'DEADLINE_EXCEEDED') {
          sendProblem(res, problem(base, 'coordinator-unavailable',
            `rule fail-closed: no idem coordinator could decide on idempotency key ${q} (${e.reason || e.code.toLowerCase()}), and ${o.service}/${operation} fails closed`),
          e.retryAfterMs || 1000);
        } else {
          next(e);
        }
      }
    }).catch(next);
  };
}

/** Sends a stored answer with Idempotent-Replayed: true. */
function replay(res: ServerResponse, code: number, doc: Buffer, expired: boolean): void {
  const s = expired ? undefined : decodeStored(doc);
  res.statusCode = s ? s.status : code || 200;
  if (s) {
    const seen = new Map<string, string[]>();
    for (const [n, v] of s.headers) seen.set(n, [...(seen.get(n) ?? []), v]);
    for (const [n, vs] of seen) res.setHeader(n, vs.length === 1 ? vs[0] : vs);
  }
  res.setHeader('Idempotent-Replayed', 'true');
  const omitted = !s || s.bodyOmitted;
  if (omitted) res.setHeader('Idempotent-Body-Omitted', 'true');
  const body = omitted || !s ? Buffer.alloc(0) : s.body;
  res.setHeader('Content-Length', String(body.length));
  res.end(body);
}
