package dev.idem.examples;

import dev.idem.client.IdemClient;
import dev.idem.client.IdemException;
import dev.idem.client.Outcome;
import dev.idem.client.RunReport;
import dev.idem.client.StepKey;
import dev.idem.client.StepOptions;
import dev.idem.client.StepResult;
import dev.idem.client.Types;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.Map;

/**
 * Step.java — your first guarded step from Java (dev.idem.client, the Java SDK), the same flow
 * and the same printed lines as ../c/step.c.
 *
 * <p>A shop charges a card for an order; the double-click sends the same request twice; idem runs
 * the charge once and answers the second request with the first one's result.
 *
 * <pre>
 * client-lib/examples/java/run.sh ORDER-ID
 * </pre>
 *
 * <p>run.sh builds the SDK offline with client-lib/java/build.sh (javac against Debian's jars;
 * `bash client-lib/java/deps.sh .` installs them) and this file, outside the checkout, then runs
 * it. It uses {@link IdemClient#run}, the step helper that reports how the step was settled (ran,
 * replayed) besides its result; {@code step(key, () -> value)} is the same helper returning the
 * value only. IDEM_ADDRESS: the coordinator (default 127.0.0.1:50051); IDEM_TENANT: your tenant
 * (default "shop"). The order id defaults to order-java-1 and the step's service is payment-java,
 * so it runs beside the C, Go, Python and Node examples without sharing their sagas. Exit status:
 * 0 when the charge ran at most once, 1 otherwise.
 */
public final class Step {
  private Step() {}

  /** A pretend payment gateway that counts its charges. */
  static final class Gateway {
    int charges;

    StepResult charge(String orderId, long fencingToken) {
      charges++;
      String receipt = "receipt for " + orderId + ", attempt " + fencingToken;
      return new StepResult(Outcome.SUCCEEDED, 200, receipt.getBytes(StandardCharsets.UTF_8));
    }
  }

  static String env(String name, String def) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? def : v;
  }

  /** One request to pay for the order: what each of the duplicates runs. */
  static RunReport pay(IdemClient idem, String gid, String orderId, long amountCents, Gateway gw)
      throws NoSuchAlgorithmException {
    // the request's identity: a different amount under the same key is refused
    byte[] fp = MessageDigest.getInstance("SHA-256")
        .digest(("order=" + orderId + ";amount=" + amountCents).getBytes(StandardCharsets.UTF_8));
    StepKey key = StepKey.forward(gid, "payment-java", "charge");
    // called only when idem answers PROCEED; pass the attempt on as a fencing token
    RunReport rep = idem.run(key, StepOptions.DEFAULTS.withFingerprint(fp),
        ctx -> gw.charge(orderId, ctx.attempt()));
    if (rep.ran() || rep.replayed()) {
      String how = rep.ran() ? "ran: the gateway was called" : "replayed: the stored result";
      StepResult r = rep.result();
      System.out.println(how + ", outcome " + r.outcome().word() + ", code " + r.code()
          + ", body \"" + r.bodyText() + "\"");
    } else {
      System.out.println("skipped: nothing to run");
    }
    return rep;
  }

  static int run(String[] args) throws NoSuchAlgorithmException {
    String orderId = args.length > 0 ? args[0] : "order-java-1";
    IdemClient idem;
    try {
      idem = IdemClient.builder().address(env("IDEM_ADDRESS", "127.0.0.1:50051"))
          .tenant(env("IDEM_TENANT", "shop")).build();
    } catch (IdemException e) {
      System.err.println("connect: " + e.getMessage());
      return 1;
    }
    try (idem) {
      // One saga per order: the order id is the saga's request id, so a retried checkout finds
      // the same global id instead of starting a second saga.
      Types.SagaStarted saga;
      try {
        saga = idem.beginSaga(orderId, "order", Map.of(), null);
      } catch (IdemException e) {
        System.err.println("begin saga: " + e.getMessage());
        return 1;
      }
      System.out.println("saga " + saga.globalId() + " ("
          + (saga.created() ? "new" : "the order's existing saga") + ")");

      Gateway gw = new Gateway();
      RunReport first;
      RunReport second;
      try {
        first = pay(idem, saga.globalId(), orderId, 4200, gw); // the first click
        second = pay(idem, saga.globalId(), orderId, 4200, gw); // the double-click
      } catch (IdemException e) {
        System.err.println("pay: " + e.getMessage());
        return 1;
      }
      if (gw.charges > 1) {
        System.err.println("the gateway was called " + gw.charges + " times");
        return 1;
      }
      if (!second.replayed() || first.result() == null
          || !Arrays.equals(second.result().body(), first.result().body())) {
        System.err.println("the second request did not replay the first one's result");
        return 1;
      }
      System.out.println("charged " + gw.charges + " time(s) for two requests");
      return 0;
    }
  }

  public static void main(String[] args) throws NoSuchAlgorithmException {
    System.exit(run(args));
  }
}
