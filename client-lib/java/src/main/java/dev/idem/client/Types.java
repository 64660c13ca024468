package dev.idem.client;

import java.util.List;
import java.util.Map;

/** The coordinator's answers as plain values. */
public final class Types {
  private Types() {}

  /** BeginStep's answer; result is set on REPLAY. */
  public record Begin(Decision decision, long attempt, long leaseExpiresUnixMs, boolean takeover,
                      long expiresUnixMs, StepResult result) {}

  /** A step as the coordinator holds it (state: "in_progress", "succeeded", …). */
  public record StepRecord(StepKey key, String state, long attempt, byte[] fingerprint,
                           StepResult result, long createdUnixMs, long updatedUnixMs,
                           long leaseExpiresUnixMs, long expiresUnixMs, String tenant) {}

  public record SagaStarted(String globalId, boolean created, long createdUnixMs) {}

  public record Saga(String globalId, String sagaType, long createdUnixMs, List<StepRecord> steps,
                     Map<String, String> labels) {}

  public record Policy(String service, String operation, FailureMode failureMode, int retentionS,
                       int leaseMs, long updatedUnixMs, int keyRetentionS) {}
}
