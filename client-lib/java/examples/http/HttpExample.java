package dev.idem.examples;

import dev.idem.client.IdemClient;
import dev.idem.servlet.IdempotencyFilter;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.BindException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.catalina.Context;
import org.apache.catalina.LifecycleException;
import org.apache.catalina.connector.Connector;
import org.apache.catalina.startup.Tomcat;
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
 * "delay_ms": N makes it take N ms. GET /stats → {"executions": N}. Environment: IDEM_ADDRESS
 * (default 127.0.0.1:50051), IDEM_TENANT (default shop), IDEM_TOKEN, PORT (default 8084),
 * IDEM_SERVICE (default http-java), IDEM_JOURNAL (the fail-open journal; default
 * idem-http-java-journal.log in the temporary folder), IDEM_HTTP_TIMEOUT_S (default 10),
 * IDEM_HTTP_WAIT=1 (wait for a request in progress instead of 409).
 */
public final class HttpExample {
  private HttpExample() {}

  /** The application: counts its executions. */
  public static final class Payments extends HttpServlet {
    private static final long serialVersionUID = 1L;
    private static final Pattern AMOUNT = Pattern.compile("\"amount\"\\s*:\\s*(-?[0-9]+)");
    private static final Pattern DELAY = Pattern.compile("\"delay_ms\"\\s*:\\s*([0-9]+)");
    private static final Pattern FAIL = Pattern.compile("\"fail\"\\s*:\\s*true");
    private final AtomicLong executions = new AtomicLong();

    public long executions() { return executions.get(); }

    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      String path = req.getRequestURI();
      if (req.getMethod().equals("GET") && path.equals("/stats")) {
        json(resp, 200, "{\"executions\": " + executions.get() + "}");
        return;
      }
      if (!req.getMethod().equals("POST") || !(path.equals("/payments") || path.equals("/refunds"))) {
        json(resp, 404, "{\"error\": \"not found\"}");
        return;
      }
      String body = new String(req.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      long n = executions.incrementAndGet();
      Matcher d = DELAY.matcher(body);
      if (d.find()) {
        try {
          Thread.sleep(Math.min(Long.parseLong(d.group(1)), 10000));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      if (FAIL.matcher(body).find()) {
        json(resp, 500, "{\"error\": \"payment gateway failed\", \"execution\": " + n + "}");
        return;
      }
      Matcher a = AMOUNT.matcher(body);
      String kind = path.substring(1, path.length() - 1);
      json(resp, 201, "{\"" + kind + "\": \"" + kind + "-" + n + "\", \"execution\": " + n + ", \"amount\": "
          + (a.find() ? a.group(1) : "null") + "}");
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
   * Embedded Tomcat on 127.0.0.1:port serving {@code servlet} at every path behind
   * {@code filter}; started. Throws BindException when the port is taken.
   */
  public static Tomcat serve(int port, Filter filter, HttpServlet servlet) throws IOException, LifecycleException {
    Tomcat t = new Tomcat();
    Path base = Files.createTempDirectory("idem-tomcat.");
    base.toFile().deleteOnExit();
    t.setBaseDir(base.toString());
    Connector c = new Connector();
    c.setPort(port);
    c.setProperty("address", "127.0.0.1");
    c.setProperty("maxThreads", "250");
    c.setProperty("acceptCount", "256");
    t.setConnector(c);
    Context ctx = t.addContext("", base.toString());
    Tomcat.addServlet(ctx, "app", servlet).addMapping("/*");
    FilterDef fd = new FilterDef();
    fd.setFilterName("idem");
    fd.setFilter(filter);
    ctx.addFilterDef(fd);
    FilterMap fm = new FilterMap();
    fm.setFilterName("idem");
    fm.addURLPattern("/*");
    ctx.addFilterMap(fm);
    t.start();
    if (c.getState() != org.apache.catalina.LifecycleState.STARTED) {
      t.stop();
      t.destroy();
      throw new BindException("cannot listen on 127.0.0.1:" + port);
    }
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
    System.err.println("examples/http (java): listening on 127.0.0.1:" + port + ", coordinator "
        + env("IDEM_ADDRESS", "127.0.0.1:50051") + ", tenant " + client.tenant());
    t.getServer().await();
  }
}
