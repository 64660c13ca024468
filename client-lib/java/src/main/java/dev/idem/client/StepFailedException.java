package dev.idem.client;

/**
 * The typed {@code IdemClient.step} of a step whose result is not a success: the action threw
 * {@link StepFailure} (now or, when {@link #replayed()}, on an earlier run), or the stored
 * outcome is unknown. Carries the stored outcome, code and body.
 */
public class StepFailedException extends IdemException {
  private static final long serialVersionUID = 1L;
  private final StepResult result;
  private final boolean replayed;

  StepFailedException(StepResult result, boolean replayed, RunReport report) {
    super(IdemCode.STEP_FAILED, "the step ended " + result.outcome().word() + " (code "
        + result.code() + ")" + (replayed ? ", replayed" : ""), "", "", "", 0, false, null);
    this.result = result;
    this.replayed = replayed;
    withReport(report);
  }

  public StepResult result() { return result; }
  public Outcome outcome() { return result.outcome(); }
  public int resultCode() { return result.code(); }
  public boolean replayed() { return replayed; }
}
