package dev.idem.client;

import idem.v1.CoordinatorOuterClass;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * One run of the step helper, as libidem's idem_step_run (docs/api.md §20).
 *
 * <p>BeginStep waits on the coordinator while the step is in progress elsewhere (wait_ms: what
 * is left of the run, at most 60 s) unless told otherwise; ABORTED and UNAVAILABLE (and
 * DEADLINE_EXCEEDED from one of several addresses) are retried with exponential backoff and
 * full jitter, raised to the coordinator's idem-retry-after-ms after ABORTED; no wait crosses
 * the run's timeout. A lost try (a CANCELLED the caller did not cause, no reason: a draining
 * node's) is retried like UNAVAILABLE, at BeginStep and at CompleteStep; a run that lost a try
 * and whose timeout passed before an answer said what happened throws STEP_UNKNOWN (§20). On
 * PROCEED the action runs while the lease is extended every third of it
 * (ExtendLease); a lease that cannot be extended any more marks the context lost and the run
 * throws ABORTED / lease-lost instead of completing. REPLAY returns the stored result without
 * running; the SKIPs run nothing. When no coordinator can decide (§20) a fail-open operation
 * (cached policy) with a journal runs unguarded and is journaled; PROCEED_UNGUARDED is too.
 */
final class StepRunner {
  private final IdemClient c;
  private final StepKey key;
  private final StepOptions o;
  private final StepAction action;
  private final String tp;
  private final long base, cap;
  private long end;
  private long began; // System.nanoTime(): lost tries since then make a spent timeout STEP_UNKNOWN

  StepRunner(IdemClient c, StepKey key, StepOptions o, StepAction action) {
    this.c = c;
    this.key = key;
    this.o = o;
    this.action = action;
    if (action == null) throw IdemException.invalid("action", "is missing");
    if (o.timeout() == null || o.timeout().isNegative() || o.timeout().isZero()) {
      throw IdemException.invalid("timeout", "must be positive");
    }
    if (o.inProgress() == null) throw IdemException.invalid("inProgress", "is missing");
    this.tp = Validate.traceparent(o.traceparent());
    this.base = o.backoffBase().toNanos();
    this.cap = Math.max(o.backoffMax().toNanos(), base);
  }

  private long left() { return end - System.nanoTime(); }

  private boolean sleepBeforeRetry(int n, long hintMs) {
    long wait = Transport.backoffNanos(base, cap, n);
    if (hintMs > 0) wait = Math.max(wait, Math.min(TimeUnit.MILLISECONDS.toNanos(hintMs), cap));
    if (wait >= left()) return false;
    Transport.sleepNanos(wait);
    return true;
  }

  /** A lost try (Transport.lostTry marked it): CANCELLED without reason that the caller did not cause. */
  private static boolean lost(IdemException e) {
    return e.lostTry;
  }

  /**
   * The error of a run whose timeout ended the retries of {@code call} with e: STEP_UNKNOWN when a
   * try of the client was lost since the run began (the step may have begun, or been stored, on
   * it), else e.
   */
  private IdemException givenUp(String call, IdemException e) {
    boolean retried = e.code() == IdemCode.UNAVAILABLE || e.code() == IdemCode.DEADLINE_EXCEEDED
        || e.code() == IdemCode.ABORTED;
    if (!(retried || lost(e)) || !c.transport.lostSince(began)) return e;
    return new IdemException(IdemCode.STEP_UNKNOWN, call + ": a try was lost and the run's timeout "
        + "passed before an answer said what it did (last: " + e.code()
        + (e.reason().isEmpty() ? "" : " " + e.reason()) + ")", "", "", "", 0, true, null);
  }

  private Types.Begin beginWithRetries(CoordinatorOuterClass.BeginStepRequest req0, RunReport rep) {
    boolean wait = o.inProgress() == StepOptions.InProgress.WAIT;
    IdemException last = null;
    for (int n = 0; left() > 0; ) {
      int waitMs = wait ? (int) Math.min(TimeUnit.NANOSECONDS.toMillis(left()), IdemClient.WAIT_MS_MAX) : 0;
      var req = req0.toBuilder().setWaitMs(waitMs).build();
      try {
        return c.begin(req, Math.min(c.timeout.toNanos() + TimeUnit.MILLISECONDS.toNanos(waitMs), left()), tp);
      } catch (IdemException e) {
        last = e;
        boolean elsewhere = e.code() == IdemCode.DEADLINE_EXCEEDED && c.transport.endpoints() > 1;
        // a call deadline that ran into the run's, after a lost try: STEP_UNKNOWN (givenUp)
        if (e.code() == IdemCode.DEADLINE_EXCEEDED && !elsewhere) throw givenUp("BeginStep", e);
        if (e.code() != IdemCode.ABORTED && e.code() != IdemCode.UNAVAILABLE && !elsewhere && !lost(e)) throw e;
        if (e.code() == IdemCode.ABORTED && o.inProgress() == StepOptions.InProgress.FAIL_FAST) throw e;
        if (!sleepBeforeRetry(n, e.code() == IdemCode.ABORTED ? e.retryAfterMs() : 0)) throw givenUp("BeginStep", e);
        rep.beginRetries++;
        n++;
      }
    }
    if (last != null) throw givenUp("BeginStep", last);
    throw new IdemException(IdemCode.DEADLINE_EXCEEDED, "run deadline exceeded");
  }

  /** The first Complete always gets the client's full per-call timeout, even when the run's has
   *  passed while the action ran (else the step would run again after its lease). */
  private Types.StepRecord completeWithRetries(long attempt, StepResult res) {
    for (int n = 0; ; n++) {
      long t = c.timeout.toNanos();
      if (n > 0) t = Math.min(t, left());
      try {
        return c.complete(key, attempt, res, Math.max(t, TimeUnit.MILLISECONDS.toNanos(1)), tp);
      } catch (IdemException e) {
        if (e.code() != IdemCode.UNAVAILABLE && e.code() != IdemCode.DEADLINE_EXCEEDED && !lost(e)) throw e;
        if (!sleepBeforeRetry(n, 0)) throw givenUp("CompleteStep", e);
      }
    }
  }

  private StepResult checked(StepResult r) {
    if (r == null) return new StepResult(Outcome.UNKNOWN, 0, new byte[0]);
    if (r.body().length > c.maxBody) {
      throw IdemException.invalid("body", "the action's body is " + r.body().length
          + " bytes, more than the limit of " + c.maxBody);
    }
    return r;
  }

  RunReport run() {
    var req = c.beginRequest(key, o.fingerprint(), o.leaseMs(), 0); // validates key, fingerprint, lease
    byte[] fp = req.getFingerprint().toByteArray();
    began = System.nanoTime();
    end = began + o.timeout().toNanos();
    // the failure mode comes with every BeginStep answer: no call before the first try

    RunReport rep = new RunReport();
    String source = "server";
    Types.Begin b;
    try {
      b = beginWithRetries(req, rep);
    } catch (IdemException e) {
      // no coordinator can decide (docs/api.md §20): a fail-open operation with a journal runs
      boolean undecided = e.code() == IdemCode.UNAVAILABLE || e.code() == IdemCode.DEADLINE_EXCEEDED;
      if (!(undecided && c.journal != null && c.transport.noneCouldDecide(began)
          && c.cachedFailureMode(key.service(), key.operation()) == FailureMode.FAIL_OPEN)) {
        throw e;
      }
      b = null;
      source = "client";
    }
    boolean takeover = false;
    if (b == null) {
      rep.decision = Decision.PROCEED_UNGUARDED;
      rep.attempt = 0;
    } else {
      rep.decision = b.decision();
      rep.attempt = b.attempt();
      takeover = b.takeover();
      // an older coordinator's answer names no failure mode: ask for it after the answer
      if (c.cachedFailureMode(key.service(), key.operation()) == null) c.refreshPolicy(key.service(), key.operation());
      if (b.decision() == Decision.REPLAY) {
        rep.replayed = true;
        rep.result = b.result();
        return rep;
      }
      if (b.decision() == Decision.SKIP_NULL_COMPENSATION || b.decision() == Decision.SKIP_ALREADY_COMPENSATED) {
        return rep;
      }
    }
    boolean unguarded = rep.decision == Decision.PROCEED_UNGUARDED;
    StepContext ctx = new StepContext(key, rep.attempt, takeover, unguarded);
    rep.ran = true;
    rep.takeover = takeover;
    rep.unguarded = unguarded;
    ScheduledFuture<?> keeper = null;
    if (!unguarded) {
      long leaseMs = o.leaseMs() > 0 ? o.leaseMs() : Math.max(b.leaseExpiresUnixMs() - System.currentTimeMillis(), 50);
      keeper = keepLease(ctx, leaseMs);
    }
    Throwable raised = null;
    try {
      rep.result = checked(action.run(ctx));
    } catch (IdemException e) {
      if (keeper != null) keeper.cancel(false);
      throw e;
    } catch (Throwable t) { // completed as unknown, thrown again below
      raised = t;
      byte[] why = String.valueOf(t).getBytes(StandardCharsets.UTF_8);
      rep.result = new StepResult(Outcome.UNKNOWN, 0, java.util.Arrays.copyOf(why, Math.min(why.length, 1024)));
    } finally {
      if (keeper != null) keeper.cancel(false);
    }

    if (unguarded && c.journal != null) {
      try {
        Journal.append(c.journal, Journal.line(source, c.tenant, key, fp, rep.result));
      } catch (IOException e) {
        throw new IdemException(IdemCode.DATA_LOSS, "journal " + c.journal + ": " + e.getMessage()).withReport(rep);
      }
      rep.journaled = true;
    }
    if (!unguarded) {
      if (ctx.leaseLost()) {
        throw new IdemException(IdemCode.ABORTED, "lease lost while the action ran: not completed", Reason.LEASE_LOST)
            .withReport(rep);
      }
      try {
        var rec = completeWithRetries(rep.attempt, rep.result);
        if (rec.result() != null) {
          StepResult r = rep.result;
          rep.result = new StepResult(r.outcome(), r.code(), r.body(), rec.result().completedUnixMs(), false);
        }
      } catch (IdemException e) {
        throw e.withReport(rep);
      }
    }
    if (raised instanceof RuntimeException re) throw re;
    if (raised instanceof Error er) throw er;
    if (raised != null) {
      throw new IdemException(IdemCode.ACTION_FAILED, "the action threw " + raised, "", "", "", 0, false, raised)
          .withReport(rep);
    }
    if (rep.result.outcome() == Outcome.RETRYABLE) {
      throw new IdemException(IdemCode.STEP_FAILED, "the action reported a retryable failure; the key was released")
          .withReport(rep);
    }
    return rep;
  }

  /** Extends the lease every third of it while the action runs; a refusal marks it lost. */
  private ScheduledFuture<?> keepLease(StepContext ctx, long leaseMs) {
    long period = Math.max(leaseMs / 3, 20);
    long callNanos = Math.min(c.timeout.toNanos(), TimeUnit.MILLISECONDS.toNanos(Math.max(leaseMs / 2, 50)));
    ScheduledFuture<?>[] self = new ScheduledFuture<?>[1];
    Runnable tick = () -> {
      if (ctx.leaseLost()) return;
      try {
        c.extend(key, ctx.attempt(), o.leaseMs(), callNanos, tp);
      } catch (IdemException e) {
        if (e.code() == IdemCode.ABORTED || e.code() == IdemCode.NOT_FOUND || e.code() == IdemCode.FAILED_PRECONDITION) {
          ctx.markLost();
          if (self[0] != null) self[0].cancel(false);
        }
      } catch (RuntimeException e) {
        // a closed client: the completion will say what happened
      }
    };
    synchronized (self) {
      self[0] = c.leases.scheduleWithFixedDelay(tick, period, period, TimeUnit.MILLISECONDS);
    }
    return self[0];
  }
}
