package dev.idem.client;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * What the action is told. {@link #attempt()} is the fencing number: pass it on to your own
 * writes. {@link #leaseLost()} turns true when the lease could not be extended any more
 * (another caller may take the step over): stop early, the completion will be refused.
 */
public final class StepContext {
  private final StepKey key;
  private final long attempt;
  private final boolean takeover;
  private final boolean unguarded;
  private final CountDownLatch lost = new CountDownLatch(1);

  StepContext(StepKey key, long attempt, boolean takeover, boolean unguarded) {
    this.key = key;
    this.attempt = attempt;
    this.takeover = takeover;
    this.unguarded = unguarded;
  }

  public StepKey key() { return key; }
  public long attempt() { return attempt; }
  /** an earlier attempt's lease expired: it may have partly run */
  public boolean takeover() { return takeover; }
  /** nothing is recorded for this run (fail-open) */
  public boolean unguarded() { return unguarded; }
  public boolean leaseLost() { return lost.getCount() == 0; }

  /** Waits up to {@code timeoutMs} for the lease to be lost; true when it was. */
  public boolean awaitLeaseLost(long timeoutMs) throws InterruptedException {
    return lost.await(timeoutMs, TimeUnit.MILLISECONDS);
  }

  void markLost() { lost.countDown(); }
}
