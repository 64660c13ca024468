// refusal.ts — which refusals of a repeated request prove that no earlier try of it acted
// (docs/api.md §20, "A refusal that proves the lost try did nothing"): a lookup in
// SETTLING_REFUSALS (settling.ts), which scripts/gen-reasons writes from
// client-lib/conformance/settling-refusals.json, the one list that every client library takes.
import { IdemError } from './errors';
import { SETTLING_REFUSALS } from './settling';

/** A refusal that proves it: method's request refused with reason, whatever the request's
 *  outcome (anyOutcome) or when its outcome (the wire name, 'OUTCOME_SUCCEEDED') is one of
 *  outcomes. */
export interface SettlingRefusal {
  readonly method: string;
  readonly reason: string;
  readonly anyOutcome: boolean;
  readonly outcomes: readonly string[];
}

/** Whether e, the coordinator's refusal of method's request req (its wire form), proves that no
 *  earlier try of this request acted: had one acted, this repeat of it would have been answered
 *  otherwise. Then the refusal is the call's answer, its outcome known. Every refusal that
 *  SETTLING_REFUSALS does not list proves nothing. */
export function refusalSettles(method: string, req: unknown, e: IdemError): boolean {
  const s = SETTLING_REFUSALS.find((r) => r.method === method && r.reason === e.reason);
  if (s === undefined) return false;
  return s.anyOutcome || s.outcomes.includes(String((req as { outcome?: unknown }).outcome));
}
