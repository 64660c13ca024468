package dev.idem.client;

/**
 * A failed call of the SDK. {@link #code()} says what kind of failure, {@link #reason()} the
 * coordinator's {@code idem-reason} (docs/api.md §5; empty when no coordinator answered or the
 * SDK itself refused). Bad input is {@link IdemCode#INVALID_ARGUMENT} with {@link #field()}
 * naming the offending field, raised before anything is sent. {@link #coordinatorDetail()} and
 * {@link #hint()} carry the coordinator's {@code idem-detail} and {@code idem-hint}, for people:
 * decide on code and reason, never on them. ({@link #detail()}, older, is the message without
 * the code.)
 */
public class IdemException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final IdemCode code;
  private final String detail;
  private final String reason;
  private final String field;
  private final String leader;
  private final long retryAfterMs;
  private final boolean outcomeUnknown;
  private final String coordinatorDetail;
  private final String hint;
  private transient RunReport report;
  /** a lost try (Transport.lostTry marked it): the step helper retries it like UNAVAILABLE */
  transient boolean lostTry;

  public IdemException(IdemCode code, String message, String reason, String field, String leader,
                       long retryAfterMs, boolean outcomeUnknown, Throwable cause) {
    this(code, message, reason, field, leader, retryAfterMs, outcomeUnknown, "", "", cause);
  }

  /** With the coordinator's idem-detail and idem-hint ("" when none). */
  public IdemException(IdemCode code, String message, String reason, String field, String leader,
                       long retryAfterMs, boolean outcomeUnknown, String coordinatorDetail,
                       String hint, Throwable cause) {
    super(code + ": " + message + (reason.isEmpty() ? "" : " (" + reason + ")"), cause);
    this.coordinatorDetail = coordinatorDetail == null ? "" : coordinatorDetail;
    this.hint = hint == null ? "" : hint;
    this.code = code;
    this.detail = message;
    this.reason = reason;
    this.field = field;
    this.leader = leader;
    this.retryAfterMs = retryAfterMs;
    this.outcomeUnknown = outcomeUnknown;
  }

  public IdemException(IdemCode code, String message) {
    this(code, message, "", "", "", 0, false, null);
  }

  public IdemException(IdemCode code, String message, String reason) {
    this(code, message, reason, "", "", 0, false, null);
  }

  /** Bad input found before any call: INVALID_ARGUMENT naming the field. */
  static IdemException invalid(String field, String message) {
    return new IdemException(IdemCode.INVALID_ARGUMENT, field + ": " + message, Reason.INVALID_ARGUMENT,
        field, "", 0, false, null);
  }

  public IdemCode code() { return code; }
  /** the message without the code: short, lower-case; for bad input it names the field */
  public String detail() { return detail; }
  /** the coordinator's idem-detail: more about what happened, or "" (docs/api.md §5) */
  public String coordinatorDetail() { return coordinatorDetail; }
  /** the coordinator's idem-hint: what to do about it, or "" (docs/api.md §5) */
  public String hint() { return hint; }
  /** the coordinator's idem-reason ("in-progress", "not-leader", …), or "" */
  public String reason() { return reason; }
  /** bad input: the offending field ("address", "global_id", "body", …), else "" */
  public String field() { return field; }
  /** UNAVAILABLE from a standby: the leader's host:port, else "" */
  public String leader() { return leader; }
  /** ABORTED because in progress: the coordinator's idem-retry-after-ms, else 0 */
  public long retryAfterMs() { return retryAfterMs; }
  /** DEADLINE_EXCEEDED / UNAVAILABLE / a CANCELLED the caller did not cause (a draining node's), after
   *  the request was sent, or a repeat after that refused: it may have acted. Not set on a refusal
   *  that proves no try acted (BeginStep fingerprint-mismatch; CompleteStep finished-differently, or
   *  lease-lost of a SUCCEEDED or FAILED outcome: docs/api.md §20) */
  public boolean outcomeUnknown() { return outcomeUnknown; }
  /** a step run whose action did run (STEP_FAILED, DATA_LOSS, a lost lease), else null */
  public RunReport report() { return report; }

  IdemException withReport(RunReport r) {
    this.report = r;
    return this;
  }
}
