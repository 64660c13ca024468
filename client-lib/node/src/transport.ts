// transport.ts — the coordinator endpoints and the unary call with failover, as libidem's
// client.c: one channel per address (the list given, plus leaders named by idem-leader), calls
// go to the current one; UNAVAILABLE from a standby that names the leader goes straight there,
// other UNAVAILABLEs (and a draining node's CANCELLED: lostTry) try the next address with
// jittered backoff inside the call's deadline; a call whose outcome is unknown is only repeated
// when that is harmless. Each endpoint remembers what its last call heard, for the fail-open
// rule of docs/api.md §20 (noneCouldDecide).
import * as grpc from '@grpc/grpc-js';
import { IdemError, fromServiceError } from './errors';
import { REASONS } from './reasons';
import { refusalSettles } from './refusal';
import { services } from './proto';
import { backoffMs, cancelled, nowMs, sleep } from './time';

const MAX_ENDPOINTS = 16;
const MIN_TRY_MS = 50;

/** What the last call to an endpoint heard (docs/api.md §20). */
type Heard = 'decider' | 'nothing' | 'undecided' | 'sent';

interface Endpoint {
  address: string;
  coordinator: grpc.Client;
  admin: grpc.Client;
  heardMs: number; // monotonic; 0 = never
  heard: Heard;
  sentTo: number; // heard 'sent': the endpoint of the leader it named, -1 unknown
}

export interface TransportOptions {
  addresses: string[];
  credentials: grpc.ChannelCredentials;
  channelOptions: grpc.ChannelOptions;
  metadata: () => grpc.Metadata;
}

export interface CallOptions {
  /** the call's deadline in ms (all retries included) */
  timeoutMs: number;
  signal?: AbortSignal;
  /** false: an unknown outcome must not be repeated (BeginSaga without a request id) */
  repeatable?: boolean;
  /** sent besides the client's own metadata (traceparent, tracestate) */
  metadata?: [string, string][];
}

function heardOf(e: IdemError | undefined): Heard {
  if (!e) return 'decider';
  if (e.code === 'DEADLINE_EXCEEDED') return 'nothing';
  if (!e.reason) return e.code === 'UNAVAILABLE' ? 'nothing' : 'decider'; // gRPC's own, not a coordinator's
  if (e.reason === REASONS.storeUnavailable || e.reason === REASONS.storeTimeout || e.reason === REASONS.noLeader)
    return 'undecided';
  if (e.reason === REASONS.notLeader && e.leader) return 'sent';
  return 'decider';
}

/** The errors that were lost tries (Transport.lostTry): CANCELLED without idem-reason that no
 *  signal and no close() caused. runStep retries these, not a CANCELLED the caller caused. */
export const lostTries = new WeakSet<IdemError>();

export class Transport {
  private readonly eps: Endpoint[] = [];
  private cur = 0;
  private closed = false;
  private lostMs = 0; // monotonic ms of the last lost try (lostTry), any address; 0 = none

  constructor(private readonly o: TransportOptions) {
    for (const a of o.addresses) this.add(a);
  }

  get endpoints(): number {
    return this.eps.length;
  }

  /** Whether a try was lost (lostTry) at or after sinceMs (monotonic), on any address. */
  lostSince(sinceMs: number): boolean {
    return this.lostMs > 0 && this.lostMs >= sinceMs;
  }

  /** The endpoint index of address (added with its channel if new); -1 when the list is full. */
  add(address: string): number {
    const i = this.eps.findIndex((e) => e.address === address);
    if (i >= 0) return i;
    if (this.eps.length >= MAX_ENDPOINTS) return -1;
    const s = services();
    const coordinator = new s.Coordinator(address, this.o.credentials, this.o.channelOptions);
    const admin = new s.Admin(address, this.o.credentials, {
      ...this.o.channelOptions,
      channelOverride: coordinator.getChannel(),
    });
    this.eps.push({ address, coordinator, admin, heardMs: 0, heard: 'nothing', sentTo: -1 });
    return this.eps.length - 1;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const e of this.eps) e.coordinator.close();
  }

  /** One attempt at endpoint ep. */
  private callAt(ep: number, service: 'coordinator' | 'admin', method: string, req: unknown,
                 timeoutMs: number, signal?: AbortSignal, extra?: [string, string][]): Promise<unknown> {
    const e = this.eps[ep];
    const stub = e[service] as unknown as Record<string, Function>;
    const fn = stub[method];
    if (typeof fn !== 'function') return Promise.reject(new IdemError('UNIMPLEMENTED', `no method ${method}`));
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(cancelled(signal));
      let onAbort: (() => void) | undefined;
      const md = this.o.metadata();
      for (const [k, v] of extra ?? []) md.set(k, v);
      const call = fn.call(stub, req, md, { deadline: new Date(Date.now() + Math.max(1, timeoutMs)) },
        (err: grpc.ServiceError | null, resp: unknown) => {
          if (onAbort) signal?.removeEventListener('abort', onAbort);
          if (signal?.aborted) return reject(cancelled(signal));
          if (err) {
            const ie = fromServiceError(err);
            if (this.lostTry(ie)) {
              ie.outcomeUnknown = true;
              lostTries.add(ie);
              this.lostMs = nowMs();
            }
            this.note(ep, ie);
            return reject(ie);
          }
          this.note(ep, undefined);
          resolve(resp);
        }) as grpc.ClientUnaryCall;
      if (signal) {
        onAbort = () => call.cancel();
        signal.addEventListener('abort', onAbort, { once: true });
      }
    });
  }

  /** A try gRPC ended with CANCELLED, without idem-reason, that neither the caller's signal (the
   *  callback above rejects those first) nor close() cancelled. The coordinator never answers
   *  CANCELLED: a draining node's gRPC killed a call that reached it after its shutdown began,
   *  without saying whether the handler had it (docs/upgrading.md). Like an UNAVAILABLE without
   *  idem-leader: outcome unknown, repeated on the next address only when repeatable. */
  private lostTry(e: IdemError): boolean {
    return e.code === 'CANCELLED' && !e.reason && !this.closed;
  }

  private note(ep: number, e: IdemError | undefined): void {
    const x = this.eps[ep];
    x.heardMs = nowMs();
    x.heard = heardOf(e);
    x.sentTo = x.heard === 'sent' && e ? this.eps.findIndex((y) => y.address === e.leader) : -1;
  }

  /** Whether, since sinceMs, every known address was called and none could decide: no answer,
   *  or its store or election was down (a standby's not-leader counts as what the node it
   *  names said). docs/api.md §20. Never after a lost try since sinceMs: that node was up and
   *  may have decided. */
  noneCouldDecide(sinceMs: number): boolean {
    if (this.eps.length === 0 || this.lostSince(sinceMs)) return false;
    for (let i = 0; i < this.eps.length; i++) {
      let j = i;
      for (let hops = 0; hops < this.eps.length && this.eps[j].heard === 'sent'; hops++) {
        if (this.eps[j].heardMs < sinceMs || this.eps[j].sentTo < 0) break;
        j = this.eps[j].sentTo;
      }
      const x = this.eps[j];
      if (!(x.heardMs >= sinceMs && (x.heard === 'nothing' || x.heard === 'undecided'))) return false;
    }
    return true;
  }

  /** The unary call with failover and redirects, within o.timeoutMs. */
  async unary(service: 'coordinator' | 'admin', method: string, req: unknown, o: CallOptions): Promise<unknown> {
    if (this.closed) throw new IdemError('CANCELLED', 'the client is closed');
    const deadline = nowMs() + o.timeoutMs;
    let unknown = false; // an earlier try may have acted
    for (let tries = 0; ; tries++) {
      const ep = this.cur;
      const n = this.eps.length;
      const left = Math.max(1, deadline - nowMs());
      try {
        return await this.callAt(ep, service, method, req, left, o.signal, o.metadata);
      } catch (x) {
        const e = x as IdemError;
        if (e.code === 'CANCELLED' && o.signal?.aborted) throw e;
        if (e.code === 'DEADLINE_EXCEEDED' && n > 1 && this.cur === ep) this.cur = (ep + 1) % n;
        const lost = e.code === 'CANCELLED' && e.outcomeUnknown; // lostTry: gRPC's, not ours
        if (e.code !== 'UNAVAILABLE' && !lost) {
          // a refusal after a try that may have acted, unless it proves none did
          if (unknown && !refusalSettles(method, req, e)) e.outcomeUnknown = true;
          throw e;
        }
        const standby = !e.outcomeUnknown; // idem-leader came with it: nothing was done
        if (!standby) {
          unknown = true;
          if (o.repeatable === false) throw e;
        }
        let next = ep;
        if (standby && e.leader) {
          const i = this.add(e.leader);
          if (i >= 0) next = i;
        } else if (n > 1) {
          next = (ep + 1) % n; // no leader named, or this node is unreachable: the next one
        }
        if (this.cur === ep) this.cur = next;
        // straight to a named leader; otherwise back off (full jitter)
        const wait = standby && e.leader && next !== ep ? 0 : backoffMs(25, 500, tries);
        if (nowMs() + wait + MIN_TRY_MS >= deadline) {
          if (unknown) e.outcomeUnknown = true;
          throw e;
        }
        await sleep(wait, o.signal);
      }
    }
  }
}
