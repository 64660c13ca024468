package dev.idem.servlet;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HexFormat;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header) as the filter reads it,
 * and the step key and fingerprint it derives; the rules and their vectors are
 * client-lib/conformance/idempotency-key.json (docs/api.md §19).
 *
 * <p>A value starting with {@code "} is an RFC 8941 String (escapes \" and \\ only, nothing
 * after the closing quote); any other value is the key verbatim. "abc" and abc name one key.
 */
public final class IdempotencyKey {
  public static final int MAX_KEY = 255;

  /** The rule each error word names, for a problem document's detail. */
  static final Map<String, String> RULES = Map.of(
      "missing", "the Idempotency-Key header is missing",
      "empty", "the idempotency key is empty",
      "too-long", "the idempotency key is longer than " + MAX_KEY + " characters",
      "non-printable", "the idempotency key has a character outside printable ASCII",
      "comma", "a bare idempotency key has a comma (a list)",
      "trailing", "something follows the idempotency key's closing quote (a list or parameters)",
      "unterminated", "the idempotency key's String has no closing quote",
      "bad-escape", "the idempotency key's String has an escape other than \\\" and \\\\");

  private IdempotencyKey() {}

  /** A missing or malformed key; {@link #word()} is the rule that failed (missing, empty, …). */
  public static final class Malformed extends Exception {
    private static final long serialVersionUID = 1L;
    private final String word;

    Malformed(String word) {
      super(RULES.get(word));
      this.word = word;
    }

    public String word() { return word; }
  }

  private static boolean printable(char c) { return c >= ' ' && c <= '~'; }

  /** The key the header value names (null = no header). */
  public static String parse(String value) throws Malformed {
    if (value == null) throw new Malformed("missing");
    if (value.isEmpty()) throw new Malformed("empty");
    String key;
    if (value.charAt(0) == '"') {
      StringBuilder out = new StringBuilder();
      int i = 1;
      while (true) {
        if (i >= value.length()) throw new Malformed("unterminated");
        char c = value.charAt(i);
        if (c == '\\') {
          if (i + 1 >= value.length()) throw new Malformed("unterminated");
          char n = value.charAt(i + 1);
          if (n != '"' && n != '\\') throw new Malformed("bad-escape");
          out.append(n);
          i += 2;
        } else if (c == '"') {
          if (i + 1 != value.length()) throw new Malformed("trailing");
          break;
        } else if (!printable(c)) {
          throw new Malformed("non-printable");
        } else {
          out.append(c);
          i++;
        }
      }
      key = out.toString();
    } else {
      for (int i = 0; i < value.length(); i++) {
        if (!printable(value.charAt(i))) throw new Malformed("non-printable");
      }
      if (value.indexOf(',') >= 0) throw new Malformed("comma");
      key = value;
    }
    if (key.isEmpty()) throw new Malformed("empty");
    if (key.length() > MAX_KEY) throw new Malformed("too-long");
    return key;
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing from this JDK", e);
    }
  }

  /** "k-" + the lower-case hex SHA-256 of scope, one 0x1F byte and the key, for every key. */
  public static String globalId(String key, String scope) {
    MessageDigest h = sha256();
    h.update(scope.getBytes(StandardCharsets.UTF_8));
    h.update((byte) 0x1f);
    h.update(key.getBytes(StandardCharsets.UTF_8));
    return "k-" + HexFormat.of().formatHex(h.digest());
  }

  /** The default scope: the lower-case hex SHA-256 of the Authorization header, "" without one. */
  public static String authorizationScope(String authorization) {
    if (authorization == null) return "";
    return HexFormat.of().formatHex(sha256().digest(authorization.getBytes(StandardCharsets.ISO_8859_1)));
  }

  /** A request target with no one spelling (docs/api.md §19 rule 5). */
  public static final class TargetMalformed extends Exception {
    private static final long serialVersionUID = 1L;

    TargetMalformed(String detail) { super(detail); }
  }

  /** A request target's one spelling: its normalized path and the fingerprint's target bytes. */
  public record Target(String path, byte[] fingerprintTarget) {}

  private static final Pattern ABSOLUTE = Pattern.compile("(?i)^https?://[^/?#]*");

  private static int hex(byte b) {
    if (b >= '0' && b <= '9') return b - '0';
    if (b >= 'a' && b <= 'f') return b - 'a' + 10;
    if (b >= 'A' && b <= 'F') return b - 'A' + 10;
    return -1;
  }

  /**
   * The route's one spelling of a request target as received (its bytes as ISO-8859-1 text):
   * the path up to the first ? (an absolute-form target: its path), percent-decoded once, dot
   * segments removed (RFC 3986 §5.2.4), runs of / as one, a trailing / dropped; the
   * fingerprint's target is that path (UTF-8) plus, when the target had a ?, ? and the query as
   * received. TargetMalformed names a bad escape, a control byte, non-UTF-8 or a target not
   * starting with /.
   */
  public static Target normalizeTarget(String target) throws TargetMalformed {
    Matcher m = ABSOLUTE.matcher(target);
    if (m.find()) {
      target = target.substring(m.end());
      if (!target.startsWith("/")) target = "/" + target;
    }
    if (!target.startsWith("/")) {
      throw new TargetMalformed("the request target \"" + target.substring(0, Math.min(64, target.length()))
          + "\" does not start with /");
    }
    int q = target.indexOf('?');
    String rawPath = q >= 0 ? target.substring(0, q) : target;
    byte[] raw = rawPath.getBytes(StandardCharsets.ISO_8859_1);
    ByteArrayOutputStream out = new ByteArrayOutputStream(raw.length);
    for (int i = 0; i < raw.length; ) {
      int b = raw[i] & 0xff;
      if (b == '%') {
        int hi = i + 2 < raw.length ? hex(raw[i + 1]) : -1;
        int lo = i + 2 < raw.length ? hex(raw[i + 2]) : -1;
        if (hi < 0 || lo < 0) throw new TargetMalformed("a % not followed by two hex digits at byte " + i);
        b = hi * 16 + lo;
        i += 3;
      } else {
        i++;
      }
      if (b < 0x20 || b == 0x7f) throw new TargetMalformed(String.format("a control byte 0x%02x in the path", b));
      out.write(b);
    }
    String decoded;
    try {
      decoded = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(out.toByteArray())).toString();
    } catch (CharacterCodingException e) {
      throw new TargetMalformed("the decoded path is not UTF-8");
    }
    String[] segs = decoded.substring(1).split("/", -1);
    Deque<String> kept = new ArrayDeque<>();
    for (String seg : segs) {
      if (seg.equals("..")) {
        if (!kept.isEmpty()) kept.removeLast();
      } else if (!seg.equals(".")) {
        kept.addLast(seg);
      }
    }
    String last = segs[segs.length - 1];
    String path = "/" + String.join("/", kept) + ((last.equals(".") || last.equals("..")) && !kept.isEmpty() ? "/" : "");
    path = path.replaceAll("/{2,}", "/");
    if (path.length() > 1 && path.endsWith("/")) path = path.substring(0, path.length() - 1);
    byte[] p = path.getBytes(StandardCharsets.UTF_8);
    if (q < 0) return new Target(path, p);
    byte[] query = target.substring(q + 1).getBytes(StandardCharsets.ISO_8859_1);
    byte[] fp = new byte[p.length + 1 + query.length];
    System.arraycopy(p, 0, fp, 0, p.length);
    fp[p.length] = '?';
    System.arraycopy(query, 0, fp, p.length + 1, query.length);
    return new Target(path, fp);
  }

  /**
   * lower-case(method + " " + path), every UTF-8 byte outside [a-z0-9._-] as one "-", at most 64;
   * path: {@link #normalizeTarget}'s (decoded: a "?" in it is part of the path).
   */
  public static String operation(String method, String path) {
    byte[] b = (method + " " + path).getBytes(StandardCharsets.UTF_8);
    StringBuilder out = new StringBuilder(Math.min(64, b.length));
    for (int i = 0; i < b.length && out.length() < 64; i++) {
      int c = b[i] & 0xff;
      if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
      out.append((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ? (char) c : '-');
    }
    return out.toString();
  }

  /** SHA-256 of method + "\n" + target (its ISO-8859-1 bytes) + "\n" + body. */
  public static byte[] fingerprint(String method, String target, byte[] body) {
    return fingerprint(method, target.getBytes(StandardCharsets.ISO_8859_1), body);
  }

  /** SHA-256 of method + "\n" + target + "\n" + body; target: {@link Target#fingerprintTarget()}. */
  public static byte[] fingerprint(String method, byte[] target, byte[] body) {
    MessageDigest h = sha256();
    h.update((method + "\n").getBytes(StandardCharsets.ISO_8859_1));
    h.update(target);
    h.update((byte) '\n');
    h.update(body);
    return h.digest();
  }
}
