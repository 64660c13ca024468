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
 *  bytes, one 0x1F byte and the key's bytes, for every key (docs/api.md §19, amended), so that
 *  neither two scopes (callers) nor two keys name one step. */
export function keyGlobalId(key: string, scope = ''): string {
  return 'k-' + createHash('sha256').update(Buffer.from(scope, 'utf8')).update(Buffer.from([0x1f]))
    .update(Buffer.from(key, 'utf8')).digest('hex');
}

/** The default scope of a request: the lower-case hex SHA-256 of its Authorization header,
 *  "" when it has none. */
export function authorizationScope(req: { headers: Record<string, string | string[] | undefined> }): string {
  const a = req.headers.authorization;
  if (a === undefined) return '';
  return createHash('sha256').update(Array.isArray(a) ? a.join(', ') : a, 'utf8').digest('hex');
}

/** The default operation: lower-case(method + " " + path without query), every character
 *  outside [a-z0-9._-] as "-", cut to 64. */
export function routeOperation(method: string, target: string): string {
  const q = target.indexOf('?');
  const p = q >= 0 ? target.slice(0, q) : target;
  return `${method} ${p}`.toLowerCase().replace(/[^a-z0-9._-]/g, '-').slice(0, 64);
}

/** SHA-256 of method + "\n" + target (path and query as received) + "\n" + body. */
export function requestFingerprint(method: string, target: string, body: Buffer): Buffer {
  return createHash('sha256').update(`${method}\n${target}\n`, 'utf8').update(body).digest();
}
