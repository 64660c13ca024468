// index.ts — idem-client: the idem coordinator's client for Node (docs/sdk-node.md).
export { IdemClient } from './client';
export type { ConnectOptions, CallOptions, BeginOptions, CompleteInput, Resolution } from './client';
export { IdemError } from './errors';
export { REASONS } from './reasons';
export { STEP_SPAN, EVENTS as STEP_EVENTS, parseTraceparent } from './trace';
export type { TraceHeaders } from './trace';
export type { IdemCode } from './errors';
export type { RunOptions, RunReport, StepAction, StepContext, StepOutput } from './run';
export type {
  BeginResult, Decision, FailureMode, Outcome, Phase, Policy, Saga, StepKey, StepRecord, StepResult, StepState,
} from './types';
export { journalLine, encodeField } from './journal';
export { protoDir } from './proto';
export { idempotency, keptTrace, answerClientErrors, TRACE_MAX } from './http/express';
export type { IdempotencyOptions } from './http/express';
export { parseIdempotencyKey, keyGlobalId, authorizationScope, routeOperation, requestFingerprint, KEY_RULES,
  normalizeTarget, fingerprintTarget, pathOperation, TargetMalformed } from './http/key';
export type { KeyError, ParsedKey, NormalizedTarget } from './http/key';
export { encodeStored, decodeStored, validateStored, StoredInvalid, NEVER_KEPT } from './http/stored';
export type { StoredResponse } from './http/stored';
export { problem, retryAfterSeconds, sendProblem, PROBLEMS, SERVER_PROBLEMS, problemForError, clientErrorProblem, clientErrorAnswer } from './http/problem';
export type { Problem, ProblemCase, ServerProblemCase } from './http/problem';
