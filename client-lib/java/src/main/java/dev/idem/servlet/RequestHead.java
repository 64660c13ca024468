package dev.idem.servlet;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * One HTTP/1.1 request head read from its raw bytes, for {@link HeadFront}: where it ends, how its
 * body is framed, and whether docs/api.md §19 refuses it before any server sees it. It parses only
 * what that needs (the request line's three parts, each field line's name and value); everything
 * else is the server's to judge. Immutable; {@link #parse} is pure.
 *
 * <p>Refused (the rule's problem type words, http-middleware.json): a folded field line
 * (obs-fold), a field name that is not a token, a control character in a field value, a request
 * line that is not method SP target SP HTTP/d.d: {@code request-malformed}; Content-Length beside
 * Transfer-Encoding, a Content-Length that is not 1*DIGIT (at most 18 digits) or comes more than
 * once, a Transfer-Encoding other than one {@code chunked} (any in HTTP/1.0): {@code
 * body-malformed}; no end of the head within the limit: {@code header-too-large}.
 *
 * <p>A target whose path, percent-decoded, has dot segments that climb above the root (which
 * Tomcat refuses with no setting to change it) is rewritten to the rule's normalized path
 * ({@link IdempotencyKey#normalizeTarget}, re-escaped) and the query as received; any other target
 * is left as received.
 */
final class RequestHead {
  /** The head is not complete in the bytes given: read more. */
  static final RequestHead MORE = new RequestHead(0, 0, null, null, null);

  /** Bytes of the head (request line to the empty line included), as received. */
  final int length;
  /** The body's length: 0 none, &gt; 0 Content-Length, -1 chunked. */
  final long body;
  /** The head to send on instead of the received bytes (a rewritten target), or null. */
  final byte[] rewritten;
  /** When refused: the problem type word and detail; else null. */
  final String problem;
  final String detail;

  private RequestHead(int length, long body, byte[] rewritten, String problem, String detail) {
    this.length = length;
    this.body = body;
    this.rewritten = rewritten;
    this.problem = problem;
    this.detail = detail;
  }

  static RequestHead refused(String problem, String detail) { return new RequestHead(0, 0, null, problem, detail); }

  private static final String TCHAR = "!#$%&'*+-.^_`|~";

  private static boolean token(byte[] b, int from, int to) {
    if (from >= to) return false;
    for (int i = from; i < to; i++) {
      int c = b[i] & 0xff;
      if (!(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || TCHAR.indexOf(c) >= 0)) return false;
    }
    return true;
  }

  /**
   * Parses the head at b[0..n) (leading empty lines are part of it, skipped as RFC 9112 §2.2
   * allows). Returns {@link #MORE} when it has not ended yet and n &lt;= limit; a refusal
   * ({@link #problem} set); or the head's length, framing and rewrite.
   */
  static RequestHead parse(byte[] b, int n, int limit) {
    int end = -1;
    int start = 0;
    while (start < n && (b[start] == '\r' || b[start] == '\n')) start++;
    for (int i = start; i < n; i++) { // the empty line: LF CRLF or LF LF
      if (b[i] != '\n') continue;
      if (i + 1 < n && b[i + 1] == '\n') {
        end = i + 2;
        break;
      }
      if (i + 2 < n && b[i + 1] == '\r' && b[i + 2] == '\n') {
        end = i + 3;
        break;
      }
    }
    if (end < 0 || end > limit) {
      if (n > limit || end > limit) return refused("header-too-large", "the request head is longer than " + limit + " bytes");
      return MORE;
    }
    List<int[]> lines = new ArrayList<>(); // [from, to) without the line end
    for (int i = start, from = start; i < end; i++) {
      if (b[i] == '\n') {
        int to = i > from && b[i - 1] == '\r' ? i - 1 : i;
        if (to > from) lines.add(new int[] {from, to});
        from = i + 1;
      }
    }
    int[] rl = lines.get(0);
    String line = new String(b, rl[0], rl[1] - rl[0], StandardCharsets.ISO_8859_1);
    String[] parts = line.split(" ", -1);
    if (parts.length != 3 || !token(b, rl[0], rl[0] + parts[0].length()) || parts[1].isEmpty()
        || !parts[2].matches("HTTP/[0-9]\\.[0-9]") || hasControl(parts[1])) {
      return refused("request-malformed", "the request line is not method SP target SP HTTP-version");
    }
    boolean http10 = parts[2].equals("HTTP/1.0");
    List<String> cl = new ArrayList<>();
    List<String> te = new ArrayList<>();
    for (int k = 1; k < lines.size(); k++) {
      int[] l = lines.get(k);
      if (b[l[0]] == ' ' || b[l[0]] == '\t') return refused("request-malformed", "a field line is folded (obs-fold)");
      int colon = l[0];
      while (colon < l[1] && b[colon] != ':') colon++;
      if (colon == l[1] || !token(b, l[0], colon)) {
        return refused("request-malformed", "a field line has no name that is a token");
      }
      String name = new String(b, l[0], colon - l[0], StandardCharsets.ISO_8859_1);
      for (int i = colon + 1; i < l[1]; i++) {
        int c = b[i] & 0xff;
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
          return refused("request-malformed", "the field " + name + " has a control character");
        }
      }
      String value = new String(b, colon + 1, l[1] - colon - 1, StandardCharsets.ISO_8859_1).strip();
      String lower = name.toLowerCase(Locale.ROOT);
      if (lower.equals("content-length")) cl.add(value);
      if (lower.equals("transfer-encoding")) te.add(value);
    }
    long body = 0;
    if (!te.isEmpty() && !cl.isEmpty()) {
      return refused("body-malformed", "the request has both Content-Length and Transfer-Encoding");
    } else if (!te.isEmpty() && http10) {
      return refused("body-malformed", "an HTTP/1.0 request has Transfer-Encoding");
    } else if (te.size() > 1 || (te.size() == 1 && !te.get(0).equalsIgnoreCase("chunked"))) {
      return refused("body-malformed", "Transfer-Encoding \"" + String.join(", ", te) + "\": only one \"chunked\" is allowed");
    } else if (cl.size() > 1) {
      return refused("body-malformed", "Content-Length comes " + cl.size() + " times");
    } else if (cl.size() == 1) {
      String v = cl.get(0);
      if (!v.matches("[0-9]{1,18}")) return refused("body-malformed", "Content-Length \"" + v + "\" is not a decimal number");
      body = Long.parseLong(v);
    } else if (te.size() == 1) {
      body = -1;
    }
    String target = rewrite(parts[1]);
    byte[] rewritten = null;
    if (target != null) {
      StringBuilder h = new StringBuilder(parts[0]).append(' ').append(target).append(' ').append(parts[2]).append("\r\n");
      byte[] head = h.toString().getBytes(StandardCharsets.ISO_8859_1);
      int rest = rl[1];
      while (b[rest] != '\n') rest++;
      rest++;
      rewritten = new byte[head.length + end - rest];
      System.arraycopy(head, 0, rewritten, 0, head.length);
      System.arraycopy(b, rest, rewritten, head.length, end - rest);
    }
    return new RequestHead(end, body, rewritten, null, null);
  }

  private static boolean hasControl(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < 0x20 || c == 0x7f) return true;
    }
    return false;
  }

  private static int hex(char c) { return Character.digit(c, 16); }

  /**
   * The target to send instead of t, or null to send t as received: only when t's path,
   * percent-decoded once, has a ".." segment above the root and t has one spelling.
   */
  static String rewrite(String t) {
    int authority = 0;
    String lower = t.toLowerCase(Locale.ROOT);
    if (lower.startsWith("http://") || lower.startsWith("https://")) {
      authority = t.indexOf('/', t.indexOf("//") + 2);
      if (authority < 0) return null;
    } else if (!t.startsWith("/")) {
      return null;
    }
    int q = t.indexOf('?', authority);
    String path = q >= 0 ? t.substring(authority, q) : t.substring(authority);
    StringBuilder d = new StringBuilder(path.length());
    for (int i = 0; i < path.length(); i++) {
      char c = path.charAt(i);
      if (c == '%' && i + 2 < path.length() && hex(path.charAt(i + 1)) >= 0 && hex(path.charAt(i + 2)) >= 0) {
        d.append((char) (hex(path.charAt(i + 1)) * 16 + hex(path.charAt(i + 2))));
        i += 2;
      } else {
        d.append(c);
      }
    }
    int depth = 0;
    boolean above = false;
    for (String seg : d.substring(1).split("/", -1)) {
      if (seg.equals("..")) {
        if (depth == 0) {
          above = true;
          break;
        }
        depth--;
      } else if (!seg.isEmpty() && !seg.equals(".")) {
        depth++;
      }
    }
    if (!above) return null;
    String norm;
    try {
      norm = IdempotencyKey.normalizeTarget(t).path();
    } catch (IdempotencyKey.TargetMalformed e) {
      return null; // the server refuses it as target-malformed
    }
    StringBuilder out = new StringBuilder(t.substring(0, authority));
    for (byte x : norm.getBytes(StandardCharsets.UTF_8)) {
      int c = x & 0xff;
      if (c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || "-._~!$&'()*+,=:@/".indexOf(c) >= 0) {
        out.append((char) c);
      } else {
        out.append('%').append(String.format("%02X", c));
      }
    }
    if (q >= 0) out.append(t.substring(q));
    return out.toString();
  }
}
