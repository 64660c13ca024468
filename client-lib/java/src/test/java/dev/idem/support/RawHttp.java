package dev.idem.support;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A tiny HTTP/1.1 client over a socket, one request per connection, for what java.net.http
 * will not send: any header byte (malformed keys), chunked bodies one chunk each, a declared
 * Content-Length longer than what is sent, and an upload aborted half-way.
 */
public final class RawHttp {
  public record Response(int status, Map<String, String> headers, byte[] body) {
    public String header(String name) { return headers.get(name.toLowerCase(Locale.ROOT)); }

    public String text() { return new String(body, StandardCharsets.UTF_8); }
  }

  /** A request; null fields are left out. */
  public static final class Request {
    public String method = "POST";
    public String path = "/echo";
    public final List<String[]> headers = new ArrayList<>();
    public byte[] body;
    public List<byte[]> chunks;
    public Long contentLength;
    public boolean abort;

    public Request header(String n, String v) {
      headers.add(new String[] {n, v});
      return this;
    }
  }

  private RawHttp() {}

  /** Sends the request; the answer, or null when an aborted upload got none. */
  public static Response send(int port, Request r, int timeoutMs) throws IOException {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), timeoutMs);
      s.setSoTimeout(timeoutMs);
      ByteArrayOutputStream head = new ByteArrayOutputStream();
      line(head, r.method + " " + r.path + " HTTP/1.1");
      line(head, "Host: 127.0.0.1:" + port);
      line(head, "Connection: close");
      for (String[] h : r.headers) line(head, h[0] + ": " + h[1]);
      if (r.chunks != null) {
        line(head, "Transfer-Encoding: chunked");
      } else {
        long n = r.contentLength != null ? r.contentLength : r.body == null ? 0 : r.body.length;
        line(head, "Content-Length: " + n);
      }
      line(head, "");
      OutputStream out = s.getOutputStream();
      out.write(head.toByteArray());
      if (r.chunks != null) {
        for (byte[] c : r.chunks) {
          out.write((Integer.toHexString(c.length) + "\r\n").getBytes(StandardCharsets.ISO_8859_1));
          out.write(c);
          out.write("\r\n".getBytes(StandardCharsets.ISO_8859_1));
        }
        if (!r.abort) out.write("0\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1));
      } else if (r.body != null) {
        out.write(r.body);
      }
      out.flush();
      if (r.abort) s.shutdownOutput();
      try {
        return read(s.getInputStream());
      } catch (IOException e) {
        if (r.abort) return null;
        throw e;
      }
    }
  }

  /** Sends the bytes as they are on a connection of their own; the answer (the status line's version too). */
  public static Response exchange(int port, byte[] data, int timeoutMs) throws IOException {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), timeoutMs);
      s.setSoTimeout(timeoutMs);
      OutputStream out = s.getOutputStream();
      try {
        out.write(data);
        out.flush();
      } catch (IOException e) {
        // the server answered and closed before it read everything: read its answer
      }
      return read(s.getInputStream());
    }
  }

  /** Reads one answer from a connection the caller wrote to. */
  public static Response exchangeRead(Socket s) throws IOException {
    return read(s.getInputStream());
  }

  private static void line(ByteArrayOutputStream o, String l) {
    byte[] b = (l + "\r\n").getBytes(StandardCharsets.ISO_8859_1);
    o.write(b, 0, b.length);
  }

  private static String readLine(InputStream in) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    int c;
    while ((c = in.read()) >= 0) {
      if (c == '\n') break;
      if (c != '\r') b.write(c);
    }
    if (c < 0 && b.size() == 0) throw new IOException("connection closed without an answer");
    return b.toString(StandardCharsets.ISO_8859_1);
  }

  /** Sends the request and reads the answer's body without keeping it: (status, body bytes). */
  public static long[] sendDiscard(int port, Request r, int timeoutMs) throws IOException {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), timeoutMs);
      s.setSoTimeout(timeoutMs);
      ByteArrayOutputStream head = new ByteArrayOutputStream();
      line(head, r.method + " " + r.path + " HTTP/1.1");
      line(head, "Host: 127.0.0.1:" + port);
      line(head, "Connection: close");
      for (String[] h : r.headers) line(head, h[0] + ": " + h[1]);
      byte[] body = r.body == null ? new byte[0] : r.body;
      line(head, "Content-Length: " + body.length);
      line(head, "");
      OutputStream out = s.getOutputStream();
      out.write(head.toByteArray());
      out.write(body);
      out.flush();
      InputStream in = new java.io.BufferedInputStream(s.getInputStream(), 64 * 1024);
      String[] parts = readLine(in).split(" ", 3);
      Map<String, String> hs = new HashMap<>();
      for (String l = readLine(in); !l.isEmpty(); l = readLine(in)) {
        int i = l.indexOf(':');
        hs.put(l.substring(0, i).trim().toLowerCase(Locale.ROOT), l.substring(i + 1).trim());
      }
      long n = 0;
      byte[] buf = new byte[64 * 1024];
      if ("chunked".equalsIgnoreCase(hs.get("transfer-encoding"))) {
        while (true) {
          String sz = readLine(in);
          int semi = sz.indexOf(';');
          long c = Long.parseLong((semi >= 0 ? sz.substring(0, semi) : sz).trim(), 16);
          if (c == 0) break;
          for (long left = c; left > 0; ) {
            int k = in.read(buf, 0, (int) Math.min(buf.length, left));
            if (k < 0) throw new IOException("the answer ended inside a chunk");
            left -= k;
            n += k;
          }
          readLine(in);
        }
      } else {
        for (int k; (k = in.read(buf)) >= 0; ) n += k;
      }
      return new long[] {Integer.parseInt(parts[1]), n};
    }
  }

  static Response read(InputStream raw) throws IOException {
    return readFrom(new java.io.BufferedInputStream(raw));
  }

  /** Reads one answer from in, no further (pipelined answers: call again on the same stream). */
  public static Response readFrom(InputStream in) throws IOException {
    String status = readLine(in);
    String[] parts = status.split(" ", 3);
    if (parts.length < 2 || !parts[0].startsWith("HTTP/")) throw new IOException("not an HTTP answer: " + status);
    Map<String, String> hs = new HashMap<>();
    hs.put(":version", parts[0]);
    for (String l = readLine(in); !l.isEmpty(); l = readLine(in)) {
      int i = l.indexOf(':');
      hs.merge(l.substring(0, i).trim().toLowerCase(Locale.ROOT), l.substring(i + 1).trim(), (a, b) -> a + ", " + b);
    }
    ByteArrayOutputStream body = new ByteArrayOutputStream();
    if ("chunked".equalsIgnoreCase(hs.get("transfer-encoding"))) {
      while (true) {
        String sz = readLine(in);
        int semi = sz.indexOf(';');
        int n = Integer.parseInt((semi >= 0 ? sz.substring(0, semi) : sz).trim(), 16);
        if (n == 0) {
          while (!readLine(in).isEmpty()) { /* trailers */ }
          break;
        }
        body.write(in.readNBytes(n));
        readLine(in);
      }
    } else if (hs.containsKey("content-length")) {
      body.write(in.readNBytes(Integer.parseInt(hs.get("content-length"))));
    } else {
      in.transferTo(body);
    }
    return new Response(Integer.parseInt(parts[1]), hs, body.toByteArray());
  }
}
