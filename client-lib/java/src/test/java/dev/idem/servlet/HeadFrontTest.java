package dev.idem.servlet;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.idem.client.IdemClient;
import dev.idem.examples.HttpExample;
import dev.idem.support.Coordinator;
import dev.idem.support.RawHttp;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.catalina.startup.Tomcat;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The raw-byte front ({@link HeadFront}, {@link RequestHead}, {@link BodyWalk}): its head rules and
 * body walk on bytes, and over loopback in front of the example on embedded Tomcat (the filter
 * passes every method, so no coordinator is needed and the handler's count shows whether Tomcat
 * ran it): obs-fold, Content-Length beside chunked and dot segments above the root answered as
 * docs/api.md §19 says; pipelined requests with a refused one last (the earlier answers first);
 * a chunked body reaching the container byte for byte; slow clients not holding others.
 */
class HeadFrontTest {
  static JsonObject spec;
  static IdemClient unused;
  static HttpExample.Payments payments;
  static Tomcat example;
  static int port;

  @BeforeAll
  static void start() throws Exception {
    spec = JsonParser.parseString(Files.readString(Path.of(Coordinator.need("IDEM_SOURCE_DIR"),
        "client-lib/conformance/http-middleware.json"))).getAsJsonObject();
    unused = IdemClient.builder().address("127.0.0.1:1").tenant("t").build();
    payments = new HttpExample.Payments();
    port = Coordinator.freePort();
    example = HttpExample.serve(port, IdempotencyFilter.builder(unused).methods("NONE").build(), payments);
  }

  @AfterAll
  static void stop() throws Exception {
    if (example != null) {
      example.stop();
      example.destroy();
    }
    if (unused != null) unused.close();
  }

  static byte[] bytes(String s) { return s.getBytes(StandardCharsets.ISO_8859_1); }

  static RequestHead parse(String head) {
    byte[] b = bytes(head);
    return RequestHead.parse(b, b.length, 16384);
  }

  static void problem(RawHttp.Response r, int status, String type) {
    assertEquals(status, r.status(), r.text());
    assertEquals("application/problem+json", r.header("content-type"), r.text());
    JsonObject doc = JsonParser.parseString(r.text()).getAsJsonObject();
    assertEquals("docs/http-middleware.md#" + type, doc.get("type").getAsString());
    assertEquals(status, doc.get("status").getAsInt());
    assertEquals(Problems.kind(type).title(), doc.get("title").getAsString());
    assertTrue(doc.get("instance").getAsString().matches("urn:uuid:[0-9a-f-]{36}"), doc.toString());
    assertNull(r.header("server"));
  }

  // --- on bytes -------------------------------------------------------------------------------

  @Test
  void headRulesOnBytes() {
    for (JsonElement e : spec.getAsJsonArray("framing_vectors")) {
      JsonObject v = e.getAsJsonObject();
      StringBuilder h = new StringBuilder("POST /payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"k\"\r\n");
      for (JsonElement l : v.getAsJsonArray("lines")) h.append(l.getAsString()).append("\r\n");
      RequestHead r = parse(h + "\r\n");
      String about = v.get("about").getAsString();
      if (v.has("problem")) {
        assertEquals(v.get("problem").getAsString(), r.problem, about);
      } else {
        assertNull(r.problem, about + ": " + r.detail);
        assertEquals(about.contains("chunked") ? -1 : 3, r.body, about);
      }
    }
    assertEquals("request-malformed", parse("POST / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n folded\r\n\r\n").problem);
    assertEquals("request-malformed", parse("POST / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tfolded\r\n\r\n").problem);
    assertEquals("request-malformed", parse("POST / HTTP/1.1\r\nHost: x\r\nX-A: a\u0001b\r\n\r\n").problem);
    assertEquals("request-malformed", parse("POST / HTTP/1.1\r\nHost : x\r\n\r\n").problem);
    assertEquals("request-malformed", parse("POST /a b HTTP/1.1\r\nHost: x\r\n\r\n").problem);
    assertEquals("body-malformed", parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").problem);
    assertSame(RequestHead.MORE, parse("POST / HTTP/1.1\r\nHost: x\r\n"));
    String big = "POST / HTTP/1.1\r\nX-Pad: " + "x".repeat(16400) + "\r\n\r\n";
    assertEquals("header-too-large", parse(big).problem);
    assertEquals("header-too-large", parse(big.substring(0, 16390)).problem); // no end within the limit
    RequestHead ok = parse("\r\nGET /stats HTTP/1.1\r\nHost: x\r\n\r\nGET /next");
    assertNull(ok.problem);
    assertEquals(bytes("\r\nGET /stats HTTP/1.1\r\nHost: x\r\n\r\n").length, ok.length);
    assertEquals(0, ok.body);
    assertNull(ok.rewritten);
  }

  @Test
  void aTargetAboveTheRootIsRewrittenToItsOneSpelling() throws Exception {
    int above = 0;
    for (JsonElement e : spec.getAsJsonArray("operation_vectors")) {
      JsonObject v = e.getAsJsonObject();
      String t = v.get("target").getAsString();
      String w = RequestHead.rewrite(t);
      if (v.has("error")) {
        assertNull(w, t);
        continue;
      }
      if (w == null) continue;
      above++;
      assertEquals(v.get("path").getAsString(), IdempotencyKey.normalizeTarget(w).path(), t + " -> " + w);
      assertArrayEquals(IdempotencyKey.normalizeTarget(t).fingerprintTarget(), IdempotencyKey.normalizeTarget(w).fingerprintTarget(), t);
      assertNull(RequestHead.rewrite(w), w);
    }
    assertEquals(2, above); // /%2e%2e/payments and /..
    assertEquals("/payments?x=/../y", RequestHead.rewrite("/../payments?x=/../y"));
    assertEquals("http://h/caf%C3%A9", RequestHead.rewrite("http://h/a/../../caf%C3%A9"));
    assertEquals("/p%25", RequestHead.rewrite("/../p%25"));
    assertNull(RequestHead.rewrite("/x/../payments")); // within the root: as received
    RequestHead h = parse("POST /%2e%2e/payments HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n");
    assertEquals("POST /payments HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n",
        new String(h.rewritten, StandardCharsets.ISO_8859_1));
  }

  @Test
  void chunkedBodiesAreWalkedWhereverTheyAreSplit() {
    byte[] body = bytes("3;ext=\"v\"\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\n");
    byte[] stream = bytes(new String(body, StandardCharsets.ISO_8859_1) + "GET / HTTP/1.1\r\n\r\n");
    for (int step = 1; step <= stream.length; step++) {
      BodyWalk w = new BodyWalk(-1);
      int used = 0;
      for (int off = 0; off < stream.length && !w.done(); off += step) {
        int n = Math.min(step, stream.length - off);
        int k = w.feed(stream, off, n);
        used += k;
        if (k < n) break;
      }
      assertTrue(w.done(), "split every " + step);
      assertEquals(body.length, used, "split every " + step);
    }
    BodyWalk broken = new BodyWalk(-1);
    byte[] bad = bytes("3\r\nabcX\r\n");
    broken.feed(bad, 0, bad.length);
    assertTrue(broken.broken());
    BodyWalk len = new BodyWalk(5);
    assertEquals(5, len.feed(stream, 0, 9));
    assertTrue(len.done());
  }

  // --- over loopback --------------------------------------------------------------------------

  static String post(String target, List<String> lines, String body) {
    StringBuilder b = new StringBuilder("POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n");
    for (String l : lines) b.append(l).append("\r\n");
    return b.append("\r\n").append(body).toString();
  }

  @Test
  void contentLengthBesideChunkedIs400BodyMalformed() throws Exception {
    long before = payments.executions();
    String clte = post("/payments", List.of("Content-Length: 3", "Transfer-Encoding: chunked", "Connection: close"),
        "3\r\nabc\r\n0\r\n\r\n");
    problem(RawHttp.exchange(port, bytes(clte), 10000), 400, "body-malformed");
    String tecl = post("/payments", List.of("Transfer-Encoding: chunked", "Content-Length: 3", "Connection: close"),
        "3\r\nabc\r\n0\r\n\r\n");
    problem(RawHttp.exchange(port, bytes(tecl), 10000), 400, "body-malformed");
    assertEquals(before, payments.executions(), "a refused request ran the handler");
  }

  @Test
  void aFoldedFieldLineIs400RequestMalformed() throws Exception {
    long before = payments.executions();
    String fold = post("/payments", List.of("Idempotency-Key: \"a", " b\"", "Content-Length: 2", "Connection: close"), "{}");
    problem(RawHttp.exchange(port, bytes(fold), 10000), 400, "request-malformed");
    assertEquals(before, payments.executions(), "a refused request ran the handler");
  }

  @Test
  void dotSegmentsAboveTheRootAreRemovedAndTheRestRouted() throws Exception {
    long before = payments.executions();
    RawHttp.Response dots = RawHttp.exchange(port, bytes(post("/%2e%2e/payments", List.of("Content-Length: 2",
        "Connection: close"), "{}")), 10000);
    assertEquals(201, dots.status(), dots.text());
    RawHttp.Response plain = RawHttp.exchange(port, bytes(post("/../payments?a=1", List.of("Content-Length: 2",
        "Connection: close"), "{}")), 10000);
    assertEquals(201, plain.status(), plain.text());
    assertEquals(before + 2, payments.executions());
    problem(RawHttp.exchange(port, bytes(post("/..", List.of("Content-Length: 2", "Connection: close"), "{}")), 10000),
        404, "not-found");
    assertEquals(before + 2, payments.executions());
  }

  @Test
  void pipelinedRequestsAreAnsweredInOrderBeforeARefusal() throws Exception {
    long before = payments.executions();
    String one = post("/payments", List.of("Content-Length: 13"), "{\"amount\":11}");
    String two = post("/refunds", List.of("Transfer-Encoding: chunked"), "5\r\n{\"amo\r\n8\r\nunt\":22}\r\n0\r\n\r\n");
    String slow = post("/payments", List.of("Content-Length: 16"), "{\"delay_ms\":300}");
    String stats = "GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    String bad = post("/payments", List.of("Content-Length: 3", "Transfer-Encoding: chunked"), "3\r\nabc\r\n0\r\n\r\n");
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), 10000);
      s.setSoTimeout(20000);
      s.getOutputStream().write(bytes(one + two + slow + stats + bad));
      s.getOutputStream().flush();
      InputStream in = new java.io.BufferedInputStream(s.getInputStream());
      RawHttp.Response a = RawHttp.readFrom(in);
      assertEquals(201, a.status(), a.text());
      assertEquals(11, JsonParser.parseString(a.text()).getAsJsonObject().get("amount").getAsInt());
      RawHttp.Response b = RawHttp.readFrom(in);
      assertEquals(201, b.status(), b.text());
      assertEquals(22, JsonParser.parseString(b.text()).getAsJsonObject().get("amount").getAsInt());
      assertTrue(b.text().contains("refund"), b.text());
      RawHttp.Response c = RawHttp.readFrom(in);
      assertEquals(201, c.status(), c.text());
      RawHttp.Response d = RawHttp.readFrom(in);
      assertEquals(200, d.status(), d.text());
      assertEquals(before + 3, JsonParser.parseString(d.text()).getAsJsonObject().get("executions").getAsLong());
      RawHttp.Response e = RawHttp.readFrom(in);
      problem(e, 400, "body-malformed");
      assertEquals("close", e.header("connection"));
      assertEquals(-1, in.read(), "the connection is closed after the refusal");
    }
    assertEquals(before + 3, payments.executions());
  }

  /** A stand-in container: takes one connection, keeps every byte until want came, answers 204. */
  static CompletableFuture<byte[]> recorder(ServerSocket ss, int want) {
    return CompletableFuture.supplyAsync(() -> {
      try (Socket c = ss.accept()) {
        c.setSoTimeout(10000);
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        byte[] buf = new byte[4096];
        while (got.size() < want) {
          int n = c.getInputStream().read(buf);
          if (n < 0) break;
          got.write(buf, 0, n);
        }
        c.getOutputStream().write(bytes("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"));
        return got.toByteArray();
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    });
  }

  @Test
  void aChunkedBodyReachesTheContainerByteForByte() throws Exception {
    try (ServerSocket ss = new ServerSocket(0, 8, java.net.InetAddress.getLoopbackAddress());
         HeadFront front = HeadFront.builder(new InetSocketAddress("127.0.0.1", 0),
             new InetSocketAddress("127.0.0.1", ss.getLocalPort())).start()) {
      byte[] chunk = new byte[70000];
      for (int i = 0; i < chunk.length; i++) chunk[i] = (byte) (i * 31);
      ByteArrayOutputStream req = new ByteArrayOutputStream();
      req.write(bytes("POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nX-Odd: \u00e9\u00ff\r\n\r\n"));
      req.write(bytes(Integer.toHexString(chunk.length) + ";name=\"v\"\r\n"));
      req.write(chunk);
      req.write(bytes("\r\n1\r\n\r\r\n0\r\nX-Trailer: t\r\n\r\n"));
      byte[] sent = req.toByteArray();
      CompletableFuture<byte[]> got = recorder(ss, sent.length);
      try (Socket s = new Socket("127.0.0.1", front.port())) {
        s.setSoTimeout(10000);
        OutputStream out = s.getOutputStream();
        for (int off = 0; off < sent.length; off += 997) { // in pieces, as a network may split it
          out.write(sent, off, Math.min(997, sent.length - off));
          out.flush();
        }
        RawHttp.Response r = RawHttp.readFrom(new java.io.BufferedInputStream(s.getInputStream()));
        assertEquals(204, r.status());
      }
      assertArrayEquals(sent, got.get(10, TimeUnit.SECONDS));
    }
  }

  @Test
  void slowClientsDoNotHoldOthers() throws Exception {
    List<Socket> slow = new ArrayList<>();
    try {
      for (int i = 0; i < 50; i++) { // half a head, half a chunked body, half a Content-Length body
        Socket s = new Socket("127.0.0.1", port);
        String part = switch (i % 3) {
          case 0 -> "POST /payments HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
          case 1 -> post("/payments", List.of("Transfer-Encoding: chunked"), "10\r\n{\"amou");
          default -> post("/payments", List.of("Content-Length: 100"), "{\"amou");
        };
        s.getOutputStream().write(bytes(part));
        s.getOutputStream().flush();
        slow.add(s);
      }
      long worst = 0;
      for (int i = 0; i < 5; i++) {
        long t0 = System.nanoTime();
        RawHttp.Response r = RawHttp.exchange(port, bytes("GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"), 5000);
        worst = Math.max(worst, (System.nanoTime() - t0) / 1_000_000);
        assertEquals(200, r.status(), r.text());
        assertNotNull(r.header("content-type"));
      }
      System.out.println("50 slow clients open: GET /stats answered in at most " + worst + " ms (5 tries)");
      assertTrue(worst < 1000, "GET /stats took " + worst + " ms");
      // a slow head, completed now, is still served
      Socket s = slow.get(0);
      s.getOutputStream().write(bytes("1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"));
      s.getOutputStream().flush();
      s.setSoTimeout(10000);
      RawHttp.Response r = RawHttp.exchangeRead(s);
      assertEquals(201, r.status(), r.text());
      assertFalse(r.text().isEmpty());
    } finally {
      for (Socket s : slow) s.close();
    }
  }
}
