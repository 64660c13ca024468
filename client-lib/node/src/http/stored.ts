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
