// refusal.ts — which refusals of a repeated request prove that no earlier try of it acted
// (docs/api.md §20, "A refusal that proves the lost try did nothing"). The same rule as
// libidem's refusal_settles (client-lib/src/route.c).
import { IdemError } from './errors';
import { REASONS } from './reasons';

/** Whether e, the coordinator's refusal of method's request req (its wire form), proves that no
 *  earlier try of this request acted: had one acted, this repeat of it would have been answered
 *  otherwise. Then the refusal is the call's answer, its outcome known. BeginStep
 *  fingerprint-mismatch: a try that acted left the record with this request's fingerprint, which
 *  nothing changes. CompleteStep finished-differently (not UNKNOWN: an operator may settle that
 *  one): a try that acted stored this result under this attempt, for good. CompleteStep
 *  lease-lost, SUCCEEDED or FAILED only: such a step is never begun again nor abandoned. Every
 *  other refusal proves nothing. */
export function refusalSettles(method: string, req: unknown, e: IdemError): boolean {
  if (method === 'BeginStep') return e.reason === REASONS.fingerprintMismatch;
  if (method !== 'CompleteStep') return false;
  const o = String((req as { outcome?: unknown }).outcome);
  const final = o === 'OUTCOME_SUCCEEDED' || o === 'OUTCOME_FAILED';
  if (e.reason === REASONS.finishedDifferently) return final || o === 'OUTCOME_RETRYABLE';
  return final && e.reason === REASONS.leaseLost;
}
