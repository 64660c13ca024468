// express.ts — idempotency(): the Idempotency-Key middleware for Express (and any connect-style
// (req, res, next) stack), as docs/api.md §19 and docs/http-middleware.md say. For a
// wrapped method (default POST and PATCH) it parses the key (400 problem when missing or
// malformed), reads the request body in full (chunked included; 413 past the limit, 400
// body-incomplete when it ends early — no step is begun either way), and runs the route's
// handler through the client's step helper under the step key (global id from the caller's
// scope and the key, service, operation from the route) with the request's fingerprint:
//   first request → the handler runs; its answer is held up to maxBodyBytes, then stored and
//   sent; past that it streams to the client and the step is stored without its body;
//   finished → the stored answer, with Idempotent-Replayed: true (and Idempotent-Body-Omitted
//   when it was not kept); in progress → 409 (or waits, option wait); another request with the
//   key → 422; the coordinator refuses the middleware (UNAUTHENTICATED, PERMISSION_DENIED,
//   INVALID_ARGUMENT) → 500 coordinator-refused; no coordinator can decide → 503 (fail-closed)
//   or the handler runs unguarded and is journaled (fail-open, docs/api.md §20).
// Every answer it makes itself is a problem document (never next(err)), logged with its instance.
// A handler's 5xx is stored as retryable (the next retry runs again); 2xx/3xx succeeded, 4xx failed.
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'http';
import type { IdemClient } from '../client';
import { IdemError, invalid } from '../errors';
import type { Outcome } from '../types';
import { checkName } from '../validate';
import { KEY_RULES, TargetMalformed, authorizationScope, fingerprintTarget, keyGlobalId, normalizeTarget, parseIdempotencyKey, pathOperation, requestFingerprint } from './key';
import type { NormalizedTarget } from './key';
import { clientErrorAnswer, problem, problemForError, sendProblem } from './problem';
import type { Problem, ProblemCase } from './problem';
import { NEVER_KEPT, StoredInvalid, encodeStored, validateStored } from './stored';
import { parseTraceparent } from '../trace';
import type { TraceHeaders } from '../trace';

/** The longest traceparent or tracestate passed on, bytes. */
export const TRACE_MAX = 512;

/** The lines of one request header, in order (req.headers keeps only the first of some). */
function headerLines(req: IncomingMessage, name: string): string[] {
  const out: string[] = [];
  const raw = req.rawHeaders ?? [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i].toLowerCase() === name) out.push(raw[i + 1]);
  return out;
}

/** Which of a request's trace context goes to the coordinator (docs/api.md §19
 *  rule 8): one traceparent line that follows §22 and is at most 512 bytes, and beside it the
 *  tracestate lines joined with "," when that is at most 512 bytes of 0x20-0x7E. Anything else
 *  is dropped here, before the first call: never an error. */
export function keptTrace(traceparent: string[], tracestate: string[]): TraceHeaders {
  if (traceparent.length !== 1) return {};
  const tp = traceparent[0];
  if (tp.length > TRACE_MAX || !parseTraceparent(tp)) return {};
  const ts = tracestate.join(',');
  return { traceparent: tp, tracestate: tracestate.length > 0 && ts.length <= TRACE_MAX && /^[\x20-\x7e]*$/.test(ts) ? ts : undefined };
}

function incomingTrace(req: IncomingMessage): TraceHeaders {
  return keptTrace(headerLines(req, 'traceparent'), headerLines(req, 'tracestate'));
}

export interface IdempotencyOptions {
  client: IdemClient;
  /** the step's service name ([a-z0-9._-], 1-64) */
  service: string;
  /** the step's operation: a name, or one from the request; default method and path
   *  (routeOperation) */
  operation?: string | ((req: IncomingMessage) => string);
  /** the methods wrapped (default ["POST", "PATCH"]); others go to the next handler untouched */
  methods?: string[];
  /** the caller's part of the step key: two requests with one key but different scopes are two
   *  steps; default authorizationScope (hex SHA-256 of the Authorization header, "" without) */
  scope?: (req: IncomingMessage) => string;
  /** where the middleware's log lines go (one per problem it answers, naming its instance);
   *  default console.error */
  log?: (line: string) => void;
  /** response headers stored and replayed, in this order (default ["content-type"]) */
  keepHeaders?: string[];
  /** the handler's answer is held up to this many body bytes (default 65536); past it the rest
   *  streams to the client and the step is stored without its body */
  maxBodyBytes?: number;
  /** the same key while the first request runs: false (default) answers 409 at once; true or a
   *  number of ms waits that long for the first to finish (true = the deadline) */
  wait?: boolean | number;
  /** how long the middleware may take to get a decision (retries included), ms; default 5000 */
  deadlineMs?: number;
  /** the handler's lease (0 = the policy's); it is extended while the handler runs */
  leaseMs?: number;
  /** where the problem documents' types point (default "docs/http-middleware.md") */
  problemBase?: string;
  /** the largest request body read, bytes (default 1 MiB, chunked included); more is 413 */
  requestBodyLimit?: number;
}

type Next = (err?: unknown) => void;
type Req = IncomingMessage & { body?: unknown; rawBody?: Buffer; originalUrl?: string; idempotencyKey?: string };

// An upload cut short is an HTTP parse error of the connection ('clientError'): without a
// listener Node answers a bare "400 Bad Request" itself and closes. The middleware listens on
// each server it sees (unless the application does) so that a request it is reading gets its
// problem document; any other connection gets Node's own answer.
const hookedServers = new WeakSet<object>();
const problemBaseOf = new WeakMap<object, string>();
const readingOn = new WeakMap<object, () => void>();
type ClientSocket = { writable: boolean; destroy(e?: Error): void; write(s: string): boolean; end(s: string): void; _httpMessage?: { headersSent?: boolean } };

function hookServer(req: IncomingMessage, base: string): void {
  const server = (req.socket as unknown as { server?: HookableServer }).server;
  if (server) hook(server, base);
}

type HookableServer = { listenerCount(n: string): number; on(n: string, f: (...a: unknown[]) => void): void };

/** Answers every request Node's HTTP parser refuses on this server (a framing error, a lower-case
 *  method, a folded line, a head over maxHeaderSize, a control character) with a problem document
 *  (body-malformed, request-malformed, header-too-large) instead of Node's bare 400, and a body
 *  cut short while the middleware reads it with 400 body-incomplete. Call it once when the
 *  server is made (the middleware otherwise hooks a server at its first wrapped request); a
 *  server that already has a 'clientError' listener is left to it. */
export function answerClientErrors(server: unknown, problemBase = 'docs/http-middleware.md'): void {
  hook(server as HookableServer, problemBase);
}

function hook(server: HookableServer, base: string): void {
  if (hookedServers.has(server)) return;
  hookedServers.add(server);
  problemBaseOf.set(server, base);
  if (server.listenerCount('clientError') > 0) return; // the application answers these
  server.on('clientError', (err: unknown, sock: unknown) => {
    const socket = sock as ClientSocket;
    const ours = readingOn.get(socket);
    if (ours) {
      readingOn.delete(socket);
      ours();
      return;
    }
    const code = (err as { code?: string }).code;
    if (socket.writable && !socket._httpMessage?.headersSent) {
      socket.end(code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n'
        : clientErrorAnswer(problemBaseOf.get(server) ?? 'docs/http-middleware.md', code));
      setTimeout(() => socket.destroy(), 1000).unref(); // the answer is flushed first
      return;
    }
    socket.destroy(err as Error);
  });
}

function readBody(req: Req, res: ServerResponse, limit: number, base: string): Promise<Buffer | 'too-large' | 'incomplete' | 'consumed'> {
  if (Buffer.isBuffer(req.body)) return Promise.resolve(req.body);
  if (Buffer.isBuffer(req.rawBody)) return Promise.resolve(req.rawBody);
  if (req.readableEnded || req.body !== undefined) return Promise.resolve('consumed');
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.resolve('too-large'); // node drains it
  return new Promise((resolve) => {
    let chunks: Buffer[] = [];
    let n = 0;
    let settled = false;
    const done = (v: Buffer | 'too-large' | 'incomplete') => {
      if (settled) return;
      settled = true;
      readingOn.delete(req.socket);
      resolve(v);
    };
    hookServer(req, base);
    readingOn.set(req.socket, () => {
      // the connection is kept for the problem document, then closed
      res.setHeader('Connection', 'close');
      res.once('finish', () => req.socket.destroy());
      done('incomplete');
    });
    req.on('data', (c: Buffer) => {
      if (settled) return; // past the limit: read and dropped
      n += c.length;
      if (n > limit) {
        chunks = [];
        done('too-large');
      } else chunks.push(c);
    });
    // an upload cut short (fewer bytes than Content-Length, a chunked body without its last
    // chunk, the connection closed) ends as 'aborted' / 'error' / 'close' with complete false
    req.on('end', () => done(req.complete ? Buffer.concat(chunks) : 'incomplete'));
    req.on('aborted', () => done('incomplete'));
    req.on('error', () => done('incomplete'));
    req.on('close', () => done(req.complete ? Buffer.concat(chunks) : 'incomplete'));
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
  /** the answer went past the limit and was streamed (body empty) */
  streamed: boolean;
}

/** Holds the handler's answer (writeHead/write/end) up to limit body bytes until flush(); past
 *  the limit it sends what it holds and lets the rest through (backpressure included). done
 *  resolves once the handler ended its answer. */
function capture(res: ServerResponse, limit: number): { done: Promise<Captured>; flush: (c: Captured) => void } {
  const orig = { writeHead: res.writeHead, write: res.write, end: res.end };
  let chunks: Buffer[] = [];
  let held = 0;
  let streaming = false;
  let resolve!: (c: Captured) => void;
  const done = new Promise<Captured>((r) => { resolve = r; });
  const toBuf = (chunk: unknown, enc?: unknown): Buffer | undefined => {
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return undefined;
    if (Buffer.isBuffer(chunk)) return chunk;
    if (chunk instanceof Uint8Array) return Buffer.from(chunk);
    return Buffer.from(String(chunk), (typeof enc === 'string' ? enc : 'utf8') as BufferEncoding);
  };
  const r = res as unknown as Record<string, unknown>;
  const realWrite = (b: Buffer, cb?: unknown): boolean =>
    (orig.write as (c: Buffer, f?: unknown) => boolean).call(res, b, typeof cb === 'function' ? cb : undefined);
  /** past the limit: send the status, headers and what is held, then pass writes through */
  const startStreaming = () => {
    streaming = true;
    r.writeHead = orig.writeHead;
    const first = Buffer.concat(chunks);
    chunks = [];
    if (first.length > 0) realWrite(first);
  };
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
    const f = typeof enc === 'function' ? enc : cb;
    if (!streaming && b && held + b.length > limit) startStreaming();
    if (streaming) return b ? realWrite(b, f) : true;
    if (b) {
      chunks.push(b);
      held += b.length;
    }
    if (typeof f === 'function') process.nextTick(f as () => void);
    return true;
  };
  r.end = function end(chunk?: unknown, enc?: unknown, cb?: unknown) {
    const b = toBuf(chunk, enc);
    const f = typeof chunk === 'function' ? chunk : typeof enc === 'function' ? enc : cb;
    if (!streaming && b && held + b.length > limit) startStreaming();
    if (streaming) {
      Object.assign(r, orig);
      if (b) res.end(b, typeof f === 'function' ? (f as () => void) : undefined);
      else res.end(typeof f === 'function' ? (f as () => void) : undefined);
      resolve({ status: res.statusCode, body: Buffer.alloc(0), streamed: true });
      return res;
    }
    if (b) chunks.push(b);
    if (typeof f === 'function') res.once('finish', f as () => void);
    resolve({ status: res.statusCode, body: Buffer.concat(chunks), streamed: false });
    chunks = [];
    return res;
  };
  const flush = (c: Captured) => {
    Object.assign(r, orig);
    if (c.streamed || res.headersSent) return;
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
  for (const h of keep) if (NEVER_KEPT.includes(h)) throw invalid('keepHeaders', `names ${h}: ${NEVER_KEPT.join(', ')} are never kept (the middleware frames a replay itself)`);
  const maxBody = o.maxBodyBytes ?? 65536;
  const base = o.problemBase ?? 'docs/http-middleware.md';
  const deadlineMs = o.deadlineMs ?? 5000;
  const bodyLimit = o.requestBodyLimit ?? 1024 * 1024;
  const methods = new Set(o.methods ?? ['POST', 'PATCH']);
  for (const m of methods) {
    if (typeof m !== 'string' || m === '' || m.toUpperCase() !== m) throw invalid('methods', `has ${JSON.stringify(m)}: a method is an upper-case token (methods match case-sensitively)`);
  }
  const scopeOf = o.scope ?? authorizationScope;
  const log = o.log ?? ((line: string) => console.error(line));
  const waitMode = o.wait === undefined || o.wait === false ? 'fail' : 'wait';
  const runDeadline = typeof o.wait === 'number' ? Math.max(o.wait, deadlineMs) : deadlineMs;

  return (req0, res, next) => {
    const req = req0 as Req;
    const method = req.method ?? 'GET';
    if (!methods.has(method)) { // case-sensitively: "post" is not POST
      next();
      return;
    }
    const target = req.originalUrl ?? req.url ?? '/';
    /** answers a problem and logs one line naming its instance */
    const answer = (c: ProblemCase, detail: string, key?: string, retryAfterMs?: number): void => {
      const p: Problem = problem(base, c, detail, key);
      log(`idem-client http: ${method} ${target.split('?')[0]}: ${p.status} ${c} instance=${p.instance}${key !== undefined ? ` key=${JSON.stringify(key)}` : ''}: ${detail}`);
      sendProblem(res, p, retryAfterMs);
    };
    const raw = req.headers['idempotency-key'];
    const parsed = parseIdempotencyKey(Array.isArray(raw) ? raw.join(', ') : raw);
    if (parsed.error !== undefined) {
      const c = parsed.error === 'missing' ? 'key-missing' : 'key-malformed';
      const shown = typeof raw === 'string' ? ` (Idempotency-Key: ${JSON.stringify(raw.slice(0, 300))})` : '';
      answer(c, `rule ${parsed.error}: ${KEY_RULES[parsed.error]}${shown}`);
      return;
    }
    const key = parsed.key;
    req.idempotencyKey = key;
    const q = JSON.stringify(key);
    let norm: NormalizedTarget;
    try {
      norm = normalizeTarget(target);
    } catch (e) {
      if (!(e instanceof TargetMalformed)) throw e;
      answer('target-malformed', `${e.message}; the handler did not run and idempotency key ${q} was not used`, key);
      return;
    }
    let operation: string;
    let globalId: string;
    try {
      operation = typeof o.operation === 'function' ? checkName('operation', o.operation(req))
        : o.operation ?? pathOperation(method, norm.path);
      globalId = keyGlobalId(key, String(scopeOf(req)));
    } catch (e) {
      answer('middleware-error', `the operation or scope of idempotency key ${q} could not be named: ${(e as Error).message}`, key);
      return;
    }
    const stepKey = { globalId, service: o.service, operation, phase: 'forward' as const };

    // framing (docs/api.md §19 rule 7): Node's parser refuses most of it itself
    // (answerClientErrors); what it lets through is refused here, before the body is read
    const te = headerLines(req, 'transfer-encoding');
    const cls = headerLines(req, 'content-length');
    if (te.length > 1 || (te.length === 1 && te[0].trim().toLowerCase() !== 'chunked') || cls.length > 1
      || (te.length > 0 && cls.length > 0) || (cls.length === 1 && !/^[0-9]+$/.test(cls[0].trim()))) {
      res.setHeader('Connection', 'close'); // the body's end cannot be trusted
      answer('body-malformed', `the request's framing is malformed (Transfer-Encoding ${JSON.stringify(te)}, Content-Length ${JSON.stringify(cls)}): only one Content-Length of digits, or Transfer-Encoding: chunked alone; the handler did not run and idempotency key ${q} was not used`, key);
      return;
    }
    readBody(req, res, bodyLimit, base).then(async (body) => {
      if (body === 'too-large') {
        answer('body-too-large', `the request body is longer than the ${bodyLimit}-byte limit; idempotency key ${q} was not used`, key);
        return;
      }
      if (body === 'incomplete') {
        answer('body-incomplete', `the request body ended before it was complete (shorter than its Content-Length, or the upload was aborted); the handler did not run and idempotency key ${q} was not used`, key);
        return;
      }
      if (body === 'consumed') {
        answer('middleware-error', 'the request body was already read: mount the idempotency middleware before body parsers (or use express.raw())', key);
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
      const fingerprint = requestFingerprint(method, fingerprintTarget(norm), body);
      try {
        const rep = await o.client.runStep(stepKey, async () => {
          held = capture(res, maxBody);
          next();
          got = await held.done;
          const headers: [string, string][] = [];
          for (const name of keep) {
            const v = res.getHeader(name);
            if (v === undefined) continue;
            for (const one of Array.isArray(v) ? v : [String(v)]) headers.push([name, one]);
          }
          const { doc } = encodeStored(got.status, headers, got.body, got.streamed ? -1 : maxBody);
          return { outcome: outcomeOf(got.status), code: got.status, body: doc };
        }, { fingerprint, deadlineMs: runDeadline, inProgress: waitMode, leaseMs: o.leaseMs, ...incomingTrace(req) });
        if (rep.ran && held && got) {
          held.flush(got);
          return;
        }
        if (rep.replayed && rep.result) {
          let stored;
          try {
            stored = validateStored(rep.resultExpired ? Buffer.alloc(0) : rep.result.body, rep.result.code, keep);
          } catch (e) {
            if (!(e instanceof StoredInvalid)) throw e;
            answer('stored-answer-invalid', `the answer stored for idempotency key ${q} cannot be replayed: ${e.message}`, key);
            return;
          }
          replay(res, stored);
          return;
        }
        // SKIP_ALREADY_COMPENSATED: the saga undid this request; nothing runs again
        answer('compensated', `the request with idempotency key ${q} was compensated and does not run again`, key);
      } catch (x) {
        if (held && got) {
          held.flush(got); // the handler ran (a 5xx it answered, or a failure after it): its answer stands
          return;
        }
        if (held) return; // the handler is still answering (the step helper gave up on it)
        const e = x as IdemError;
        if (!(e instanceof IdemError)) {
          answer('middleware-error', `the middleware could not run the request with idempotency key ${q}: ${(x as Error)?.message ?? String(x)}`, key);
          return;
        }
        const c = problemForError(e.code, e.reason ?? '');
        const why = `${e.code}${e.reason ? ` ${e.reason}` : ''}`;
        if (c === 'in-progress') {
          answer(c, `a request with idempotency key ${q} is still being processed (${why})`, key, e.retryAfterMs);
        } else if (c === 'fingerprint-mismatch') {
          answer(c, `rule fingerprint: idempotency key ${q} was used for another request (method, target or body differ)`, key);
        } else if (c === 'coordinator-refused') {
          answer(c, `the idem coordinator refused the middleware (${why}): a misconfiguration a retry does not fix; the handler did not run`, key);
        } else {
          answer(c, `rule fail-closed: no idem coordinator could decide on idempotency key ${q} (${why}), and ${o.service}/${operation} fails closed`, key, e.retryAfterMs);
        }
      }
    }).catch((x) => {
      answer('middleware-error', `the middleware failed: ${(x as Error)?.message ?? String(x)}`, key);
    });
  };
}

/** Sends a validated stored answer with Idempotent-Replayed: true. */
function replay(res: ServerResponse, s: { status: number; headers: [string, string][]; body: Buffer; bodyOmitted: boolean }): void {
  res.statusCode = s.status;
  const seen = new Map<string, string[]>();
  for (const [n, v] of s.headers) seen.set(n, [...(seen.get(n) ?? []), v]);
  for (const [n, vs] of seen) res.setHeader(n, vs.length === 1 ? vs[0] : vs);
  res.setHeader('Idempotent-Replayed', 'true');
  if (s.bodyOmitted) res.setHeader('Idempotent-Body-Omitted', 'true');
  const body = s.bodyOmitted ? Buffer.alloc(0) : s.body;
  res.setHeader('Content-Length', String(body.length));
  res.end(body);
}
