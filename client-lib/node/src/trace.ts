// trace.ts — W3C trace context on every call and the idem.step span (docs/api.md §22, docs/
// sdk-node.md). @opentelemetry/api is an optional peer dependency, loaded when the application
// has it: then every call sends the traceparent (and tracestate) of the span in its OpenTelemetry
// context (the one given, else the active one), and runStep opens `idem.step` as a child of it.
// Without it, a call sends the traceparent the caller passed explicitly (the HTTP middleware
// passes the request's).
import type * as otel from '@opentelemetry/api';
import { invalid } from './errors';

export type OtelContext = otel.Context;
export type TracerProvider = otel.TracerProvider;

/** The span runStep opens for each step, and its attributes and events. */
export const STEP_SPAN = 'idem.step';
export const TRACER_NAME = 'idem-client';
export const EVENTS = {
  replay: 'idem.replay',
  takeover: 'idem.takeover',
  waiting: 'idem.waiting',
  leaseExtended: 'idem.lease_extended',
  leaseLost: 'idem.lease_lost',
} as const;

let api: typeof otel | null | undefined;

/** @opentelemetry/api when the application can load it, else null (looked up once). */
export function otelApi(): typeof otel | null {
  if (api === undefined) {
    try {
      api = require('@opentelemetry/api') as typeof otel; // eslint-disable-line @typescript-eslint/no-require-imports
    } catch {
      api = null;
    }
  }
  return api;
}

/** A trace context given explicitly, as the W3C headers carry it. */
export interface TraceHeaders {
  traceparent?: string;
  tracestate?: string;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[^]*)?$/;

/** The parts of a W3C traceparent, or undefined when it is not one (version ff, all-zero ids,
 *  a version 00 with more fields). */
export function parseTraceparent(v: unknown): { traceId: string; spanId: string; flags: number } | undefined {
  if (typeof v !== 'string') return undefined;
  const m = TRACEPARENT.exec(v.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, flags: parseInt(flags, 16) };
}

/** Throws INVALID_ARGUMENT naming the field when an explicit traceparent is malformed. */
export function checkTraceHeaders(field: string, t: TraceHeaders | undefined): void {
  if (t?.traceparent === undefined) return;
  if (!parseTraceparent(t.traceparent))
    throw invalid(field, 'must be a W3C traceparent: 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>');
  if (t.tracestate !== undefined && (typeof t.tracestate !== 'string' || !/^[\x20-\x7e]{0,512}$/.test(t.tracestate)))
    throw invalid(field.replace(/traceparent$/, 'tracestate'), 'must be printable ASCII, at most 512 characters');
}

/** The OpenTelemetry context of a W3C traceparent (a remote parent), added to ctx. */
export function contextFromHeaders(ctx: OtelContext, t: TraceHeaders): OtelContext {
  const a = otelApi();
  const p = parseTraceparent(t.traceparent);
  if (!a || !p) return ctx;
  let traceState: otel.TraceState | undefined;
  if (t.tracestate) {
    try {
      traceState = a.createTraceState(t.tracestate);
    } catch {
      traceState = undefined;
    }
  }
  return a.trace.setSpanContext(ctx, {
    traceId: p.traceId, spanId: p.spanId, traceFlags: p.flags & 1, isRemote: true, traceState,
  });
}

/** Whether ctx holds a span with a valid span context. */
export function hasSpan(ctx: OtelContext | undefined): boolean {
  const a = otelApi();
  if (!a || !ctx) return false;
  const sc = a.trace.getSpanContext(ctx);
  return !!sc && a.trace.isSpanContextValid(sc);
}

/** The metadata pairs for one call: from ctx's span (or the active context's), else from the
 *  explicit headers; none when there is no trace. */
export function traceMetadata(ctx: OtelContext | undefined, t: TraceHeaders | undefined): [string, string][] {
  const a = otelApi();
  if (a) {
    const sc = a.trace.getSpanContext(ctx ?? a.context.active());
    if (sc && a.trace.isSpanContextValid(sc)) {
      const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, '0');
      const out: [string, string][] = [['traceparent', `00-${sc.traceId}-${sc.spanId}-${flags}`]];
      const state = sc.traceState?.serialize();
      if (state) out.push(['tracestate', state]);
      return out;
    }
  }
  if (t?.traceparent !== undefined && parseTraceparent(t.traceparent)) {
    const out: [string, string][] = [['traceparent', t.traceparent.trim()]];
    if (t.tracestate) out.push(['tracestate', t.tracestate]);
    return out;
  }
  return [];
}

/** What runStep records on its span; a no-op without @opentelemetry/api. */
export interface StepSpan {
  /** the context its calls and the action run in (undefined without @opentelemetry/api) */
  readonly context: OtelContext | undefined;
  setDecision(decision: string, attempt: number): void;
  event(name: string, attrs?: Record<string, string | number | boolean>): void;
  end(err?: unknown): void;
}

const NO_SPAN: StepSpan = { context: undefined, setDecision() {}, event() {}, end() {} };

/** Opens idem.step under the parent: o.context, else the active context when it has a span,
 *  else the explicit traceparent (a remote parent), else the active context. */
export function startStepSpan(provider: TracerProvider | undefined, parentCtx: OtelContext | undefined,
                              headers: TraceHeaders | undefined, attrs: Record<string, string>): StepSpan {
  const a = otelApi();
  if (!a) return NO_SPAN;
  let parent = parentCtx ?? a.context.active();
  if (!parentCtx && !hasSpan(parent) && headers?.traceparent) parent = contextFromHeaders(parent, headers);
  const tracer = (provider ?? a.trace.getTracerProvider()).getTracer(TRACER_NAME);
  const span = tracer.startSpan(STEP_SPAN, { kind: a.SpanKind.INTERNAL, attributes: attrs }, parent);
  // a no-op provider's span has no valid context: the parent's trace goes out instead
  const context = a.trace.isSpanContextValid(span.spanContext()) ? a.trace.setSpan(parent, span) : parent;
  return {
    context,
    setDecision(decision, attempt) {
      span.setAttributes({ 'idem.decision': decision, 'idem.attempt': attempt });
    },
    event(name, at) {
      span.addEvent(name, at);
    },
    end(err) {
      if (err !== undefined) {
        const e = err as { code?: string; reason?: string; message?: string };
        span.setStatus({ code: a.SpanStatusCode.ERROR, message: e?.message ?? String(err) });
        if (e?.code) span.setAttribute('idem.error.code', String(e.code));
        if (e?.reason) span.setAttribute('idem.error.reason', String(e.reason));
      }
      span.end();
    },
  };
}

/** Runs fn with ctx as the active OpenTelemetry context (as it is when there is none). */
export function withContext<T>(ctx: OtelContext | undefined, fn: () => T): T {
  const a = otelApi();
  if (!a || !ctx) return fn();
  return a.context.with(ctx, fn);
}
