package dev.idem.client;

/**
 * What kind of failure an {@link IdemException} is: the gRPC status code the coordinator (or
 * gRPC itself) answered, or one of the SDK's own. Decide on the code and the reason, never on
 * the message.
 */
public enum IdemCode {
  CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, ALREADY_EXISTS,
  PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE,
  UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED,
  /** the action reported retryable and the key was released (the next run runs again) */
  STEP_FAILED,
  /**
   * the step helper lost a try (a draining node's CANCELLED with no reason) and its timeout
   * passed before an answer said what the step did: it may have begun, or been stored. The
   * outcome is unknown; the report is attached when the action ran (docs/api.md §20)
   */
  STEP_UNKNOWN,
  /** the coordinator answered something this SDK does not know (an unknown decision) */
  BAD_RESPONSE,
  /** the action threw a checked exception (the cause); the step was completed as unknown */
  ACTION_FAILED;

  static IdemCode ofGrpc(io.grpc.Status.Code c) {
    try {
      return valueOf(c.name());
    } catch (IllegalArgumentException e) {
      return UNKNOWN;
    }
  }
}
