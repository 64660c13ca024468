// time.ts — the monotonic clock, cancellable sleeps and jittered backoff of the SDK.
import { performance } from 'perf_hooks';
import { IdemError } from './errors';

export function nowMs(): number {
  return performance.now();
}

export function cancelled(signal: AbortSignal | undefined): IdemError {
  const r = signal?.reason;
  const why = r instanceof Error ? r.message : typeof r === 'string' ? r : 'the call was cancelled';
  return new IdemError('CANCELLED', why);
}

/** Sleeps ms; rejects with CANCELLED as soon as signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(cancelled(signal));
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(t);
      reject(cancelled(signal));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** random(0, min(max, base * 2^n)): full jitter. */
export function backoffMs(baseMs: number, maxMs: number, n: number): number {
  let cap = baseMs;
  for (let i = 0; i < n && cap < maxMs; i++) cap *= 2;
  if (cap > maxMs) cap = maxMs;
  return Math.floor(Math.random() * (cap + 1));
}
