// validate.ts — the contract's input rules (docs/api.md §1), checked before any call so that bad
// input is an INVALID_ARGUMENT naming the field and nothing is sent.
import { invalid } from './errors';
import type { StepKey } from './types';

export const GLOBAL_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;
const NAME_RE = /^[a-z0-9._-]{1,64}$/;
export const FINGERPRINT_MAX = 64;
export const BODY_MAX = 64 * 1024;

export function checkGlobalId(field: string, v: unknown): string {
  if (typeof v !== 'string' || v.length === 0) throw invalid(field, 'is empty');
  if (!GLOBAL_ID_RE.test(v)) throw invalid(field, 'must be 1-128 characters of [A-Za-z0-9._:-]');
  return v;
}

export function checkName(field: string, v: unknown, star = false): string {
  if (typeof v !== 'string' || v.length === 0) throw invalid(field, 'is empty');
  if (star && v === '*') return v;
  if (!NAME_RE.test(v)) throw invalid(field, 'must be 1-64 characters of [a-z0-9._-]');
  return v;
}

/** Bytes from a Buffer, a Uint8Array or a string (UTF-8); undefined/null = empty. */
export function toBytes(field: string, v: unknown, max: number): Buffer {
  let b: Buffer;
  if (v === undefined || v === null) b = Buffer.alloc(0);
  else if (Buffer.isBuffer(v)) b = v;
  else if (v instanceof Uint8Array) b = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  else if (typeof v === 'string') b = Buffer.from(v, 'utf8');
  else throw invalid(field, 'must be a Buffer, a Uint8Array or a string');
  if (b.length > max) throw invalid(field, `is ${b.length} bytes, more than the ${max} allowed`);
  return b;
}

/** "host:port" or "[v6]:port", port 1-65535. */
export function checkAddress(field: string, v: unknown): string {
  if (typeof v !== 'string') throw invalid(field, 'must be a string "host:port"');
  const a = v.trim();
  const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$/.exec(a);
  if (!m) throw invalid(field, `"${v}" is not host:port`);
  const port = Number(m[2]);
  if (port < 1 || port > 65535) throw invalid(field, `"${v}": port ${m[2]} is out of range`);
  return a;
}

export function checkTenant(field: string, v: unknown): string {
  if (typeof v !== 'string' || !GLOBAL_ID_RE.test(v))
    throw invalid(field, 'must be 1-128 characters of [A-Za-z0-9._:-]');
  return v;
}

/** A step key: global id, service, operation by the contract's rules; phase forward or compensation. */
export function checkKey(k: StepKey | undefined): StepKey {
  if (!k || typeof k !== 'object') throw invalid('key', 'is missing');
  checkGlobalId('key.globalId', k.globalId);
  checkName('key.service', k.service);
  checkName('key.operation', k.operation);
  if (k.phase !== undefined && k.phase !== 'forward' && k.phase !== 'compensation')
    throw invalid('key.phase', 'must be "forward" or "compensation"');
  return k;
}
