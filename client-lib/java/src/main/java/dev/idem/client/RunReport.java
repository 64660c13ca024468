package dev.idem.client;

/** How a step run was settled, as libidem's idem_run_report. */
public final class RunReport {
  Decision decision;
  long attempt;
  boolean ran;
  boolean takeover;
  boolean replayed;
  StepResult result;
  int beginRetries;
  boolean unguarded;
  boolean journaled;

  /** of the BeginStep that settled the run (PROCEED_UNGUARDED when no coordinator could decide) */
  public Decision decision() { return decision; }
  /** the fencing number of the run (0 when unguarded) */
  public long attempt() { return attempt; }
  /** the action was called */
  public boolean ran() { return ran; }
  /** it ran as a takeover of an expired lease */
  public boolean takeover() { return takeover; }
  /** the stored result was returned instead of running */
  public boolean replayed() { return replayed; }
  /** the action's result (ran) or the stored one (replayed); null for a skip */
  public StepResult result() { return result; }
  public int beginRetries() { return beginRetries; }
  /** ran with nothing recorded (PROCEED_UNGUARDED, or fail-open with no coordinator) */
  public boolean unguarded() { return unguarded; }
  /** that run was appended to the journal */
  public boolean journaled() { return journaled; }

  @Override
  public String toString() {
    return "RunReport[" + decision + " attempt " + attempt + (ran ? " ran" : "")
        + (replayed ? " replayed" : "") + (takeover ? " takeover" : "")
        + (unguarded ? " unguarded" : "") + (journaled ? " journaled" : "") + " " + result + "]";
  }
}
