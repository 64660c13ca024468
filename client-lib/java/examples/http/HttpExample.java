package dev.idem.examples;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.idem.client.IdemClient;
import dev.idem.client.IdemException;
import dev.idem.servlet.HeadFront;
import dev.idem.servlet.IdempotencyFilter;
import dev.idem.servlet.IdempotencyKey;
import dev.idem.servlet.Problems;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.catalina.Context;
import org.apache.catalina.Lifecycle;
import org.apache.catalina.LifecycleException;
import org.apache.catalina.Wrapper;
import org.apache.catalina.connector.Connector;
import org.apache.catalina.connector.Request;
import org.apache.catalina.connector.Response;
import org.apache.catalina.core.StandardHost;
import org.apache.catalina.startup.Tomcat;
import org.apache.catalina.valves.ErrorReportValve;
import org.apache.tomcat.util.descriptor.web.FilterDef;
import org.apache.tomcat.util.descriptor.web.FilterMap;

/**
 * examples/http — a payments API behind the Idempotency-Key servlet filter, on embedded Tomcat 10
 * (Jakarta Servlet; docs/api.md §19, docs/sdk-java.md):
 *
 * <pre>
 * IDEM_ADDRESS=127.0.0.1:50051 IDEM_TENANT=shop PORT=8084 scripts/example-http java
 * curl -si -X POST -H 'Idempotency-Key: "order-42"' -d '{"amount":100}' 127.0.0.1:8084/payments
 * </pre>
 *
 * POST /payments (and POST /refunds) are wrapped: 201 with a JSON body naming the execution
 * number; the same key again gets the stored answer with Idempotent-Replayed: true. A body with
 * "fail": true makes the handler answer 500 (stored as retryable: the next retry runs again);
 * "delay_ms": N makes it take N ms; "big": N answers 201 text/plain with N bytes of x. GET /stats
 * → {"executions": N}. Another path is 404, another method 405, Tomcat's own errors 400/431: all
 * problem documents (client-lib/conformance/http-middleware.json's example_server). Environment: IDEM_ADDRESS
 * (default 127.0.0.1:50051), IDEM_TENANT (default shop), IDEM_TOKEN, PORT (default 8084),
 * IDEM_SERVICE (default http-java), IDEM_JOURNAL (the fail-open journal; default
 * idem-http-java-journal.log in the temporary folder), IDEM_HTTP_TIMEOUT_S (default 10),
 * IDEM_HTTP_WAIT=1 (wait for a request in progress instead of 409).
 */
public final class HttpExample {
  private HttpExample() {}

  /**
   * The application: counts its executions. Routes on the request's one spelling (docs/api.md
   * §19 rule 5: /p%61yments, /payments/ and /x/../payments are /payments); a method
   * with a lower-case letter is 400 request-malformed, another path 404 not-found, a route's path
   * with another method 405 method-not-allowed with Allow: problem documents
   * (http-middleware.json's example_server).
   */
  public static final class Payments extends HttpServlet {
    private static final long serialVersionUID = 1L;
    static final Map<String, String> ROUTES = Map.of("/payments", "POST", "/refunds", "POST", "/stats", "GET");
    private final AtomicLong executions = new AtomicLong();

    public long executions() { return executions.get(); }

    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      String method = req.getMethod();
      if (!method.equals(method.toUpperCase(Locale.ROOT))) {
        Problems.send(req, resp, "request-malformed", "the method " + method + " has a lower-case letter (methods are"
            + " case-sensitive)", null);
        return;
      }
      String path;
      try {
        path = IdempotencyKey.normalizeTarget(req.getRequestURI()).path();
      } catch (IdempotencyKey.TargetMalformed e) {
        Problems.send(req, resp, "target-malformed", e.getMessage() + "; nothing ran", null);
        return;
      }
      String allowed = ROUTES.get(path);
      if (allowed == null) {
        Problems.send(req, resp, "not-found", "no route has the path " + path, null);
        return;
      }
      if (!method.equals(allowed)) {
        Problems.send(req, resp, "method-not-allowed", path + " answers " + allowed + ", not " + method, allowed);
        return;
      }
      if (path.equals("/stats")) {
        json(resp, 200, "{\"executions\": " + executions.get() + "}");
        return;
      }
      JsonObject body;
      try {
        JsonElement e = JsonParser.parseString(new String(req.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
        body = e.isJsonObject() ? e.getAsJsonObject() : new JsonObject();
      } catch (RuntimeException e) {
        body = new JsonObject();
      }
      long n = executions.incrementAndGet();
      long delay = number(body, "delay_ms");
      if (delay > 0) {
        try {
          Thread.sleep(Math.min(delay, 10000));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      if (body.has("fail") && body.get("fail").isJsonPrimitive() && body.get("fail").getAsJsonPrimitive().isBoolean()
          && body.get("fail").getAsBoolean()) {
        json(resp, 500, "{\"error\": \"payment gateway failed\", \"execution\": " + n + "}");
        return;
      }
      long big = number(body, "big");
      if (big >= 0 && body.has("big")) {
        byte[] b = "x".repeat((int) Math.min(big, 64L << 20)).getBytes(StandardCharsets.US_ASCII);
        resp.setStatus(201);
        resp.setContentType("text/plain");
        resp.setContentLength(b.length);
        resp.getOutputStream().write(b);
        return;
      }
      String kind = path.substring(1, path.length() - 1);
      JsonElement amount = body.has("amount") ? body.get("amount") : null;
      json(resp, 201, "{\"" + kind + "\": \"" + kind + "-" + n + "\", \"execution\": " + n + ", \"amount\": "
          + (amount == null ? "null" : amount.toString()) + "}");
    }

    private static long number(JsonObject o, String name) {
      JsonElement e = o.get(name);
      if (e == null || !e.isJsonPrimitive() || !e.getAsJsonPrimitive().isNumber()) return -1;
      try {
        return e.getAsBigDecimal().longValueExact();
      } catch (ArithmeticException x) {
        return -1;
      }
    }

    static void json(HttpServletResponse resp, int status, String doc) throws IOException {
      byte[] b = doc.getBytes(StandardCharsets.UTF_8);
      resp.setStatus(status);
      resp.setContentType("application/json");
      resp.setContentLength(b.length);
      resp.getOutputStream().write(b);
    }
  }

  /**
   * Routing first (http-middleware.json's example_server.routing): a method with a lower-case
   * letter is 400 request-malformed and a target with no one spelling 400 target-malformed, then
   * another path is 404 not-found and a route's path with another method 405 method-not-allowed
   * with Allow, all before the Idempotency-Key filter, which so wraps only the POST routes.
   */
  public static final class Router implements Filter {
    private final Map<String, String> routes;

    public Router(Map<String, String> routes) { this.routes = routes; }

    @Override
    public void doFilter(ServletRequest sreq, ServletResponse sresp, FilterChain chain) throws IOException, ServletException {
      HttpServletRequest req = (HttpServletRequest) sreq;
      HttpServletResponse resp = (HttpServletResponse) sresp;
      String method = req.getMethod();
      if (!method.equals(method.toUpperCase(Locale.ROOT))) {
        Problems.send(req, resp, "request-malformed", "the method " + method + " has a lower-case letter (methods are"
            + " case-sensitive)", null);
        return;
      }
      String path;
      try {
        path = IdempotencyKey.normalizeTarget(req.getRequestURI()).path();
      } catch (IdempotencyKey.TargetMalformed e) {
        Problems.send(req, resp, "target-malformed", e.getMessage() + "; nothing ran", null);
        return;
      }
      String allowed = routes.get(path);
      if (allowed == null) {
        Problems.send(req, resp, "not-found", "no route has the path " + path, null);
        return;
      }
      if (!method.equals(allowed)) {
        Problems.send(req, resp, "method-not-allowed", path + " answers " + allowed + ", not " + method, allowed);
        return;
      }
      chain.doFilter(req, resp);
    }
  }

  /**
   * Tomcat's own error answers (a malformed request head, a header section past its limit, an
   * exception out of a servlet) as problem documents: no stack trace, no server version
   * (ErrorReportValve with showReport and showServerInfo off, its report replaced).
   */
  public static final class ProblemValve extends ErrorReportValve {
    public ProblemValve() {
      setShowReport(false);
      setShowServerInfo(false);
    }

    @Override
    protected void report(Request request, Response response, Throwable t) {
      int status = response.getStatus();
      if (status < 400 || response.getContentWritten() > 0 || !response.setErrorReported()) return;
      String word;
      String detail;
      String why = t != null ? String.valueOf(t.getMessage()) : String.valueOf(response.getMessage());
      String framing = null;
      boolean target = false;
      try {
        framing = IdempotencyFilter.framingProblem(request);
        if (request.getRequestURI() != null) IdempotencyKey.normalizeTarget(request.getRequestURI());
      } catch (IdempotencyKey.TargetMalformed e) {
        target = true;
      } catch (RuntimeException e) {
        // a request Tomcat could not parse this far: the generic answer below
      }
      if ((status == 400 || status == 501) && framing != null) {
        word = "body-malformed";
        detail = "the request body's framing is ambiguous (" + framing + "); nothing ran";
      } else if (status == 400 && target) {
        word = "target-malformed";
        detail = "the request target has no one spelling; nothing ran";
      } else if (status == 413) {
        word = "body-too-large";
        detail = "the request body is longer than the server's limit";
      } else if (why.contains("header") && (why.contains("too large") || why.contains("too long"))) {
        word = "header-too-large";
        detail = "the request head is longer than the server's " + HEAD_LIMIT + "-byte limit";
      } else if (status == 404) {
        word = "not-found";
        detail = "no route has this path";
      } else if (status == 405) {
        word = "method-not-allowed";
        detail = "the route does not answer this method";
      } else if (status >= 500) {
        word = "middleware-error";
        detail = "the server failed to answer the request; its log has the details";
      } else {
        word = "request-malformed";
        detail = "the request is not valid HTTP/1.1 (refused by the server before any program code ran)";
      }
      byte[] body = Problems.document(word, detail);
      try {
        response.setStatus(Problems.status(word));
        response.setContentType("application/problem+json");
        response.setContentLength(body.length);
        response.getOutputStream().write(body);
        response.finishResponse();
      } catch (IOException | IllegalStateException e) {
        // the connection is gone: nothing to answer
      }
    }
  }

  /** The request head limit (http-middleware.json's example_server head_limit). */
  static final int HEAD_LIMIT = 16384;

  /**
   * Embedded Tomcat serving {@code servlet} at every path behind {@code filter}, behind a
   * {@link HeadFront} on 127.0.0.1:port; started. Tomcat itself listens on a free loopback port
   * that only the front connects to: the front answers what Tomcat would repair or refuse before
   * any filter runs (a folded field line, Content-Length beside chunked, dot segments above the
   * root, docs/api.md §19) and relays the rest byte for byte; stopping Tomcat closes the front.
   * Throws BindException when the port is taken. The filter reads request bodies without holding
   * a thread (the servlet and filter are async-supported), so slow uploads leave the pool free for
   * other requests; Tomcat's own errors are problem documents ({@link ProblemValve}); no Server
   * header.
   */
  public static Tomcat serve(int port, Filter filter, HttpServlet servlet) throws IOException, LifecycleException {
    Tomcat t = new Tomcat();
    Path base = Files.createTempDirectory("idem-tomcat.");
    base.toFile().deleteOnExit();
    t.setBaseDir(base.toString());
    Connector c = new Connector();
    c.setPort(0); // a free port, for the front only
    c.setProperty("address", "127.0.0.1");
    c.setProperty("maxThreads", "250");
    c.setProperty("acceptCount", "256");
    c.setProperty("maxHttpHeaderSize", Integer.toString(HEAD_LIMIT));
    c.setProperty("maxHttpRequestHeaderSize", Integer.toString(HEAD_LIMIT));
    c.setEncodedSolidusHandling("decode");
    // an absolute-form target names its own host: RFC 9112 §3.2.2 has the server use it and ignore
    // Host, which Tomcat otherwise refuses when they differ (docs/api.md §19, rule 5)
    c.setProperty("allowHostHeaderMismatch", "true");
    t.setConnector(c);
    ((StandardHost) t.getHost()).setErrorReportValveClass(ProblemValve.class.getName());
    Context ctx = t.addContext("", base.toString());
    if (servlet instanceof Payments) { // the example's routes: routing comes first, before the filter
      FilterDef rd = new FilterDef();
      rd.setFilterName("routes");
      rd.setFilter(new Router(Payments.ROUTES));
      rd.setAsyncSupported("true");
      ctx.addFilterDef(rd);
      FilterMap rm = new FilterMap();
      rm.setFilterName("routes");
      rm.addURLPattern("/*");
      rm.setDispatcher("REQUEST");
      ctx.addFilterMap(rm);
    }
    Wrapper w = Tomcat.addServlet(ctx, "app", servlet);
    w.setAsyncSupported(true);
    w.addMapping("/*");
    FilterDef fd = new FilterDef();
    fd.setFilterName("idem");
    fd.setFilter(filter);
    fd.setAsyncSupported("true");
    ctx.addFilterDef(fd);
    FilterMap fm = new FilterMap();
    fm.setFilterName("idem");
    fm.addURLPattern("/*");
    fm.setDispatcher("REQUEST");
    fm.setDispatcher("ASYNC");
    ctx.addFilterMap(fm);
    t.start();
    if (c.getState() != org.apache.catalina.LifecycleState.STARTED) {
      t.stop();
      t.destroy();
      throw new BindException("Tomcat cannot listen on a loopback port");
    }
    HeadFront front;
    try {
      front = HeadFront.builder(new InetSocketAddress("127.0.0.1", port), new InetSocketAddress("127.0.0.1", c.getLocalPort()))
          .headLimit(HEAD_LIMIT).start();
    } catch (BindException e) {
      t.stop();
      t.destroy();
      throw e;
    }
    t.getServer().addLifecycleListener(ev -> {
      if (Lifecycle.BEFORE_STOP_EVENT.equals(ev.getType())) front.close();
    });
    return t;
  }

  static String env(String name, String dflt) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? dflt : v;
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(env("PORT", "8084"));
    String journal = env("IDEM_JOURNAL", Path.of(System.getProperty("java.io.tmpdir"), "idem-http-java-journal.log").toString());
    Duration timeout = Duration.ofMillis((long) (Double.parseDouble(env("IDEM_HTTP_TIMEOUT_S", "10")) * 1000));
    IdemClient.Builder cb = IdemClient.builder().address(env("IDEM_ADDRESS", "127.0.0.1:50051"))
        .tenant(env("IDEM_TENANT", "shop")).journal(Path.of(journal));
    if (System.getenv("IDEM_TOKEN") != null && !System.getenv("IDEM_TOKEN").isEmpty()) cb.token(System.getenv("IDEM_TOKEN"));
    IdemClient client = cb.build();
    IdempotencyFilter filter = IdempotencyFilter.builder(client).service(env("IDEM_SERVICE", "http-java"))
        .timeout(timeout).waitInProgress(env("IDEM_HTTP_WAIT", "").equals("1")).build();
    Tomcat t;
    try {
      t = serve(port, filter, new Payments());
    } catch (BindException e) {
      System.err.println("examples/http (java): cannot listen on 127.0.0.1:" + port + ": port " + port
          + " is taken (quickstart's console holds 8080): choose another with PORT=, e.g. PORT=" + (port + 10));
      client.close();
      System.exit(1);
      return;
    }
    // learn the wrapped route's policy at start-up (its failure mode, before any outage), which
    // also opens the channel: a cold JVM's first call would otherwise be the first request's
    try {
      client.prefetchPolicy(env("IDEM_SERVICE", "http-java"), "post--payments");
    } catch (IdemException e) {
      System.err.println("examples/http (java): no policy yet (" + e.getMessage() + "); going on");
    }
    System.err.println("examples/http (java): listening on 127.0.0.1:" + port + ", coordinator "
        + env("IDEM_ADDRESS", "127.0.0.1:50051") + ", tenant " + client.tenant());
    t.getServer().await();
  }
}
