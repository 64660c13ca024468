// stored.ts — how a response is kept as a step result's body (docs/sdk-node.md, "Stored
// responses"): UTF-8 JSON {"status":N,"headers":[[name,value],...],"body_b64":"..."}, headers in
// the order kept; a body over the limit is left out and marked "body_omitted":true. The step
// result's code is the status too, so a replay past retention (body dropped) still knows it.
import { BODY_MAX } from '../validate';

export interface StoredResponse {
  status: number;
  headers: [string, string][];
  body: Buffer;
  bodyOmitted: boolean;
}

/** Encodes r; the body is left out when it is over maxBodyBytes or the document would pass the
 *  coordinator's 64 KiB result limit. */
export function encodeStored(status: number, headers: [string, string][], body: Buffer, maxBodyBytes: number): { doc: Buffer; omitted: boolean } {
  if (body.length <= maxBodyBytes) {
    const doc = Buffer.from(JSON.stringify({ status, headers, body_b64: body.toString('base64') }), 'utf8');
    if (doc.length <= BODY_MAX) return { doc, omitted: false };
  }
  let doc = Buffer.from(JSON.stringify({ status, headers, body_b64: '', body_omitted: true }), 'utf8');
  if (doc.length > BODY_MAX) doc = Buffer.from(JSON.stringify({ status, headers: [], body_b64: '', body_omitted: true }), 'utf8');
  return { doc, omitted: true };
}

/** Decodes a stored document; undefined when it is not one. */
export function decodeStored(doc: Buffer): StoredResponse | undefined {
  let v: unknown;
  try {
    v = JSON.parse(doc.toString('utf8'));
  } catch {
    return undefined;
  }
  const o = v as { status?: unknown; headers?: unknown; body_b64?: unknown; body_omitted?: unknown };
  if (!o || typeof o !== 'object' || !Number.isInteger(o.status) || !Array.isArray(o.headers)) return undefined;
  const headers: [string, string][] = [];
  for (const h of o.headers) {
    if (!Array.isArray(h) || h.length !== 2 || typeof h[0] !== 'string' || typeof h[1] !== 'string') return undefined;
    headers.push([h[0], h[1]]);
  }
  return {
    status: o.status as number,
    headers,
    body: Buffer.from(typeof o.body_b64 === 'string' ? o.body_b64 : '', 'base64'),
    bodyOmitted: o.body_omitted === true,
  };
}

/** Headers a keep list may not name: the middleware frames a replay itself. */
export const NEVER_KEPT = ['content-length', 'transfer-encoding', 'connection'];

/** Thrown by validateStored: the replay answers 500 stored-answer-invalid. */
export class StoredInvalid extends Error {}

/** Reads a step result (its body doc and code) as docs/api.md §19 rule 10 says a
 *  replay may send it: a JSON object, status an integer 200-599, headers only of keep
 *  (case-insensitively, never NEVER_KEPT) with values free of control characters (HTAB
 *  allowed), body_b64 standard base64, body_omitted absent or a boolean. An empty doc (the
 *  body dropped past retention) is the code as status, no headers, the body omitted. Throws
 *  StoredInvalid saying what is wrong. */
export function validateStored(doc: Buffer, code: number, keep: string[]): StoredResponse {
  if (doc.length === 0) {
    if (!Number.isInteger(code) || code < 200 || code > 599) throw new StoredInvalid(`the result's body is gone and its code ${code} is not a status 200-599`);
    return { status: code, headers: [], body: Buffer.alloc(0), bodyOmitted: true };
  }
  let v: unknown;
  try {
    v = JSON.parse(doc.toString('utf8'));
  } catch {
    throw new StoredInvalid("the result's body is not JSON");
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new StoredInvalid("the result's body is not a JSON object");
  const o = v as Record<string, unknown>;
  if (!Number.isInteger(o.status)) throw new StoredInvalid(`status ${JSON.stringify(o.status)} is not an integer`);
  const status = o.status as number;
  if (status < 200 || status > 599) throw new StoredInvalid(`status ${status} is not 200-599`);
  if (!Array.isArray(o.headers)) throw new StoredInvalid('headers are not a list of [name, value] string pairs');
  const kept = new Set(keep.map((k) => k.toLowerCase()));
  const headers: [string, string][] = [];
  for (const h of o.headers) {
    if (!Array.isArray(h) || h.length !== 2 || typeof h[0] !== 'string' || typeof h[1] !== 'string') throw new StoredInvalid('a header is not a [name, value] string pair');
    const name = h[0].toLowerCase();
    if (!kept.has(name) || NEVER_KEPT.includes(name)) throw new StoredInvalid(`header ${JSON.stringify(h[0])} is not a kept header`);
    if (/[\x00-\x08\x0a-\x1f\x7f]/.test(h[1])) throw new StoredInvalid(`header ${JSON.stringify(h[0])} holds a control character`);
    headers.push([h[0], h[1]]);
  }
  if (typeof o.body_b64 !== 'string' || !/^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(o.body_b64)) throw new StoredInvalid('body_b64 is not base64');
  if (o.body_omitted !== undefined && typeof o.body_omitted !== 'boolean') throw new StoredInvalid(`body_omitted ${JSON.stringify(o.body_omitted)} is not a boolean`);
  return { status, headers, body: Buffer.from(o.body_b64, 'base64'), bodyOmitted: o.body_omitted === true };
}
