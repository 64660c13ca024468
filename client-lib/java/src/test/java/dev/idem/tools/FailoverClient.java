package dev.idem.tools;

import dev.idem.client.IdemClient;
import dev.idem.client.IdemException;
import dev.idem.client.RunReport;
import dev.idem.client.StepKey;
import dev.idem.client.StepOptions;
import dev.idem.client.StepResult;
import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * FailoverClient — runs steps through the Java SDK's step helper (IdemClient.run) for the per-SDK
 * figures (bench/sdk-bench). The same command line as client-lib/go/cmd/idem-failover-client,
 * client-lib/node/test/failover-client.js and client-lib/python/tests/failover_client.py:
 *
 * <pre>
 * FailoverClient --addresses LEADER,STANDBY --tenant T --ledger FILE --prefix P
 *     --steps N --duration S [--repeat 3] [--workers 4] [--lease-ms 3000] [--bench]
 * </pre>
 *
 * Failover mode: keys P-0 … P-(N-1), each run --repeat times (later rounds replay); --workers
 * threads take the runs in turn; the action appends "KEY ATTEMPT" to the ledger and syncs it; a
 * run that ends in an error is counted and run again until it settles or --duration passes
 * ("unsettled"). Bench mode (--bench): --workers (16 unless given) run a new key each with an
 * action that does nothing, for --duration seconds. Prints one JSON line: sdk, mode, runs, ran,
 * replayed, takeovers, errors {code: n}, unsettled, elapsed_ms, and in bench mode pairs_per_s,
 * p50_ms, p99_ms. Exits 0 when the summary was printed, 2 on bad arguments.
 */
public final class FailoverClient {
  private FailoverClient() {}

  static void usage(String why) {
    System.err.println("FailoverClient: " + why);
    System.exit(2);
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> a = new TreeMap<>();
    boolean bench = false;
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--bench")) {
        bench = true;
      } else if (args[i].startsWith("--") && i + 1 < args.length) {
        a.put(args[i].substring(2), args[++i]);
      } else {
        usage("unknown argument " + args[i]);
      }
    }
    if (!a.containsKey("addresses") || !a.containsKey("tenant") || !a.containsKey("prefix")) {
      usage("--addresses, --tenant and --prefix are required");
    }
    int steps = Integer.parseInt(a.getOrDefault("steps", "0"));
    int repeat = Integer.parseInt(a.getOrDefault("repeat", "3"));
    double duration = Double.parseDouble(a.getOrDefault("duration", "30"));
    int w = Integer.parseInt(a.getOrDefault("workers", "0"));
    int leaseMs = Integer.parseInt(a.getOrDefault("lease-ms", "3000"));
    String ledgerPath = a.getOrDefault("ledger", "");
    if (!bench && (ledgerPath.isEmpty() || steps <= 0 || repeat <= 0)) usage("failover mode needs --ledger, --steps > 0 and --repeat > 0");
    if (duration <= 0) usage("--duration must be > 0");
    final boolean isBench = bench;
    int workers = w > 0 ? w : bench ? 16 : 4;
    String prefix = a.get("prefix");
    long total = (long) steps * repeat;

    IdemClient client = IdemClient.builder().address(a.get("addresses")).tenant(a.get("tenant")).build();
    FileOutputStream ledger = bench ? null : new FileOutputStream(ledgerPath, true);
    Object lock = new Object();
    AtomicLong counter = new AtomicLong();
    long[] runs = new long[1], ran = new long[1], replayed = new long[1], takeovers = new long[1], unsettled = new long[1];
    Map<String, Long> errors = new TreeMap<>();
    List<Long> lat = new ArrayList<>();
    long start = System.nanoTime();
    long end = start + (long) (duration * 1e9);
    StepOptions opts = StepOptions.DEFAULTS.withLeaseMs(leaseMs);
    List<Thread> ts = new ArrayList<>();
    for (int t = 0; t < workers; t++) {
      Thread th = new Thread(() -> {
        List<Long> mine = new ArrayList<>();
        while (true) {
          long n = counter.getAndIncrement();
          String gid;
          if (isBench) {
            if (System.nanoTime() - end >= 0) break;
            gid = prefix + "-" + n;
          } else {
            if (n >= total) break;
            gid = prefix + "-" + (n % steps);
          }
          StepKey key = StepKey.forward(gid, "failover", "step");
          while (true) {
            long left = end - System.nanoTime();
            if (left <= 0) {
              synchronized (lock) {
                unsettled[0]++;
              }
              break;
            }
            long t0 = System.nanoTime();
            try {
              RunReport rep = client.run(key, opts.withTimeout(Duration.ofNanos(isBench ? 10_000_000_000L : Math.min(10_000_000_000L, left))), ctx -> {
                if (ledger != null) {
                  synchronized (lock) {
                    ledger.write((gid + " " + ctx.attempt() + "\n").getBytes(StandardCharsets.UTF_8));
                    ledger.getFD().sync();
                  }
                }
                return StepResult.succeeded(200, gid);
              });
              mine.add(System.nanoTime() - t0);
              synchronized (lock) {
                runs[0]++;
                if (rep.ran()) ran[0]++;
                if (rep.replayed()) replayed[0]++;
                if (rep.takeover()) takeovers[0]++;
              }
              break;
            } catch (IdemException e) {
              synchronized (lock) {
                errors.merge(e.code().name(), 1L, Long::sum);
              }
              if (isBench) break;
            }
          }
        }
        synchronized (lock) {
          lat.addAll(mine);
        }
      });
      ts.add(th);
      th.start();
    }
    for (Thread th : ts) th.join();
    double elapsed = (System.nanoTime() - start) / 1e9;
    StringBuilder out = new StringBuilder();
    out.append("{\"sdk\": \"java\", \"mode\": \"").append(bench ? "bench" : "failover").append("\", \"runs\": ").append(runs[0])
        .append(", \"ran\": ").append(ran[0]).append(", \"replayed\": ").append(replayed[0])
        .append(", \"takeovers\": ").append(takeovers[0]).append(", \"errors\": {");
    int i = 0;
    for (var e : errors.entrySet()) out.append(i++ > 0 ? ", " : "").append('"').append(e.getKey()).append("\": ").append(e.getValue());
    out.append("}, \"unsettled\": ").append(unsettled[0]).append(", \"elapsed_ms\": ").append((long) (elapsed * 1000));
    if (bench && !lat.isEmpty()) {
      Collections.sort(lat);
      out.append(String.format(", \"pairs_per_s\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f", runs[0] / elapsed,
          lat.get((int) (0.50 * (lat.size() - 1))) / 1e6, lat.get((int) (0.99 * (lat.size() - 1))) / 1e6));
    }
    out.append('}');
    client.close();
    if (ledger != null) ledger.close();
    System.out.println(out);
  }

}
