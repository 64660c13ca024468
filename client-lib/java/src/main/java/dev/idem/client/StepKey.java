package dev.idem.client;

import java.util.Objects;

/**
 * A step: (global id, service, operation, phase). Checked when used (docs/api.md §1): the
 * global id 1–128 of [A-Za-z0-9._:-], service and operation 1–64 of [a-z0-9._-].
 */
public record StepKey(String globalId, String service, String operation, Phase phase) {
  public StepKey {
    Objects.requireNonNull(phase, "phase");
  }

  public StepKey(String globalId, String service, String operation) {
    this(globalId, service, operation, Phase.FORWARD);
  }

  public static StepKey forward(String globalId, String service, String operation) {
    return new StepKey(globalId, service, operation, Phase.FORWARD);
  }

  public static StepKey compensation(String globalId, String service, String operation) {
    return new StepKey(globalId, service, operation, Phase.COMPENSATION);
  }
}
