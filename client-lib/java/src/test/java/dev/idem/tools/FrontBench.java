package dev.idem.tools;

import dev.idem.client.IdemClient;
import dev.idem.examples.HttpExample;
import dev.idem.servlet.IdempotencyFilter;
import dev.idem.support.RawHttp;
import java.io.BufferedInputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.catalina.startup.Tomcat;

/**
 * The cost of the raw-byte front (dev.idem.servlet.HeadFront): the example (HttpExample.serve, the
 * filter passing every method) asked a trivial request over C keep-alive connections for S
 * seconds, through the front and straight to Tomcat's loopback port, in R alternating rounds:
 *
 * <pre>
 * java -cp "$(cat build/java/test-classpath)" dev.idem.tools.FrontBench [C [S [R]]]
 * </pre>
 *
 * Prints one line per round: requests per second of GET /stats and of POST /nowhere (a 404
 * problem document), each way (a connection Tomcat closes, after its 100 keep-alive requests, is
 * opened again).
 */
public final class FrontBench {
  private FrontBench() {}

  static double rate(int port, byte[] req, int conns, double seconds) throws Exception {
    AtomicLong done = new AtomicLong();
    long end = System.nanoTime() + (long) (seconds * 1e9);
    List<Thread> ts = new ArrayList<>();
    for (int i = 0; i < conns; i++) {
      Thread t = new Thread(() -> {
        while (System.nanoTime() < end) { // Tomcat closes a connection after 100 requests: a new one
          try (Socket s = new Socket("127.0.0.1", port)) {
            s.setTcpNoDelay(true);
            OutputStream out = s.getOutputStream();
            InputStream in = new BufferedInputStream(s.getInputStream());
            while (System.nanoTime() < end) {
              out.write(req);
              out.flush();
              RawHttp.Response r = RawHttp.readFrom(in);
              if (r.status() != 200 && r.status() != 404) throw new IllegalStateException("status " + r.status());
              done.incrementAndGet();
              if ("close".equalsIgnoreCase(r.header("connection"))) break;
            }
          } catch (Exception e) {
            throw new RuntimeException(e);
          }
        }
      });
      t.start();
      ts.add(t);
    }
    for (Thread t : ts) t.join();
    return done.get() / seconds;
  }

  public static void main(String[] args) throws Exception {
    int conns = args.length > 0 ? Integer.parseInt(args[0]) : 8;
    double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 3;
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
    int port;
    try (ServerSocket ss = new ServerSocket(0)) {
      port = ss.getLocalPort();
    }
    try (IdemClient unused = IdemClient.builder().address("127.0.0.1:1").tenant("t").build()) {
      Tomcat t = HttpExample.serve(port, IdempotencyFilter.builder(unused).methods("NONE").build(), new HttpExample.Payments());
      int direct = t.getConnector().getLocalPort();
      byte[] stats = "GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1);
      byte[] nowhere = "POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}".getBytes(StandardCharsets.ISO_8859_1);
      for (int w = 0; w < 2; w++) { // warm-up (the JIT), every way
        rate(direct, stats, conns, seconds);
        rate(port, stats, conns, seconds);
        rate(direct, nowhere, conns, seconds);
        rate(port, nowhere, conns, seconds);
      }
      for (int r = 1; r <= rounds; r++) {
        System.out.printf("round %d: GET /stats %.0f req/s straight to Tomcat, %.0f through the front; "
            + "POST /nowhere %.0f and %.0f (%d keep-alive connections, %.0f s each)%n", r,
            rate(direct, stats, conns, seconds), rate(port, stats, conns, seconds),
            rate(direct, nowhere, conns, seconds), rate(port, nowhere, conns, seconds), conns, seconds);
      }
      t.stop();
      t.destroy();
    }
  }
}
