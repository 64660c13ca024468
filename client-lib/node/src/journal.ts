// journal.ts — the unguarded-execution journal in libidem's line format (client-lib/include/
// idem/idem.h), so `idemctl reconcile` replays what this SDK ran while no coordinator could
// decide:
//   idem1 TIME_MS SOURCE TENANT GLOBAL_ID SERVICE OPERATION PHASE OUTCOME CODE FP BODY
// one space between fields; text fields percent-encoded (every byte outside [A-Za-z0-9._:/-] as
// %XX, upper-case hex; a lone "-" as %2D); an empty field "-"; FP lower-case hex.
import { promises as fsp } from 'fs';
import { StepKey, StepResult } from './types';

function plain(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) ||
    c === 0x2e || c === 0x5f || c === 0x3a || c === 0x2f || c === 0x2d;
}

/** The journal's percent-encoding of a field. */
export function encodeField(v: Buffer | string): string {
  const b = typeof v === 'string' ? Buffer.from(v, 'utf8') : v;
  if (b.length === 0) return '-';
  let out = '';
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (plain(c) && !(b.length === 1 && c === 0x2d)) out += String.fromCharCode(c);
    else out += '%' + c.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** One journal line (with its newline). */
export function journalLine(timeMs: number, source: 'client' | 'server', tenant: string, key: StepKey,
                            fingerprint: Buffer, res: StepResult): string {
  return [
    'idem1', String(Math.floor(timeMs)), source, encodeField(tenant), encodeField(key.globalId),
    encodeField(key.service), encodeField(key.operation),
    key.phase === 'compensation' ? 'compensation' : 'forward', res.outcome, String(res.code | 0),
    fingerprint.length ? fingerprint.toString('hex') : '-', encodeField(res.body),
  ].join(' ') + '\n';
}

/** Appends lines to a journal file, one append at a time, each fsync'd before it resolves. */
export class Journal {
  private tail: Promise<void> = Promise.resolve();

  constructor(readonly path: string) {}

  append(line: string): Promise<void> {
    const run = async () => {
      const fh = await fsp.open(this.path, 'a', 0o600);
      try {
        await fh.appendFile(line, 'utf8');
        await fh.sync();
      } finally {
        await fh.close();
      }
    };
    const p = this.tail.then(run, run);
    this.tail = p.catch(() => undefined);
    return p;
  }
}
