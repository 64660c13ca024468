// key.ts — the Idempotency-Key header's parser, and the step key and fingerprint a request maps
// to, exactly as client-lib/conformance/idempotency-key.json says (docs/api.md §19):
// a value starting with '"' is an RFC 8941 String (escapes \" and \\ only, nothing after the
// closing quote); any other value is taken verbatim; 1-255 printable ASCII characters.
import { createHash } from 'crypto';

/** The rule a malformed header broke (the table's error words). */
export type KeyError =
  | 'missing' | 'empty' | 'too-long' | 'non-printable' | 'comma' | 'trailing' | 'unterminated' | 'bad-escape';

export type ParsedKey = { key: string; error?: undefined } | { key?: undefined; error: KeyError };

export const KEY_MAX = 255;

function printable(c: number): boolean {
  return c >= 0x20 && c <= 0x7e;
}

/** Parses the raw header value (undefined / null = no header). */
export function parseIdempotencyKey(header: string | undefined | null): ParsedKey {
  if (header === undefined || header === null) return { error: 'missing' };
  const h = header;
  let key = '';
  if (h.startsWith('"')) {
    let closed = false;
    let i = 1;
    while (i < h.length) {
      const ch = h[i];
      if (ch === '\\') {
        if (i + 1 >= h.length) return { error: 'unterminated' };
        const n = h[i + 1];
        if (n !== '"' && n !== '\\') return { error: 'bad-escape' };
        key += n;
        i += 2;
      } else if (ch === '"') {
        if (i + 1 !== h.length) return { error: 'trailing' };
        closed = true;
        break;
      } else {
        if (!printable(h.charCodeAt(i))) return { error: 'non-printable' };
        key += ch;
        i++;
      }
    }
    if (!closed) return { error: 'unterminated' };
  } else {
    for (let i = 0; i < h.length; i++) if (!printable(h.charCodeAt(i))) return { error: 'non-printable' };
    if (h.includes(',')) return { error: 'comma' };
    key = h;
  }
  if (key.length === 0) return { error: 'empty' };
  if (key.length > KEY_MAX) return { error: 'too-long' };
  return { key };
}

/** What each rule means, for a problem document's detail. */
export const KEY_RULES: Record<KeyError, string> = {
  missing: 'the request has no Idempotency-Key header',
  empty: 'the key is empty',
  'too-long': `the key is longer than ${KEY_MAX} characters`,
  'non-printable': 'the key has a character outside printable ASCII',
  comma: 'a bare key has a comma (a list)',
  trailing: 'something follows the closing quote (a list or parameters)',
  unterminated: 'the quoted key has no closing quote',
  'bad-escape': 'the quoted key has an escape other than \\" and \\\\',
};

/** The step's global id of a key in a scope: "k-" + the lower-case hex SHA-256 of the scope's
 *  bytes, one 0x1F byte and the key's bytes, for every key (docs/api.md §19), so that
 *  neither two scopes (callers) nor two keys name one step. */
export function keyGlobalId(key: string, scope = ''): string {
  return 'k-' + createHash('sha256').update(Buffer.from(scope, 'utf8')).update(Buffer.from([0x1f]))
    .update(Buffer.from(key, 'utf8')).digest('hex');
}

/** The default scope of a request: the lower-case hex SHA-256 of its Authorization lines joined
 *  with ", " in order (Node keeps only the first in req.headers: the raw lines are read), ""
 *  when it has none. */
export function authorizationScope(req: { headers: Record<string, string | string[] | undefined>; rawHeaders?: string[] }): string {
  let lines: string[];
  if (Array.isArray(req.rawHeaders)) {
    lines = [];
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      if (req.rawHeaders[i].toLowerCase() === 'authorization') lines.push(req.rawHeaders[i + 1]);
    }
  } else {
    const a = req.headers.authorization;
    lines = a === undefined ? [] : Array.isArray(a) ? a : [a];
  }
  if (lines.length === 0) return '';
  return createHash('sha256').update(lines.join(', '), 'utf8').digest('hex');
}

/** A request target normalized (docs/api.md §19 rule 5): path decoded, dot segments
 *  removed, runs of "/" as one, a trailing "/" dropped; the query as received. */
export interface NormalizedTarget {
  /** the normalized path (starts with "/") */
  path: string;
  /** the query as received, without "?"; undefined when the target had no "?" */
  query?: string;
}

/** Thrown by normalizeTarget: the request is answered 400 target-malformed. */
export class TargetMalformed extends Error {}

/** Normalizes a request target as received (origin-form or absolute-form http(s)://host/path);
 *  throws TargetMalformed naming what is wrong. */
export function normalizeTarget(target: string): NormalizedTarget {
  let t = target;
  if (/^https?:\/\//i.test(t)) {
    const rest = t.slice(t.indexOf('://') + 3);
    let i = rest.search(/[/?]/);
    if (i < 0) i = rest.length;
    t = rest.slice(i);
    if (!t.startsWith('/')) t = '/' + t;
  }
  if (!t.startsWith('/')) throw new TargetMalformed(`the request target ${JSON.stringify(target)} does not start with / (nor is it http(s)://host/path)`);
  let query: string | undefined;
  const q = t.indexOf('?');
  if (q >= 0) {
    query = t.slice(q + 1);
    t = t.slice(0, q);
  }
  const raw = Buffer.from(t, 'latin1');
  const dec: number[] = [];
  const hex = (c: number) => (c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1);
  for (let i = 0; i < raw.length; i++) {
    let c = raw[i];
    if (c === 0x25) {
      const hi = i + 2 < raw.length ? hex(raw[i + 1]) : -1;
      const lo = i + 2 < raw.length ? hex(raw[i + 2]) : -1;
      if (hi < 0 || lo < 0) throw new TargetMalformed(`the request target ${JSON.stringify(target)} has a % not followed by two hex digits`);
      c = hi * 16 + lo;
      i += 2;
    }
    if (c < 0x20 || c === 0x7f) throw new TargetMalformed(`the request target ${JSON.stringify(target)} holds the control byte 0x${c.toString(16).padStart(2, '0')}`);
    dec.push(c);
  }
  let path: string;
  try {
    path = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(dec));
  } catch {
    throw new TargetMalformed(`the request target ${JSON.stringify(target)} decodes to bytes that are not UTF-8`);
  }
  const segs: string[] = [];
  for (const s of path.split('/')) {
    if (s === '' || s === '.') continue;
    if (s === '..') segs.pop();
    else segs.push(s);
  }
  return { path: '/' + segs.join('/'), query };
}

/** The fingerprint's target: the normalized path, plus "?" and the query when there is one. */
export function fingerprintTarget(t: NormalizedTarget): string {
  return t.query === undefined ? t.path : `${t.path}?${t.query}`;
}

/** The operation of a normalized path: lower-case(method + " " + path), each UTF-8 byte outside
 *  [a-z0-9._-] as one "-", cut to 64. */
export function pathOperation(method: string, path: string): string {
  const b = Buffer.from(`${method} ${path}`, 'utf8');
  let out = '';
  for (const c of b) {
    const ch = c >= 0x41 && c <= 0x5a ? c + 0x20 : c;
    out += (ch >= 0x61 && ch <= 0x7a) || (ch >= 0x30 && ch <= 0x39) || ch === 0x2e || ch === 0x5f || ch === 0x2d ? String.fromCharCode(ch) : '-';
  }
  return out.slice(0, 64);
}

/** The default operation of a request target: pathOperation of its normalized path (a target
 *  that cannot be normalized, answered 400 target-malformed, is named from its raw path). */
export function routeOperation(method: string, target: string): string {
  try {
    return pathOperation(method, normalizeTarget(target).path);
  } catch {
    const q = target.indexOf('?');
    return pathOperation(method, q >= 0 ? target.slice(0, q) : target);
  }
}

/** SHA-256 of method + "\n" + target + "\n" + body (target: fingerprintTarget of the normalized
 *  target). */
export function requestFingerprint(method: string, target: string, body: Buffer): Buffer {
  return createHash('sha256').update(`${method}\n${target}\n`, 'utf8').update(body).digest();
}
