package dev.idem.conformance;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.idem.client.FailureMode;
import dev.idem.client.IdemClient;
import dev.idem.client.IdemException;
import dev.idem.client.Outcome;
import dev.idem.client.Phase;
import dev.idem.client.RunReport;
import dev.idem.client.StepKey;
import dev.idem.client.StepOptions;
import dev.idem.client.StepResult;
import dev.idem.client.Types;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * The Java SDK's runner of client-lib/conformance/scenarios.json:
 *
 * <pre>client-lib/conformance/run client-lib/java/conformance.sh BUILD_DIR [NAME...]</pre>
 *
 * Reads the environment client-lib/conformance/README.md describes, runs each scenario (or the
 * named ones), prints {@code ok NAME} or {@code not ok NAME: what differed} a line ({@code skip
 * NAME: needs WHAT} for a scenario that needs a capability this runner lacks), and exits 0 only
 * when every scenario it ran passed. ConformanceTest runs the same scenarios as JUnit tests.
 */
public final class Runner {
  private Runner() {}

  /** The capabilities a scenario's "needs" may name that this runner has (none: the Java SDK has
   *  no ResolveStep, "resolve"). */
  static final Set<String> HAS = Set.of();

  /** The first capability sc needs that this runner lacks; null when none. */
  static String lacks(JsonObject sc) {
    if (!sc.has("needs")) return null;
    for (JsonElement n : sc.getAsJsonArray("needs")) {
      if (!HAS.contains(n.getAsString())) return n.getAsString();
    }
    return null;
  }

  static String env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) {
      throw new IllegalStateException(name + " is not set (run through client-lib/conformance/run)");
    }
    return v;
  }

  /** The scenarios of scenarios.json, in order. */
  public static List<JsonObject> scenarios() throws IOException {
    Path f = Path.of(env("IDEM_CONFORMANCE_DIR"), "scenarios.json");
    JsonObject doc = JsonParser.parseString(Files.readString(f)).getAsJsonObject();
    List<JsonObject> out = new ArrayList<>();
    for (JsonElement e : doc.getAsJsonArray("scenarios")) out.add(e.getAsJsonObject());
    return out;
  }

  private static String str(JsonObject o, String k, String dflt) {
    return o.has(k) && !o.get(k).isJsonNull() ? o.get(k).getAsString() : dflt;
  }

  private static int num(JsonObject o, String k, int dflt) {
    return o.has(k) ? o.get(k).getAsInt() : dflt;
  }

  private static byte[] utf8(String s) { return s.getBytes(StandardCharsets.UTF_8); }

  static final class Scenario implements AutoCloseable {
    final JsonObject sc;
    final IdemClient client;
    final Path journal;
    final String gid;
    final Map<String, CompletableFuture<Map<String, Object>>> background = new HashMap<>();
    final Map<String, Long> counted = new HashMap<>(); // count_calls: the last total of each method

    Scenario(JsonObject sc, String tmp) throws IOException {
      this.sc = sc;
      String addr = switch (str(sc, "client", "leader")) {
        case "standby" -> env("IDEM_STANDBY_ADDRESS");
        case "stoppable" -> env("IDEM_STOPPABLE_ADDRESS");
        case "lossy" -> env("IDEM_LOSSY_ADDRESS");
        default -> env("IDEM_ADDRESS");
      };
      Path j = null;
      if (sc.has("journal") && sc.get("journal").getAsBoolean()) {
        j = Path.of(tmp, "journal-java-" + str(sc, "name", "x") + "-" + ProcessHandle.current().pid() + ".log");
        Files.deleteIfExists(j);
      }
      this.journal = j;
      this.client = IdemClient.builder().address(addr).timeout(Duration.ofSeconds(2)).journal(j).build();
      this.gid = client.beginSaga(null, "", Map.of(), Duration.ofSeconds(10)).globalId();
    }

    StepKey key(JsonObject c) {
      Phase p = "compensation".equals(str(c, "phase", "forward")) ? Phase.COMPENSATION : Phase.FORWARD;
      return new StepKey(gid, str(c, "service", "conformance"), str(c, "step", ""), p);
    }

    Map<String, Object> run(JsonObject c) {
      JsonObject act = c.has("action") ? c.getAsJsonObject("action") : new JsonObject();
      JsonObject opts = c.has("options") ? c.getAsJsonObject("options") : new JsonObject();
      Map<String, Object> got = new HashMap<>();
      got.put("ran", false);
      StepOptions o = StepOptions.DEFAULTS.withFingerprint(utf8(str(c, "fingerprint", "")))
          .withTimeout(Duration.ofMillis(num(opts, "deadline_ms", 10000)));
      if (opts.has("no_wait") && opts.get("no_wait").getAsBoolean()) o = o.withInProgress(StepOptions.InProgress.BACKOFF);
      o = o.withLeaseMs(num(opts, "lease_ms", 0));
      long sleepMs = num(act, "sleep_ms", 0);
      try {
        RunReport rep = client.run(key(c), o, ctx -> {
          got.put("ran", true);
          if (sleepMs > 0) {
            try {
              Thread.sleep(sleepMs);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
          return new StepResult(Outcome.ofWord(str(act, "outcome", "succeeded")), num(act, "code", 0),
              utf8(str(act, "body", "")));
        });
        got.put("ok", true);
        got.put("replayed", rep.replayed());
        got.put("takeover", rep.takeover());
        got.put("unguarded", rep.unguarded());
        got.put("journaled", rep.journaled());
        got.put("decision", rep.decision().name());
        got.put("attempt", rep.attempt());
        if (rep.result() != null) {
          got.put("outcome", rep.result().outcome().word());
          got.put("code", (long) rep.result().code());
          got.put("body", rep.result().bodyText());
        }
      } catch (IdemException e) {
        got.put("ok", false);
        got.put("error", e.code().name());
        got.put("reason", e.reason());
        got.put("detail", e.coordinatorDetail());
        got.put("hint", e.hint());
        got.put("outcome_unknown", e.outcomeUnknown());
        if (e.report() != null) {
          got.put("attempt", e.report().attempt());
          got.put("takeover", e.report().takeover());
        }
      }
      return got;
    }

    /** One call's result, or null for a background run. */
    Map<String, Object> call(JsonObject c) throws Exception {
      String kind = str(c, "call", "");
      if (kind.equals("run") && c.has("background")) {
        background.put(c.get("background").getAsString(), CompletableFuture.supplyAsync(() -> run(c)));
        return null;
      }
      if (kind.equals("run")) return run(c);
      if (kind.equals("join")) return background.remove(c.get("background").getAsString()).get();
      Map<String, Object> got = new HashMap<>();
      try {
        switch (kind) {
          case "begin" -> {
            Types.Begin b = client.beginStep(key(c), utf8(str(c, "fingerprint", "")), num(c, "lease_ms", 0), 0);
            got.put("decision", b.decision().name());
            got.put("attempt", b.attempt());
          }
          case "complete" -> {
            JsonObject r = c.has("result") ? c.getAsJsonObject("result") : new JsonObject();
            client.completeStep(key(c), c.get("attempt").getAsLong(), new StepResult(
                Outcome.ofWord(str(r, "outcome", "succeeded")), num(r, "code", 0), utf8(str(r, "body", ""))));
          }
          case "policy_set" -> {
            // as given (absent = 0): 0 is the SDK's to fill with the built-in default
            Types.Policy p = client.setPolicy(str(c, "service", ""), str(c, "operation", ""),
                FailureMode.ofWord(str(c, "failure_mode", "")), num(c, "retention_s", 0), num(c, "lease_ms", 0),
                num(c, "key_retention_s", 0));
            got.put("retention_s", (long) p.retentionS());
            got.put("lease_ms", (long) p.leaseMs());
            got.put("key_retention_s", (long) p.keyRetentionS());
          }
          case "sleep" -> Thread.sleep(num(c, "ms", 0));
          case "count_calls" -> got.put("count", countCalls(str(c, "method", ""), str(c, "code", "OK")));
          case "policy_prefetch" -> client.prefetchPolicy(str(c, "service", ""), str(c, "operation", ""));
          case "stop_coordinator" -> {
            Process p = new ProcessBuilder("sh", "-c", env("IDEM_CONFORMANCE_STOP")).inheritIO().start();
            if (p.waitFor() != 0) throw new IllegalStateException("IDEM_CONFORMANCE_STOP failed");
          }
          case "faults" -> { // the lossy front's rules: a new file renamed over the old
            Path file = Path.of(env("IDEM_CONFORMANCE_FAULTS"));
            Path fresh = Path.of(file + ".new");
            JsonObject doc = new JsonObject();
            doc.add("rules", c.has("rules") ? c.get("rules") : new JsonArray());
            Files.writeString(fresh, doc.toString());
            Files.move(fresh, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                java.nio.file.StandardCopyOption.ATOMIC_MOVE);
          }
          case "journal_lines" -> {
            long n = 0;
            if (journal != null && Files.exists(journal)) {
              n = Files.readAllLines(journal).stream().filter(l -> !l.isBlank()).count();
            }
            got.put("count", n);
          }
          default -> throw new IllegalArgumentException("unknown call " + kind);
        }
        got.put("ok", true);
      } catch (IdemException e) {
        got.put("ok", false);
        got.put("error", e.code().name());
        got.put("reason", e.reason());
        got.put("detail", e.coordinatorDetail());
        got.put("hint", e.hint());
        got.put("outcome_unknown", e.outcomeUnknown());
      }
      return got;
    }

    /** idem_rpc_calls_total of METHOD (Coordinator/METHOD when it names no service) with code
     *  CODE ("any": every code summed) on the leader's /metrics, less what this scenario's
     *  previous count of the method and code saw. */
    long countCalls(String method, String code) throws Exception {
      var http = java.net.http.HttpClient.newHttpClient();
      var req = java.net.http.HttpRequest.newBuilder(
          java.net.URI.create("http://" + env("IDEM_METRICS_ADDRESS") + "/metrics")).timeout(Duration.ofSeconds(5)).build();
      String text = http.send(req, java.net.http.HttpResponse.BodyHandlers.ofString()).body();
      String full = method.contains("/") ? method : "Coordinator/" + method;
      String want = "idem_rpc_calls_total{method=\"" + full + "\",code=\""
          + (code.equals("any") ? "" : code + "\"} ");
      long total = 0;
      boolean seen = false;
      for (String line : text.split("\n")) {
        if (line.startsWith(want)) {
          total += (long) Double.parseDouble(line.substring(line.indexOf("} ") + 2).trim());
          seen = true;
        }
      }
      if (!seen) throw new IllegalStateException("no " + want + " on the leader's /metrics");
      String key = method + " " + code;
      long count = total - counted.getOrDefault(key, 0L);
      counted.put(key, total);
      return count;
    }

    @Override
    public void close() {
      for (var f : background.values()) f.join();
      client.close();
    }
  }

  static boolean same(JsonElement want, Object have) {
    if (have == null) return false;
    if (want.isJsonPrimitive()) {
      var p = want.getAsJsonPrimitive();
      if (p.isBoolean()) return have instanceof Boolean b && b == p.getAsBoolean();
      if (p.isNumber()) return have instanceof Number n && n.longValue() == p.getAsLong();
      return have instanceof String s && s.equals(p.getAsString());
    }
    return false;
  }

  static List<String> differences(JsonObject expect, Map<String, Object> got) {
    List<String> out = new ArrayList<>();
    for (var e : expect.entrySet()) {
      Object have = e.getKey().equals("outcome_unknown")
          ? (Object) Boolean.TRUE.equals(got.get("outcome_unknown")) : got.get(e.getKey());
      if (e.getKey().equals("error") && e.getValue().isJsonArray()) {
        JsonArray arr = e.getValue().getAsJsonArray();
        boolean any = false;
        for (JsonElement w : arr) any |= same(w, have);
        if (!any) out.add("error " + have + ", expected one of " + arr);
      } else if (!same(e.getValue(), have)) {
        String extra = !e.getKey().equals("error") && got.get("error") != null
            ? " (error " + got.get("error") + " " + got.get("reason") + ")" : "";
        out.add(e.getKey() + " " + have + ", expected " + e.getValue() + extra);
      } else if (e.getKey().equals("error") && "STEP_UNKNOWN".equals(have)
          && !Boolean.TRUE.equals(got.get("outcome_unknown"))) {
        out.add("error STEP_UNKNOWN without outcomeUnknown()"); // IdemException, api.md §20
      }
    }
    return out;
  }

  /** Runs one scenario; null when it passed, else what differed. */
  public static String run(JsonObject sc) throws Exception {
    try (Scenario s = new Scenario(sc, env("IDEM_CONFORMANCE_TMP"))) {
      JsonArray calls = sc.getAsJsonArray("calls");
      for (int i = 0; i < calls.size(); i++) {
        JsonObject c = calls.get(i).getAsJsonObject();
        Map<String, Object> got = s.call(c);
        if (got == null) continue;
        List<String> diff = differences(c.has("expect") ? c.getAsJsonObject("expect") : new JsonObject(), got);
        if (!diff.isEmpty()) return "call " + (i + 1) + " (" + str(c, "call", "") + "): " + String.join("; ", diff);
      }
      return null;
    }
  }

  public static void main(String[] args) throws Exception {
    Set<String> names = new LinkedHashSet<>(List.of(args));
    List<JsonObject> all = scenarios();
    Set<String> unknown = new LinkedHashSet<>(names);
    for (JsonObject s : all) unknown.remove(str(s, "name", ""));
    if (!unknown.isEmpty()) {
      System.err.println("conformance (java): no such scenario: " + String.join(", ", unknown));
      System.exit(2);
    }
    int failed = 0, n = 0, skipped = 0;
    for (JsonObject sc : all) {
      String name = str(sc, "name", "");
      if (!names.isEmpty() && !names.contains(name)) continue;
      String need = lacks(sc);
      if (need != null) {
        skipped++;
        System.out.println("skip " + name + ": needs " + need);
        continue;
      }
      n++;
      String why;
      try {
        why = run(sc);
      } catch (Exception e) {
        why = e.toString();
      }
      if (why != null) {
        failed++;
        System.out.println("not ok " + name + ": " + why);
      } else {
        System.out.println("ok " + name);
      }
      System.out.flush();
    }
    System.err.println("conformance (java): " + (n - failed) + " passed, " + failed + " failed, "
        + skipped + " skipped");
    System.exit(failed == 0 ? 0 : 1);
  }

}
