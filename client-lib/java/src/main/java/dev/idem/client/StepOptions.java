package dev.idem.client;

import java.time.Duration;

/**
 * Options of one step run; {@link #DEFAULTS} is fine for most. Immutable: each {@code with…}
 * returns a copy.
 *
 * <ul>
 *   <li>fingerprint: 0–64 bytes naming the request (SHA-256 of its canonical bytes); the same
 *       key with another fingerprint is refused (FAILED_PRECONDITION, fingerprint-mismatch)
 *   <li>timeout: the whole run, retries included (default 10 s; the action is not bounded by it)
 *   <li>leaseMs: the lease asked for (0 = the policy's)
 *   <li>inProgress: what a run does when the step is in progress elsewhere
 *   <li>traceparent: the caller's W3C traceparent, sent on every call of the run (docs/api.md §22)
 * </ul>
 */
public record StepOptions(byte[] fingerprint, Duration timeout, int leaseMs, InProgress inProgress,
                          String traceparent, Duration backoffBase, Duration backoffMax) {
  /** What a run does when it meets the step in progress under another caller's lease. */
  public enum InProgress {
    /** BeginStep waits on the coordinator (wait_ms, what is left of the run, at most 60 s) */
    WAIT,
    /** retries ABORTED with backoff, raised to the coordinator's idem-retry-after-ms */
    BACKOFF,
    /** throws the ABORTED (in-progress) at once: the HTTP filter's 409 */
    FAIL_FAST
  }

  public static final StepOptions DEFAULTS = new StepOptions(new byte[0], Duration.ofSeconds(10), 0,
      InProgress.WAIT, null, Duration.ofMillis(50), Duration.ofSeconds(1));

  public StepOptions withFingerprint(byte[] fp) {
    return new StepOptions(fp, timeout, leaseMs, inProgress, traceparent, backoffBase, backoffMax);
  }

  public StepOptions withTimeout(Duration t) {
    return new StepOptions(fingerprint, t, leaseMs, inProgress, traceparent, backoffBase, backoffMax);
  }

  public StepOptions withLeaseMs(int ms) {
    return new StepOptions(fingerprint, timeout, ms, inProgress, traceparent, backoffBase, backoffMax);
  }

  public StepOptions withInProgress(InProgress p) {
    return new StepOptions(fingerprint, timeout, leaseMs, p, traceparent, backoffBase, backoffMax);
  }

  public StepOptions withTraceparent(String tp) {
    return new StepOptions(fingerprint, timeout, leaseMs, inProgress, tp, backoffBase, backoffMax);
  }

  public StepOptions withBackoff(Duration base, Duration max) {
    return new StepOptions(fingerprint, timeout, leaseMs, inProgress, traceparent, base, max);
  }
}
