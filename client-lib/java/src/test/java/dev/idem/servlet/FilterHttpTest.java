package dev.idem.servlet;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.idem.client.FailureMode;
import dev.idem.client.IdemClient;
import dev.idem.client.RunReport;
import dev.idem.client.StepKey;
import dev.idem.client.StepResult;
import dev.idem.examples.HttpExample;
import dev.idem.support.Coordinator;
import dev.idem.support.RawHttp;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.catalina.startup.Tomcat;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The servlet filter over real HTTP on embedded Tomcat 10, against a real coordinator: the
 * example's payments API (examples/http) and the behaviour file's test application
 * (client-lib/conformance/http-middleware.json, every case).
 */
class FilterHttpTest {
  static Coordinator coord;
  static IdemClient client;
  static Path tmp;
  static HttpExample.Payments payments;
  static Tomcat example;
  static int examplePort;
  static TestApp app;
  static Tomcat behaviour;
  static int behaviourPort;

  @BeforeAll
  static void start() throws Exception {
    coord = new Coordinator();
    tmp = Files.createTempDirectory("idem-java-http.");
    client = IdemClient.builder().address(coord.address).tenant(Coordinator.unique("java-http"))
        .journal(tmp.resolve("journal")).build();
    payments = new HttpExample.Payments();
    examplePort = Coordinator.freePort();
    example = HttpExample.serve(examplePort,
        IdempotencyFilter.builder(client).service("http-example").timeout(Duration.ofSeconds(3)).build(), payments);
    app = new TestApp();
    behaviourPort = Coordinator.freePort();
    behaviour = HttpExample.serve(behaviourPort, IdempotencyFilter.builder(client).service("behaviour").build(), app);
  }

  @AfterAll
  static void stop() throws Exception {
    for (Tomcat t : new Tomcat[] {example, behaviour}) {
      if (t != null) {
        t.stop();
        t.destroy();
      }
    }
    if (client != null) client.close();
    if (coord != null) coord.close();
  }

  // --- helpers -------------------------------------------------------------------------------

  static RawHttp.Response post(int port, String path, String key, String body) throws IOException {
    RawHttp.Request r = new RawHttp.Request();
    r.path = path;
    if (key != null) r.header("Idempotency-Key", key);
    r.header("Content-Type", "application/json");
    r.body = body.getBytes(StandardCharsets.UTF_8);
    return RawHttp.send(port, r, 30000);
  }

  static RawHttp.Response pay(String key, String body) throws IOException {
    return post(examplePort, "/payments", key, body);
  }

  static JsonObject problem(RawHttp.Response r, int status, String type) {
    assertEquals(status, r.status(), r.text());
    assertEquals("application/problem+json", r.header("content-type"));
    JsonObject doc = JsonParser.parseString(r.text()).getAsJsonObject();
    assertEquals("docs/http-middleware.md#" + type, doc.get("type").getAsString());
    assertEquals(status, doc.get("status").getAsInt());
    assertFalse(doc.get("title").getAsString().isEmpty());
    assertFalse(doc.get("detail").getAsString().isEmpty());
    assertTrue(doc.get("instance").getAsString().matches("urn:uuid:[0-9a-f-]{36}"), doc.toString());
    boolean retryable = status == 409 || status == 503;
    assertEquals(retryable, doc.get("retryable").getAsBoolean());
    // Retry-After only on a retryable problem whose coordinator answer carried a hint
    if (retryable && r.header("retry-after") != null) assertTrue(Integer.parseInt(r.header("retry-after")) >= 1);
    else assertNull(r.header("retry-after"));
    return doc;
  }

  static String key() { return Coordinator.unique("k"); }

  // --- the example ---------------------------------------------------------------------------

  @Test
  void hundredConcurrentPostsWithOneKeyRunTheHandlerOnce() throws Exception {
    String k = key();
    long before = payments.executions();
    ExecutorService pool = Executors.newFixedThreadPool(100);
    try {
      List<CompletableFuture<RawHttp.Response>> fs = new ArrayList<>();
      for (int i = 0; i < 100; i++) {
        fs.add(CompletableFuture.supplyAsync(() -> {
          try {
            return pay(k, "{\"amount\":100,\"delay_ms\":200}");
          } catch (IOException e) {
            throw new RuntimeException(e);
          }
        }, pool));
      }
      Set<String> bodies = new HashSet<>();
      int created = 0, busy = 0;
      for (var f : fs) {
        RawHttp.Response r = f.join();
        if (r.status() == 201) {
          created++;
          bodies.add(r.text());
        } else {
          problem(r, 409, "in-progress");
          busy++;
        }
      }
      assertEquals(100, created + busy);
      assertTrue(created >= 1);
      assertEquals(1, bodies.size(), bodies.toString());
      assertEquals(1, payments.executions() - before);
      RawHttp.Response again = pay(k, "{\"amount\":100,\"delay_ms\":200}");
      assertEquals(201, again.status());
      assertEquals("true", again.header("idempotent-replayed"));
      assertEquals(bodies.iterator().next(), again.text());
      assertEquals(1, payments.executions() - before);
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void sameKeyOtherBodyIs422() throws Exception {
    String k = key();
    assertEquals(201, pay(k, "{\"amount\":1}").status());
    long before = payments.executions();
    JsonObject doc = problem(pay(k, "{\"amount\":2}"), 422, "fingerprint-mismatch");
    assertEquals(k, doc.get("idempotency_key").getAsString());
    assertEquals(before, payments.executions());
  }

  @Test
  void everyMalformedKeyOfTheTableIs400AndRunsNothing() throws Exception {
    Path f = Path.of(Coordinator.need("IDEM_SOURCE_DIR"), "client-lib/conformance/idempotency-key.json");
    JsonObject t = JsonParser.parseString(Files.readString(f)).getAsJsonObject();
    long before = payments.executions();
    int byFilter = 0, byTomcat = 0;
    problem(pay(null, "{}"), 400, "key-missing");
    for (JsonElement e : t.getAsJsonArray("header")) {
      JsonObject c = e.getAsJsonObject();
      if (!c.has("error") || c.get("header").isJsonNull()) continue;
      String v = c.get("header").getAsString();
      if (!v.equals(v.strip())) { // the server trims a header's outer spaces (RFC 9110 5.5)
        v = v.strip();
        try {
          IdempotencyKey.parse(v);
          continue; // trimmed, it is a valid key: not this test's case
        } catch (IdempotencyKey.Malformed m) {
          // still malformed: sent trimmed
        }
      }
      if (v.isEmpty()) continue; // an empty header value: the "empty" rule is the table test's
      RawHttp.Response r = pay(v, "{}");
      assertEquals(400, r.status(), v + ": " + r.text());
      boolean ctl = v.chars().anyMatch(ch -> (ch < 0x20 && ch != '\t') || ch == 0x7f);
      if (ctl) { // Tomcat refuses a control character in a header value itself (RFC 9110 5.5)
        byTomcat++;
        continue;
      }
      JsonObject doc = problem(r, 400, "key-malformed");
      assertTrue(doc.get("detail").getAsString().contains(c.get("error").getAsString()), doc.toString());
      byFilter++;
    }
    assertTrue(byFilter >= 10, "filter answered " + byFilter);
    assertTrue(byTomcat <= 3, "tomcat answered " + byTomcat);
    assertEquals(before, payments.executions());
  }

  @Test
  void quotedKeyRunsOnceAndTheBareKeyReplays() throws Exception {
    String k = key();
    long before = payments.executions();
    RawHttp.Response a = pay("\"" + k + "\"", "{\"amount\":7}");
    assertEquals(201, a.status());
    assertNull(a.header("idempotent-replayed"));
    RawHttp.Response b = pay(k, "{\"amount\":7}");
    assertEquals(201, b.status());
    assertEquals("true", b.header("idempotent-replayed"));
    assertEquals("application/json", b.header("content-type"));
    assertEquals(a.text(), b.text());
    assertEquals(1, payments.executions() - before);
  }

  @Test
  void aKeyInProgressIs409WithRetryAfter() throws Exception {
    String k = key();
    long before = payments.executions();
    CompletableFuture<RawHttp.Response> first = CompletableFuture.supplyAsync(() -> {
      try {
        return pay(k, "{\"amount\":1,\"delay_ms\":1500}");
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    });
    Coordinator.waitUntil(() -> payments.executions() > before, 10000, "the first request to run");
    JsonObject doc = problem(pay(k, "{\"amount\":1,\"delay_ms\":1500}"), 409, "in-progress");
    assertTrue(doc.get("detail").getAsString().contains(k));
    assertEquals(201, first.join().status());
    assertEquals(1, payments.executions() - before);
  }

  @Test
  void aHandler500RunsAgainOnRetry() throws Exception {
    String k = key();
    long before = payments.executions();
    for (int n = 1; n <= 2; n++) {
      RawHttp.Response r = pay(k, "{\"amount\":5,\"fail\":true}");
      assertEquals(500, r.status());
      assertNull(r.header("idempotent-replayed"));
      assertEquals(n, payments.executions() - before);
    }
  }

  @Test
  void aCompensatedKeyIs422Compensated() throws Exception {
    String k = key();
    StepKey step = StepKey.compensation(IdempotencyKey.globalId(k, ""), "http-example", "post--payments");
    RunReport r = client.run(step, ctx -> StepResult.succeeded("undone"));
    assertEquals("SKIP_NULL_COMPENSATION", r.decision().name());
    long before = payments.executions();
    problem(pay(k, "{}"), 422, "compensated");
    assertEquals(before, payments.executions());
  }

  @Test
  void aStoppedCoordinatorFailsClosedWith503AndFailOpenRuns() throws Exception {
    Coordinator c = new Coordinator();
    Path journal = tmp.resolve("stop-journal");
    String tenant = Coordinator.unique("java-http-stop");
    Tomcat t = null;
    try (IdemClient admin = IdemClient.builder().address(c.address).tenant(tenant).build();
         IdemClient mw = IdemClient.builder().address(c.address).tenant(tenant).journal(journal).build()) {
      // refunds fail open (set first); payments keeps the default, fail-closed
      admin.setPolicy("http-example", "post--refunds", FailureMode.FAIL_OPEN, 86400, 30000);
      HttpExample.Payments p = new HttpExample.Payments();
      int port = Coordinator.freePort();
      t = HttpExample.serve(port, IdempotencyFilter.builder(mw).service("http-example").timeout(Duration.ofSeconds(2)).build(), p);
      // one guarded request each, so that the filter's client has cached both policies
      assertEquals(201, post(port, "/refunds", key(), "{}").status());
      assertEquals(201, post(port, "/payments", key(), "{}").status());
      c.stop();
      long before = p.executions();
      JsonObject doc = problem(post(port, "/payments", key(), "{}"), 503, "coordinator-unavailable");
      assertEquals("Idempotency coordinator unavailable", doc.get("title").getAsString());
      assertEquals(before, p.executions());
      RawHttp.Response open = post(port, "/refunds", key(), "{}");
      assertEquals(201, open.status(), open.text());
      assertEquals(before + 1, p.executions());
      List<String> lines = Files.readAllLines(journal).stream().filter(l -> !l.isBlank()).toList();
      assertEquals(1, lines.size());
      assertTrue(lines.get(0).startsWith("idem1 ") && lines.get(0).contains(" client "), lines.get(0));
    } finally {
      if (t != null) {
        t.stop();
        t.destroy();
      }
      c.close();
    }
  }

  // --- the behaviour file --------------------------------------------------------------------

  /** http-middleware.json's test application. */
  static final class TestApp extends HttpServlet {
    private static final long serialVersionUID = 1L;
    final AtomicLong executions = new AtomicLong();

    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      if (req.getMethod().equals("GET") && req.getRequestURI().equals("/stats")) {
        HttpExampleJson.send(resp, 200, "{\"executions\": " + executions.get() + "}");
        return;
      }
      byte[] body = req.getInputStream().readAllBytes();
      long n = executions.incrementAndGet();
      String rb = req.getHeader("Response-Bytes");
      if (rb != null) {
        long want = Long.parseLong(rb);
        resp.setStatus(200);
        resp.setContentType("application/octet-stream");
        byte[] piece = new byte[64 * 1024];
        Arrays.fill(piece, (byte) 'x');
        OutputStream out = resp.getOutputStream();
        for (long left = want; left > 0; left -= piece.length) out.write(piece, 0, (int) Math.min(piece.length, left));
        return;
      }
      try {
        String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(body));
        HttpExampleJson.send(resp, 201, "{\"execution\": " + n + ", \"body_sha256\": \"" + sha + "\"}");
      } catch (java.security.NoSuchAlgorithmException e) {
        throw new IOException(e);
      }
    }
  }

  static final class HttpExampleJson {
    static void send(HttpServletResponse resp, int status, String doc) throws IOException {
      byte[] b = doc.getBytes(StandardCharsets.UTF_8);
      resp.setStatus(status);
      resp.setContentType("application/json");
      resp.setContentLength(b.length);
      resp.getOutputStream().write(b);
    }
  }

  static RawHttp.Request request(JsonObject q) {
    RawHttp.Request r = new RawHttp.Request();
    if (q.has("method")) r.method = q.get("method").getAsString();
    if (q.has("path")) r.path = q.get("path").getAsString();
    if (q.has("key")) r.header("Idempotency-Key", q.get("key").getAsString());
    if (q.has("authorization")) r.header("Authorization", q.get("authorization").getAsString());
    if (q.has("headers")) {
      for (var h : q.getAsJsonObject("headers").entrySet()) r.header(h.getKey(), h.getValue().getAsString());
    }
    boolean chunked = q.has("chunked") && q.get("chunked").getAsBoolean();
    if (q.has("chunks")) {
      r.chunks = new ArrayList<>();
      for (JsonElement c : q.getAsJsonArray("chunks")) r.chunks.add(c.getAsString().getBytes(StandardCharsets.UTF_8));
    } else if (q.has("body_bytes")) {
      byte[] all = new byte[q.get("body_bytes").getAsInt()];
      Arrays.fill(all, (byte) 'x');
      if (chunked) {
        r.chunks = new ArrayList<>();
        for (int i = 0; i < all.length; i += 64 * 1024) r.chunks.add(Arrays.copyOfRange(all, i, Math.min(all.length, i + 64 * 1024)));
      } else {
        r.body = all;
      }
    } else if (q.has("body")) {
      r.body = q.get("body").getAsString().getBytes(StandardCharsets.UTF_8);
    }
    if (q.has("content_length")) r.contentLength = q.get("content_length").getAsLong();
    r.abort = q.has("abort") && q.get("abort").getAsBoolean();
    return r;
  }

  @TestFactory
  List<DynamicTest> behaviourFileCases() throws Exception {
    Path f = Path.of(Coordinator.need("IDEM_SOURCE_DIR"), "client-lib/conformance/http-middleware.json");
    JsonObject doc = JsonParser.parseString(Files.readString(f)).getAsJsonObject();
    List<DynamicTest> out = new ArrayList<>();
    for (JsonElement e : doc.getAsJsonArray("cases")) {
      JsonObject c = e.getAsJsonObject();
      out.add(DynamicTest.dynamicTest(c.get("name").getAsString(), () -> {
        int i = 0;
        for (JsonElement s : c.getAsJsonArray("requests")) {
          i++;
          JsonObject q = s.getAsJsonObject().getAsJsonObject("request");
          JsonObject want = s.getAsJsonObject().getAsJsonObject("expect");
          long before = app.executions.get();
          RawHttp.Response r = RawHttp.send(behaviourPort, request(q), 30000);
          String where = "request " + i + " " + q;
          boolean optional = want.has("answer_optional") && want.get("answer_optional").getAsBoolean();
          if (want.has("ran")) {
            if (optional && r == null) { // the server may close an aborted upload without an answer
              Thread.sleep(200);
            }
            assertEquals(want.get("ran").getAsBoolean(), app.executions.get() - before == 1, where);
            assertTrue(app.executions.get() - before <= 1, where);
          }
          if (r == null) {
            assertTrue(optional, where + ": no answer");
            continue;
          }
          if (want.has("status")) assertEquals(want.get("status").getAsInt(), r.status(), where + ": " + r.text());
          if (optional && !"application/problem+json".equals(r.header("content-type"))) {
            // Tomcat marks a request whose body read failed as an error and answers the 400
            // itself (its error page): the filter cannot answer it (client-lib/java/README.md)
            continue;
          }
          if (want.has("problem")) {
            JsonObject p = problem(r, want.get("status").getAsInt(), want.get("problem").getAsString());
            String type = want.get("problem").getAsString();
            if (q.has("key") && !type.startsWith("key-")) assertNotNull(p.get("idempotency_key"), where);
            if (type.startsWith("key-")) assertNull(p.get("idempotency_key"), where);
          }
          if (want.has("replayed")) {
            assertEquals(want.get("replayed").getAsBoolean(), "true".equals(r.header("idempotent-replayed")), where);
          }
          if (want.has("body_omitted")) {
            assertEquals(want.get("body_omitted").getAsBoolean(), "true".equals(r.header("idempotent-body-omitted")), where);
          }
          if (want.has("body_length")) assertEquals(want.get("body_length").getAsInt(), r.body().length, where);
        }
      }));
    }
    return out;
  }

  static long rssBytes() throws IOException {
    for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (l.startsWith("VmRSS:")) return Long.parseLong(l.replaceAll("[^0-9]", "")) * 1024;
    }
    throw new IOException("no VmRSS in /proc/self/status");
  }

  @Test
  void aLargeAnswerStreamsInBoundedMemory() throws Exception {
    // http-middleware.json's large_response: one answer of 200 MB through the filter keeps the
    // serving process's RSS under 100 MB over its baseline (the server and this client share the
    // JVM here, so the bound covers both; the client counts the bytes without keeping them)
    JsonObject lr = JsonParser.parseString(Files.readString(Path.of(Coordinator.need("IDEM_SOURCE_DIR"),
        "client-lib/conformance/http-middleware.json"))).getAsJsonObject().getAsJsonObject("large_response");
    long bytes = lr.get("bytes").getAsLong(), bound = lr.get("rss_over_baseline_max").getAsLong();
    RawHttp.Request warm = new RawHttp.Request();
    warm.header("Idempotency-Key", key()).header("Response-Bytes", "1000000").body = "{}".getBytes(StandardCharsets.UTF_8);
    assertEquals(200, RawHttp.sendDiscard(behaviourPort, warm, 60000)[0]);
    System.gc();
    long base = rssBytes();
    RawHttp.Request big = new RawHttp.Request();
    big.header("Idempotency-Key", key()).header("Response-Bytes", Long.toString(bytes)).body = "{}".getBytes(StandardCharsets.UTF_8);
    long[] got = RawHttp.sendDiscard(behaviourPort, big, 120000);
    long grew = rssBytes() - base;
    assertEquals(200, got[0]);
    assertEquals(bytes, got[1]);
    assertTrue(grew < bound, "RSS grew by " + grew + " bytes over a baseline of " + base);
  }

  @Test
  void theStoredAnswerIsTheOtherMiddlewaresFormat() {
    byte[] doc = StoredResponse.encode(201, List.of(new String[][] {{"Content-Type", "application/json"}}),
        "{}".getBytes(StandardCharsets.UTF_8), 64 * 1024, 64 * 1024);
    assertEquals("{\"status\":201,\"headers\":[[\"Content-Type\",\"application/json\"]],\"body_b64\":\"e30=\"}",
        new String(doc, StandardCharsets.UTF_8));
    StoredResponse s = StoredResponse.decode(StoredResponse.encode(200, List.of(), null, 10, 64 * 1024));
    assertTrue(s.omitted());
    assertArrayEquals(new byte[0], s.body());
    assertEquals(3, Problems.retryAfterS(2001));
    assertEquals(1, Problems.retryAfterS(0));
  }
}
