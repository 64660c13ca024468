package dev.idem.client;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A step's result: what the action reports (returned from it), or what the coordinator stored
 * (a replay). {@code completedUnixMs} is set on stored results; {@code expired}: a replay past the
 * policy's retention_s, outcome and code only (docs/api.md §12).
 */
public record StepResult(Outcome outcome, int code, byte[] body, long completedUnixMs, boolean expired) {
  public StepResult {
    outcome = outcome == null ? Outcome.UNKNOWN : outcome;
    body = body == null ? new byte[0] : body;
  }

  public StepResult(Outcome outcome, int code, byte[] body) {
    this(outcome, code, body, 0, false);
  }

  public static StepResult succeeded(int code, String body) {
    return new StepResult(Outcome.SUCCEEDED, code, utf8(body));
  }

  public static StepResult succeeded(String body) { return succeeded(0, body); }

  public static StepResult failed(int code, String body) {
    return new StepResult(Outcome.FAILED, code, utf8(body));
  }

  public static StepResult retryable(int code, String body) {
    return new StepResult(Outcome.RETRYABLE, code, utf8(body));
  }

  /** The body as UTF-8 text. */
  public String bodyText() { return new String(body, StandardCharsets.UTF_8); }

  @Override
  public boolean equals(Object o) {
    return o instanceof StepResult r && r.outcome == outcome && r.code == code
        && Arrays.equals(r.body, body) && r.completedUnixMs == completedUnixMs && r.expired == expired;
  }

  @Override
  public int hashCode() { return Arrays.hashCode(body) * 31 + outcome.hashCode() + code; }

  @Override
  public String toString() {
    return "StepResult[" + outcome.word() + " " + code + " " + body.length + " bytes]";
  }

  static byte[] utf8(String s) {
    return s == null ? new byte[0] : s.getBytes(StandardCharsets.UTF_8);
  }
}
