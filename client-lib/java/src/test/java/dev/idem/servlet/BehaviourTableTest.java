package dev.idem.servlet;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.idem.client.IdemClient;
import dev.idem.examples.HttpExample;
import dev.idem.support.Coordinator;
import dev.idem.support.RawHttp;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.catalina.startup.Tomcat;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every table of client-lib/conformance/http-middleware.json that is not a request case, read
 * whole and each row checked: the problem tables, the defaults, the coordinator error table
 * (every gRPC code with every reason word and with none), and the operation, header, method,
 * trace and stored-answer vectors (the header and trace vectors through a real Tomcat, which
 * hands the filter the repeated lines). The request cases are FilterHttpTest's, the framing
 * vectors and the example server's contract HostileHttpTest's.
 */
class BehaviourTableTest {
  static JsonObject spec;
  static Tomcat echo;
  static int echoPort;
  static IdemClient unused;

  static final List<String> GRPC_CODES = List.of("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
      "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED");

  /** Reports what the filter reads from a request's lines: the key (or its rule), the scope, the trace context. */
  static final class Echo extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      JsonObject out = new JsonObject();
      List<String> keys = Collections.list(req.getHeaders("Idempotency-Key"));
      try {
        out.addProperty("key", IdempotencyKey.parse(keys.isEmpty() ? null : String.join(",", keys)));
      } catch (IdempotencyKey.Malformed m) {
        out.addProperty("key_error", m.word());
      }
      out.addProperty("scope", IdempotencyFilter.defaultScope(req));
      String[] tc = IdempotencyFilter.traceContext(Collections.list(req.getHeaders("traceparent")),
          Collections.list(req.getHeaders("tracestate")));
      out.addProperty("traceparent", tc[0]);
      out.addProperty("tracestate", tc[1]);
      byte[] b = out.toString().getBytes(StandardCharsets.UTF_8);
      resp.setContentType("application/json");
      resp.setContentLength(b.length);
      resp.getOutputStream().write(b);
    }
  }

  @BeforeAll
  static void start() throws Exception {
    spec = JsonParser.parseString(Files.readString(Path.of(Coordinator.need("IDEM_SOURCE_DIR"),
        "client-lib/conformance/http-middleware.json"))).getAsJsonObject();
    unused = IdemClient.builder().address("127.0.0.1:1").tenant("t").build();
    echoPort = Coordinator.freePort();
    echo = HttpExample.serve(echoPort, IdempotencyFilter.builder(unused).methods("NONE").build(), new Echo());
  }

  @AfterAll
  static void stop() throws Exception {
    if (echo != null) {
      echo.stop();
      echo.destroy();
    }
    if (unused != null) unused.close();
  }

  static JsonObject echo(JsonArray lines) throws IOException {
    StringBuilder b = new StringBuilder("GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (JsonElement l : lines) {
      JsonArray p = l.getAsJsonArray();
      b.append(p.get(0).getAsString()).append(": ").append(p.get(1).getAsString()).append("\r\n");
    }
    b.append("\r\n");
    RawHttp.Response r = RawHttp.exchange(echoPort, b.toString().getBytes(StandardCharsets.UTF_8), 10000);
    assertEquals(200, r.status(), r.text());
    return JsonParser.parseString(r.text()).getAsJsonObject();
  }

  static String str(JsonObject o, String name) {
    JsonElement e = o.get(name);
    return e == null || e.isJsonNull() ? null : e.getAsString();
  }

  @Test
  void problemTablesAreTheFiles() {
    Map<String, Problems.Kind> want = new HashMap<>();
    for (JsonElement e : spec.getAsJsonArray("problems")) {
      JsonObject p = e.getAsJsonObject();
      want.put(p.get("type").getAsString(), new Problems.Kind(p.get("status").getAsInt(), p.get("title").getAsString(),
          p.get("retryable").getAsBoolean()));
    }
    assertEquals(want, Problems.KINDS);
    Map<String, Problems.Kind> server = new HashMap<>();
    for (JsonElement e : spec.getAsJsonObject("example_server").getAsJsonArray("problems")) {
      JsonObject p = e.getAsJsonObject();
      server.put(p.get("type").getAsString(), new Problems.Kind(p.get("status").getAsInt(), p.get("title").getAsString(),
          p.get("retryable").getAsBoolean()));
    }
    assertEquals(server, Problems.SERVER_KINDS);
  }

  @Test
  void defaultsAndNeverKeptHeaders() {
    JsonObject d = spec.getAsJsonObject("defaults");
    assertEquals(IdempotencyFilter.TRACE_MAX, d.get("trace_max_bytes").getAsInt());
    Set<String> never = new TreeSet<>();
    for (JsonElement e : d.getAsJsonArray("never_kept")) {
      never.add(e.getAsString().toLowerCase(Locale.ROOT));
      String name = e.getAsString();
      IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
          () -> IdempotencyFilter.builder(unused).keepHeaders("Content-Type", name.toUpperCase(Locale.ROOT)));
      assertTrue(x.getMessage().startsWith("keepHeaders"), x.getMessage());
    }
    assertEquals(never, new TreeSet<>(StoredResponse.NEVER_KEPT));
  }

  static String tableProblem(String code, String reason) {
    for (JsonElement e : spec.getAsJsonArray("coordinator_errors")) {
      JsonObject row = e.getAsJsonObject();
      String c = row.get("code").getAsString();
      if (!c.equals(code) && !c.equals("*")) continue;
      if (row.has("reason") && !row.get("reason").getAsString().equals(reason)) continue;
      return row.get("problem").getAsString();
    }
    throw new AssertionError("no row of coordinator_errors for " + code + " " + reason);
  }

  @Test
  void coordinatorErrorsEveryCodeWithEveryReason() {
    Set<String> codes = new TreeSet<>(GRPC_CODES);
    for (JsonElement e : spec.getAsJsonArray("coordinator_errors")) codes.add(e.getAsJsonObject().get("code").getAsString());
    codes.remove("*");
    List<String> reasons = new ArrayList<>();
    for (JsonElement e : spec.getAsJsonArray("reason_words")) reasons.add(e.getAsString());
    assertTrue(reasons.contains("lease-lost"));
    reasons.add("");
    int n = 0;
    for (String code : codes) {
      for (String reason : reasons) {
        assertEquals(tableProblem(code, reason), IdempotencyFilter.coordinatorProblem(code, reason), code + " " + reason);
        n++;
      }
    }
    assertTrue(n > 400, "checked " + n);
  }

  @Test
  void operationVectors() throws Exception {
    int n = 0;
    for (JsonElement e : spec.getAsJsonArray("operation_vectors")) {
      JsonObject v = e.getAsJsonObject();
      String target = v.get("target").getAsString();
      if (v.has("error")) {
        assertEquals("target-malformed", v.get("error").getAsString());
        assertThrows(IdempotencyKey.TargetMalformed.class, () -> IdempotencyKey.normalizeTarget(target), target);
        continue;
      }
      IdempotencyKey.Target t = IdempotencyKey.normalizeTarget(target);
      assertEquals(v.get("path").getAsString(), t.path(), target);
      assertEquals(v.get("operation").getAsString(), IdempotencyKey.operation(v.get("method").getAsString(), t.path()), target);
      assertArrayEquals(v.get("fingerprint_target").getAsString().getBytes(StandardCharsets.UTF_8), t.fingerprintTarget(), target);
      n++;
    }
    assertTrue(n >= 20, "checked " + n);
  }

  @Test
  void headerVectorsThroughTomcat() throws Exception {
    for (JsonElement e : spec.getAsJsonArray("header_vectors")) {
      JsonObject v = e.getAsJsonObject();
      JsonObject got = echo(v.getAsJsonArray("lines"));
      String about = v.get("about").getAsString() + ": " + got;
      if (v.has("key_error")) assertEquals(v.get("key_error").getAsString(), str(got, "key_error"), about);
      else assertEquals(v.get("key").getAsString(), str(got, "key"), about);
      if (v.has("scope")) assertEquals(v.get("scope").getAsString(), str(got, "scope"), about);
    }
  }

  @Test
  void methodVectors() {
    IdempotencyFilter f = IdempotencyFilter.builder(unused).build();
    for (JsonElement e : spec.getAsJsonArray("method_vectors")) {
      JsonObject v = e.getAsJsonObject();
      assertEquals(v.get("wrapped").getAsBoolean(), f.wraps(v.get("method").getAsString()), v.toString());
    }
    for (String bad : List.of("post", "Patch")) {
      IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
          () -> IdempotencyFilter.builder(unused).methods("POST", bad));
      assertTrue(x.getMessage().startsWith("methods"), x.getMessage());
    }
  }

  @Test
  void traceVectorsThroughTomcat() throws Exception {
    for (JsonElement e : spec.getAsJsonArray("trace_vectors")) {
      JsonObject v = e.getAsJsonObject();
      JsonArray lines = new JsonArray();
      for (JsonElement t : v.getAsJsonArray("traceparent")) {
        JsonArray l = new JsonArray();
        l.add("traceparent");
        l.add(t);
        lines.add(l);
      }
      for (JsonElement t : v.getAsJsonArray("tracestate")) {
        JsonArray l = new JsonArray();
        l.add("tracestate");
        l.add(t);
        lines.add(l);
      }
      JsonObject got = echo(lines);
      String about = v.get("about").getAsString();
      assertEquals(str(v, "keep_traceparent"), str(got, "traceparent"), about);
      assertEquals(str(v, "keep_tracestate"), str(got, "tracestate"), about);
    }
  }

  @Test
  void storedAnswerVectors() {
    Set<String> keep = Set.of("content-type");
    int n = 0;
    for (JsonElement e : spec.getAsJsonArray("stored_answer_vectors")) {
      JsonObject v = e.getAsJsonObject();
      byte[] doc = v.get("doc").getAsString().getBytes(StandardCharsets.UTF_8);
      int code = v.get("code").getAsInt();
      String about = v.get("about").getAsString();
      if (v.has("problem")) {
        assertEquals("stored-answer-invalid", v.get("problem").getAsString());
        assertThrows(IllegalArgumentException.class, () -> StoredResponse.replayable(doc, code, keep), about);
        n++;
        continue;
      }
      StoredResponse s = StoredResponse.replayable(doc, code, keep);
      assertEquals(v.get("status").getAsInt(), s.status(), about);
      JsonArray hs = new JsonArray();
      for (String[] h : s.headers()) {
        JsonArray p = new JsonArray();
        p.add(h[0]);
        p.add(h[1]);
        hs.add(p);
      }
      assertEquals(v.getAsJsonArray("headers"), hs, about);
      if (v.has("body_b64")) assertEquals(v.get("body_b64").getAsString(), Base64.getEncoder().encodeToString(s.body()), about);
      assertEquals(v.get("body_omitted").getAsBoolean(), s.omitted(), about);
    }
    assertTrue(n >= 15, "invalid vectors " + n);
  }
}
