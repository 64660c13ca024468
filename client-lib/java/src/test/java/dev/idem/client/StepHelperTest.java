package dev.idem.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.idem.support.Coordinator;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** The step helper and the calls against a real coordinator (docs/api.md §20). */
class StepHelperTest {
  static Coordinator coord;
  static IdemClient client;
  static String tenant;

  @BeforeAll
  static void start() throws IOException {
    coord = new Coordinator();
    tenant = Coordinator.unique("java");
    client = IdemClient.builder().address(coord.address).tenant(tenant).build();
  }

  @AfterAll
  static void stop() {
    if (client != null) client.close();
    if (coord != null) coord.close();
  }

  static StepKey key(String op) {
    return StepKey.forward(client.beginSaga().globalId(), "payment", op);
  }

  static void invalid(String field, Executable e) {
    IdemException x = assertThrows(IdemException.class, e);
    assertEquals(IdemCode.INVALID_ARGUMENT, x.code(), x.getMessage());
    assertEquals(field, x.field(), x.getMessage());
    assertTrue(x.getMessage().contains(field), x.getMessage());
  }

  @Test
  void badInputNamesTheFieldAndRunsNothing() {
    invalid("address", () -> IdemClient.builder().address("nohost").build());
    invalid("address", () -> IdemClient.builder().build());
    invalid("tenant", () -> IdemClient.builder().address("127.0.0.1:1").tenant("a b").build());
    invalid("timeout", () -> IdemClient.builder().address("127.0.0.1:1").timeout(Duration.ZERO).build());
    AtomicInteger ran = new AtomicInteger();
    StepAction a = ctx -> {
      ran.incrementAndGet();
      return StepResult.succeeded("x");
    };
    invalid("global_id", () -> client.run(StepKey.forward("", "payment", "charge"), a));
    invalid("global_id", () -> client.run(StepKey.forward("a/b", "payment", "charge"), a));
    invalid("service", () -> client.run(StepKey.forward("g1", "Payment", "charge"), a));
    invalid("operation", () -> client.run(StepKey.forward("g1", "payment", "x".repeat(65)), a));
    invalid("fingerprint", () -> client.run(key("fp"), StepOptions.DEFAULTS.withFingerprint(new byte[65]), a));
    invalid("traceparent", () -> client.run(key("tp"), StepOptions.DEFAULTS.withTraceparent("00-xyz"), a));
    invalid("lease_ms", () -> client.run(key("lease"), StepOptions.DEFAULTS.withLeaseMs(-1), a));
    invalid("body", () -> client.run(key("body"), ctx -> new StepResult(Outcome.SUCCEEDED, 0, new byte[64 * 1024 + 1])));
    assertEquals(0, ran.get());
  }

  @Test
  void typedStepRunsOnceAndReplaysTheValue() {
    StepKey k = key("charge");
    AtomicInteger ran = new AtomicInteger();
    String first = client.step(k, () -> "receipt-" + ran.incrementAndGet());
    String again = client.step(k, () -> "receipt-" + ran.incrementAndGet());
    assertEquals("receipt-1", first);
    assertEquals("receipt-1", again);
    assertEquals(1, ran.get());
    Types.StepRecord rec = client.lookup(k);
    assertEquals("succeeded", rec.state());
    assertEquals("receipt-1", rec.result().bodyText());

    Codec<Integer> ints = new Codec<>() {
      @Override
      public byte[] encode(Integer v) { return v.toString().getBytes(StandardCharsets.UTF_8); }

      @Override
      public Integer decode(byte[] b) { return Integer.valueOf(new String(b, StandardCharsets.UTF_8)); }
    };
    StepKey k2 = key("count");
    assertEquals(42, client.step(k2, ints, () -> 42));
    assertEquals(42, client.step(k2, ints, () -> 7));
  }

  @Test
  void reportsOfRunReplayAndFingerprint() {
    StepKey k = key("raw");
    byte[] fp = "order-1".getBytes(StandardCharsets.UTF_8);
    StepOptions o = StepOptions.DEFAULTS.withFingerprint(fp);
    RunReport r1 = client.run(k, o, ctx -> StepResult.succeeded(201, "made"));
    assertEquals(Decision.PROCEED, r1.decision());
    assertTrue(r1.ran());
    assertEquals(1, r1.attempt());
    assertTrue(r1.result().completedUnixMs() > 0);
    RunReport r2 = client.run(k, o, ctx -> StepResult.succeeded(201, "again"));
    assertEquals(Decision.REPLAY, r2.decision());
    assertTrue(r2.replayed());
    assertFalse(r2.ran());
    assertEquals("made", r2.result().bodyText());
    assertEquals(201, r2.result().code());
    IdemException x = assertThrows(IdemException.class,
        () -> client.run(k, o.withFingerprint("order-2".getBytes(StandardCharsets.UTF_8)), ctx -> StepResult.succeeded("no")));
    assertEquals(IdemCode.FAILED_PRECONDITION, x.code());
    assertEquals("fingerprint-mismatch", x.reason());
    assertArrayEquals(fp, client.lookup(k).fingerprint());
  }

  @Test
  void failuresAreStoredReplayedAndRetryableReleases() {
    StepKey k = key("declined");
    AtomicInteger ran = new AtomicInteger();
    StepFailedException f1 = assertThrows(StepFailedException.class, () -> client.step(k, () -> {
      ran.incrementAndGet();
      throw StepFailure.failed(402, "card declined");
    }));
    assertEquals(Outcome.FAILED, f1.outcome());
    assertEquals(402, f1.resultCode());
    assertFalse(f1.replayed());
    StepFailedException f2 = assertThrows(StepFailedException.class, () -> client.step(k, () -> "ok"));
    assertTrue(f2.replayed());
    assertEquals("card declined", f2.result().bodyText());
    assertEquals(1, ran.get());

    StepKey r = key("busy");
    StepFailedException f3 = assertThrows(StepFailedException.class,
        () -> client.step(r, () -> { throw StepFailure.retryable(503, "downstream busy"); }));
    assertEquals(Outcome.RETRYABLE, f3.outcome());
    assertEquals(IdemCode.STEP_FAILED, f3.code());
    assertEquals(1, f3.report().attempt());
    assertEquals("released", client.lookup(r).state());
    RunReport again = client.run(r, ctx -> StepResult.succeeded("second try"));
    assertEquals(2, again.attempt());
    assertTrue(again.ran());
  }

  @Test
  void anExceptionCompletesUnknownAndIsThrownAgain() {
    StepKey k = key("boom");
    IllegalStateException boom = new IllegalStateException("boom");
    IllegalStateException got = assertThrows(IllegalStateException.class, () -> client.step(k, () -> { throw boom; }));
    assertSame(boom, got);
    assertEquals("unknown", client.lookup(k).state());
    StepKey k2 = key("checked");
    IdemException x = assertThrows(IdemException.class, () -> client.step(k2, () -> { throw new IOException("disk"); }));
    assertEquals(IdemCode.ACTION_FAILED, x.code());
    assertTrue(x.getCause() instanceof IOException);
    assertEquals("unknown", client.lookup(k2).state());
    // an unknown outcome is replayed as such, without running
    StepFailedException f = assertThrows(StepFailedException.class, () -> client.step(k, () -> "late"));
    assertEquals(Outcome.UNKNOWN, f.outcome());
    assertTrue(f.replayed());
  }

  @Test
  void concurrentAsyncStepsRunTheActionOnce() {
    StepKey k = key("race");
    AtomicInteger ran = new AtomicInteger();
    List<CompletableFuture<String>> fs = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      fs.add(client.stepAsync(k, () -> {
        ran.incrementAndGet();
        Thread.sleep(200);
        return "once";
      }));
    }
    for (CompletableFuture<String> f : fs) assertEquals("once", f.orTimeout(30, TimeUnit.SECONDS).join());
    assertEquals(1, ran.get());
  }

  @Test
  void theLeaseIsExtendedWhileTheActionRuns() {
    StepKey k = key("long");
    List<String> other = new CopyOnWriteArrayList<>();
    RunReport rep = client.run(k, StepOptions.DEFAULTS.withLeaseMs(500), ctx -> {
      // three leases long: without ExtendLease another caller would take the step over
      long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
      while (System.nanoTime() < end) {
        try {
          client.beginStep(k, null, 0, 0);
          other.add("proceed");
        } catch (IdemException e) {
          other.add(e.reason());
        }
        Thread.sleep(100);
      }
      return StepResult.succeeded("done");
    });
    assertEquals(1, rep.attempt());
    assertFalse(rep.takeover());
    assertFalse(other.isEmpty());
    assertEquals(Set.of("in-progress"), Set.copyOf(other), other.toString());
    assertEquals("succeeded", client.lookup(k).state());
  }

  @Test
  void aLostLeaseStopsTheCompletion() {
    String idemctl = Coordinator.need("IDEM_IDEMCTL_BIN");
    StepKey k = key("lost");
    IdemException x = assertThrows(IdemException.class, () -> client.run(k, StepOptions.DEFAULTS.withLeaseMs(300), ctx -> {
      // an operator settles the step while it runs: the lease is gone
      Process p = new ProcessBuilder(idemctl, "--addr", coord.address, "--tenant", tenant, "resolve", k.globalId(),
          k.service(), k.operation(), "--outcome", "failed", "--code", "409", "--reason", "test", "--yes")
          .redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertEquals(0, p.waitFor(), out);
      assertTrue(ctx.awaitLeaseLost(5000), "the lease to be reported lost");
      return StepResult.succeeded("late");
    }));
    assertEquals(IdemCode.ABORTED, x.code());
    assertEquals("lease-lost", x.reason());
    assertTrue(x.report().ran());
    Types.StepRecord rec = client.lookup(k);
    assertEquals("failed", rec.state());
    assertEquals(409, rec.result().code());
  }

  @Test
  void noCoordinatorFailClosedDoesNotRun() throws IOException {
    int dead = Coordinator.freePort();
    try (IdemClient c = IdemClient.builder().address("127.0.0.1:" + dead).timeout(Duration.ofMillis(300)).build()) {
      AtomicInteger ran = new AtomicInteger();
      IdemException x = assertThrows(IdemException.class, () -> c.run(StepKey.forward("g-dead", "payment", "charge"),
          StepOptions.DEFAULTS.withTimeout(Duration.ofMillis(800)), ctx -> {
            ran.incrementAndGet();
            return StepResult.succeeded("x");
          }));
      assertTrue(x.code() == IdemCode.UNAVAILABLE || x.code() == IdemCode.DEADLINE_EXCEEDED, x.toString());
      assertEquals(0, ran.get());
    }
  }

  @Test
  void journalLinesAreReconciledByIdemctl() throws Exception {
    String idemctl = Coordinator.need("IDEM_IDEMCTL_BIN");
    String gid = client.beginSaga().globalId();
    record Case(StepKey key, byte[] fp, StepResult res, String state) {}
    List<Case> cases = List.of(
        new Case(StepKey.forward(gid, "payment", "open-op"), new byte[] {1, (byte) 0xfe},
            new StepResult(Outcome.SUCCEEDED, 200, "paid 5% - ok\n".getBytes(StandardCharsets.UTF_8)), "succeeded"),
        new Case(StepKey.forward(gid, "payment", "dash"), new byte[0], StepResult.failed(402, "-"), "failed"),
        new Case(StepKey.compensation(gid, "payment", "empty"), new byte[0], StepResult.succeeded(""), "succeeded"));
    Path path = Files.createTempFile("java-journal", ".log");
    try {
      for (Case c : cases) Journal.append(path, Journal.line("client", tenant, c.key(), c.fp(), c.res()));
      Process p = new ProcessBuilder(idemctl, "--addr", coord.address, "--tenant", tenant, "reconcile", path.toString())
          .redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertEquals(0, p.waitFor(), out);
    } finally {
      Files.deleteIfExists(path);
    }
    for (Case c : cases) {
      Types.StepRecord rec = client.lookup(c.key());
      assertEquals(c.state(), rec.state());
      assertEquals(c.res().code(), rec.result().code());
      assertArrayEquals(c.res().body(), rec.result().body());
      assertArrayEquals(c.fp(), rec.fingerprint());
    }
  }

  @Test
  void skipsRunNothingAndTypedSkipsReturnNull() {
    String gid = client.beginSaga().globalId();
    AtomicInteger ran = new AtomicInteger();
    assertEquals(null, client.step(StepKey.compensation(gid, "payment", "reserve"), StepOptions.DEFAULTS, Codec.STRING,
        ctx -> "released-" + ran.incrementAndGet()));
    RunReport r = client.run(StepKey.forward(gid, "payment", "reserve"), ctx -> {
      ran.incrementAndGet();
      return StepResult.succeeded("late");
    });
    assertEquals(Decision.SKIP_ALREADY_COMPENSATED, r.decision());
    assertEquals(0, ran.get());
  }

  /** a retention or lease of 0 takes the built-in default, as in every SDK; the key's retention can be set. */
  @Test
  void setPolicyFillsTheDefaultsAndTakesKeyRetention() {
    Types.Policy p = client.setPolicy("payment", "defaults", FailureMode.FAIL_OPEN, 0, 0);
    assertEquals(86400, p.retentionS());
    assertEquals(30000, p.leaseMs());
    assertEquals(0, p.keyRetentionS());
    p = client.setPolicy("payment", "kept", FailureMode.FAIL_CLOSED, 3600, 1000, 7200);
    assertEquals(7200, p.keyRetentionS());
    assertEquals(7200, client.getPolicy("payment", "kept").keyRetentionS());
    invalid("retention_s", () -> client.setPolicy("payment", "x", FailureMode.FAIL_OPEN, -1, 0));
    invalid("key_retention_s", () -> client.setPolicy("payment", "x", FailureMode.FAIL_OPEN, 0, 0, -1));
  }
}
