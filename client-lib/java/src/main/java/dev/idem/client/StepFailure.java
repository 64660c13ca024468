package dev.idem.client;

import java.nio.charset.StandardCharsets;

/**
 * Thrown by a typed step's action to report a result that is not a success: {@link #failed}
 * (a definite failure, stored and replayed) or {@link #retryable} (nothing happened; the key is
 * released and the next run runs again).
 */
public class StepFailure extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final StepResult result;

  private StepFailure(StepResult result) {
    super(result.outcome().word() + " " + result.code());
    this.result = result;
  }

  public static StepFailure failed(int code, String body) {
    return new StepFailure(new StepResult(Outcome.FAILED, code, bytes(body)));
  }

  public static StepFailure retryable(int code, String body) {
    return new StepFailure(new StepResult(Outcome.RETRYABLE, code, bytes(body)));
  }

  public StepResult result() { return result; }

  private static byte[] bytes(String s) {
    return s == null ? new byte[0] : s.getBytes(StandardCharsets.UTF_8);
  }
}
