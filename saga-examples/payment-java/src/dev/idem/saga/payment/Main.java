package dev.idem.saga.payment;

import dev.idem.client.Decision;
import dev.idem.client.IdemClient;
import dev.idem.client.IdemException;
import dev.idem.client.Outcome;
import dev.idem.client.Phase;
import dev.idem.client.RunReport;
import dev.idem.client.StepKey;
import dev.idem.client.StepOptions;
import dev.idem.client.StepResult;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import shop.v1.PaymentsOuterClass.ChargeRequest;
import shop.v1.PaymentsOuterClass.RefundRequest;
import shop.v1.PaymentsGrpc;
import shop.v1.Step.StepReply;

/**
 * saga-payment-java — the order saga's payment participant in Java, a drop-in replacement of
 * saga-examples/payment/payment.c and payment-go: the same gRPC API (shop.v1.Payments: Charge,
 * Refund), the same flags and SAGA_* environment, the same tables in its own schema (--schema:
 * ledger, accounts, idem_barrier), and the same guarded step: the Java SDK's step helper
 * (IdemClient.run) around the Postgres barrier (Barrier.java). Step keys: (global_id, "payment",
 * "charge", FORWARD) and (…, COMPENSATION) for the refund. A charge over 100000 cents, or for a
 * customer named "declined…", is declined: a definite FAILED, remembered by the barrier and
 * replayed by the coordinator.
 */
public final class Main {
  static final long DECLINE_OVER_CENTS = 100000;

  private Main() {}

  static final class Payments extends PaymentsGrpc.PaymentsImplBase {
    final Opts o;
    final Db db;
    final IdemClient idem;

    Payments(Opts o, Db db, IdemClient idem) {
      this.o = o;
      this.db = db;
      this.idem = idem;
    }

    static StepResult result(Outcome oc, int code, String st) {
      return new StepResult(oc, code, st.getBytes(StandardCharsets.UTF_8));
    }

    static StepResult retryable(String what, SQLException e) {
      System.err.println("payment: " + what + ": " + e.getMessage());
      return new StepResult(Outcome.RETRYABLE, 0, null); // rolled back: nothing happened
    }

    static Barrier.Effect charge(String gid, String customer, long amount) {
      return (tx, attempt) -> {
        if (amount > DECLINE_OVER_CENTS || customer.startsWith("declined")) return result(Outcome.FAILED, 402, "declined");
        try (PreparedStatement a = tx.prepareStatement("INSERT INTO ledger (global_id, customer, kind, amount_cents, fence)"
            + " VALUES (?, ?, 'charge', ?, ?)");
             PreparedStatement b = tx.prepareStatement("INSERT INTO accounts (customer, charged_cents) VALUES (?, ?)"
                 + " ON CONFLICT (customer) DO UPDATE SET charged_cents = accounts.charged_cents + EXCLUDED.charged_cents")) {
          a.setString(1, gid);
          a.setString(2, customer);
          a.setLong(3, amount);
          a.setLong(4, attempt);
          a.executeUpdate();
          b.setString(1, customer);
          b.setLong(2, amount);
          b.executeUpdate();
        } catch (SQLException e) {
          return retryable("charge", e);
        }
        return result(Outcome.SUCCEEDED, 200, "charged");
      };
    }

    /** The compensation: refunds what the ledger says was charged for this saga. */
    static Barrier.Effect refund(String gid) {
      return (tx, attempt) -> {
        try {
          String customer;
          long amount;
          try (PreparedStatement q = tx.prepareStatement("SELECT customer, amount_cents FROM ledger"
              + " WHERE global_id = ? AND kind = 'charge' ORDER BY id LIMIT 1")) {
            q.setString(1, gid);
            try (ResultSet rs = q.executeQuery()) {
              if (!rs.next()) return result(Outcome.SUCCEEDED, 200, "nothing_charged");
              customer = rs.getString(1);
              amount = rs.getLong(2);
            }
          }
          try (PreparedStatement a = tx.prepareStatement("INSERT INTO ledger (global_id, customer, kind, amount_cents, fence)"
              + " VALUES (?, ?, 'refund', ?, ?)");
               PreparedStatement b = tx.prepareStatement("UPDATE accounts SET charged_cents = charged_cents - ? WHERE customer = ?")) {
            a.setString(1, gid);
            a.setString(2, customer);
            a.setLong(3, amount);
            a.setLong(4, attempt);
            a.executeUpdate();
            b.setLong(1, amount);
            b.setString(2, customer);
            b.executeUpdate();
          }
        } catch (SQLException e) {
          return retryable("refund", e);
        }
        return result(Outcome.SUCCEEDED, 200, "refunded");
      };
    }

    static String statusWord(byte[] body) {
      return new String(Arrays.copyOf(body, Math.min(body.length, 31)), StandardCharsets.UTF_8);
    }

    /**
     * One guarded step: the SDK's run (fingerprint = SHA-256 of the canonical request) whose
     * action is the barrier transaction between two crash points. Errors as sx_step_run:
     * FAILED_PRECONDITION / INVALID_ARGUMENT as they are, ABORTED, else UNAVAILABLE (try again).
     */
    StepReply step(String gid, Phase phase, String canonical, Barrier.Effect fn) {
      Connection probe = null;
      boolean up;
      try {
        probe = db.take();
        up = probe.isValid(5);
      } catch (SQLException e) {
        up = false;
      }
      db.give(probe, !up);
      if (!up) throw Status.UNAVAILABLE.withDescription("payment: database unavailable").asRuntimeException();
      StepKey key = new StepKey(gid, "payment", "charge", phase);
      byte[] fp;
      try {
        fp = MessageDigest.getInstance("SHA-256").digest(canonical.getBytes(StandardCharsets.UTF_8));
      } catch (java.security.NoSuchAlgorithmException e) {
        throw Status.INTERNAL.withDescription("SHA-256 missing").asRuntimeException();
      }
      StepOptions so = StepOptions.DEFAULTS.withFingerprint(fp).withTimeout(Duration.ofMillis(o.stepDeadlineMs))
          .withLeaseMs((int) o.leaseMs).withBackoff(Duration.ofMillis(20), Duration.ofMillis(200));
      boolean[] appliedEarlier = new boolean[1];
      String where = key.service() + " " + key.operation();
      RunReport rep;
      try {
        rep = idem.run(key, so, ctx -> {
          o.crash(Opts.AFTER_BEGIN, key.operation());
          Connection c = null;
          boolean broken = false;
          Barrier.Report br;
          try {
            c = db.take();
            br = Barrier.run(c, key, ctx.attempt(), fn);
          } catch (Barrier.CommitFailed e) { // a failed COMMIT may have committed: say so
            System.err.println("barrier: " + e.getMessage());
            broken = true;
            return new StepResult(Outcome.UNKNOWN, 0, null);
          } catch (SQLException e) { // anything else rolled back
            System.err.println("barrier: " + e.getMessage());
            broken = true;
            return new StepResult(Outcome.RETRYABLE, 0, null);
          } finally {
            db.give(c, broken);
          }
          StepResult out = br.rolledBack() ? new StepResult(Outcome.RETRYABLE, 0, null) : br.result();
          appliedEarlier[0] = br.appliedEarlier();
          o.crash(Opts.AFTER_WRITE, key.operation());
          return out;
        });
      } catch (IdemException e) {
        Status s = switch (e.code()) {
          case STEP_FAILED -> Status.UNAVAILABLE.withDescription(where + ": not done, try again");
          case FAILED_PRECONDITION -> Status.FAILED_PRECONDITION.withDescription(where + ": " + e.getMessage());
          case INVALID_ARGUMENT -> Status.INVALID_ARGUMENT.withDescription(where + ": " + e.getMessage());
          case ABORTED -> Status.ABORTED.withDescription(where + ": " + e.getMessage());
          default -> Status.UNAVAILABLE.withDescription(where + ": " + e.getMessage());
        };
        throw s.asRuntimeException();
      }
      if (rep.ran()) o.crash(Opts.AFTER_COMPLETE, key.operation());
      StepReply.Builder r = StepReply.newBuilder().setDecision(rep.decision().name().toLowerCase(Locale.ROOT))
          .setAttempt(rep.attempt()).setTakeover(rep.takeover()).setRan(rep.ran()).setAppliedEarlier(appliedEarlier[0]);
      if (rep.decision() == Decision.SKIP_NULL_COMPENSATION || rep.decision() == Decision.SKIP_ALREADY_COMPENSATED) {
        r.setStatus("skipped");
      } else {
        r.setStatus(statusWord(rep.result().body()));
      }
      return r.build();
    }

    @Override
    public void charge(ChargeRequest in, StreamObserver<StepReply> out) {
      if (in.getGlobalId().isEmpty() || in.getCustomer().isEmpty() || in.getAmountCents() <= 0) {
        out.onError(Status.INVALID_ARGUMENT.withDescription("global_id, customer and a positive amount_cents are required")
            .asRuntimeException());
        return;
      }
      String fp = "charge\n" + in.getGlobalId() + "\n" + in.getCustomer() + "\n" + in.getAmountCents();
      answer(out, () -> step(in.getGlobalId(), Phase.FORWARD, fp, charge(in.getGlobalId(), in.getCustomer(), in.getAmountCents())));
    }

    @Override
    public void refund(RefundRequest in, StreamObserver<StepReply> out) {
      if (in.getGlobalId().isEmpty()) {
        out.onError(Status.INVALID_ARGUMENT.withDescription("global_id is required").asRuntimeException());
        return;
      }
      answer(out, () -> step(in.getGlobalId(), Phase.COMPENSATION, "refund\n" + in.getGlobalId(), refund(in.getGlobalId())));
    }

    interface Call {
      StepReply get();
    }

    static void answer(StreamObserver<StepReply> out, Call c) {
      StepReply r;
      try {
        r = c.get();
      } catch (io.grpc.StatusRuntimeException e) {
        out.onError(e);
        return;
      } catch (RuntimeException e) {
        out.onError(Status.UNAVAILABLE.withDescription("payment: " + e).asRuntimeException());
        return;
      }
      out.onNext(r);
      out.onCompleted();
    }
  }

  public static void main(String[] args) throws Exception {
    Opts o = Opts.parse(args);
    Db db;
    try {
      db = new Db(o);
    } catch (SQLException e) {
      System.err.println("payment: cannot set up schema " + o.schema + ": " + e.getMessage());
      System.exit(1);
      return;
    }
    IdemClient idem;
    try {
      idem = IdemClient.builder().address(o.coordinator).tenant(o.tenant).timeout(Duration.ofSeconds(3)).build();
    } catch (IdemException e) {
      System.err.println("cannot create the coordinator client: " + e.getMessage());
      System.exit(1);
      return;
    }
    int c = o.listen.lastIndexOf(':');
    ExecutorService pool = Executors.newFixedThreadPool(o.threads);
    Server srv;
    try {
      String host = o.listen.substring(0, c).replace("[", "").replace("]", "");
      srv = NettyServerBuilder.forAddress(new InetSocketAddress(host, Integer.parseInt(o.listen.substring(c + 1))))
          .executor(pool).addService(new Payments(o, db, idem)).build().start();
    } catch (Exception e) {
      System.err.println("cannot listen on " + o.listen);
      System.exit(1);
      return;
    }
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> { // SIGTERM drains: running calls finish (at most 10 s)
      srv.shutdown();
      try {
        if (!srv.awaitTermination(10, TimeUnit.SECONDS)) srv.shutdownNow();
      } catch (InterruptedException e) {
        srv.shutdownNow();
      }
      idem.close();
      db.close();
      pool.shutdownNow();
      stopped.countDown();
      // a drained SIGTERM is a clean stop: exit 0 as the C, Go and Node services do (the JVM
      // would report 143 for the signal)
      Runtime.getRuntime().halt(0);
    }));
    System.out.println("listening on " + o.listen);
    System.out.flush();
    srv.awaitTermination();
    stopped.await();
  }

}
