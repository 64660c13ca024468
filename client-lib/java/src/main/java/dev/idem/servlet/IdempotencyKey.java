package dev.idem.servlet;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Locale;
import java.util.Map;

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

  /** lower-case(method + " " + path without its query), every character outside [a-z0-9._-] as "-", at most 64. */
  public static String operation(String method, String path) {
    int q = path.indexOf('?');
    if (q >= 0) path = path.substring(0, q);
    String s = (method + " " + path).toLowerCase(Locale.ROOT);
    StringBuilder out = new StringBuilder(s.length());
    for (int i = 0; i < s.length() && out.length() < 64; i++) {
      char c = s.charAt(i);
      out.append((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ? c : '-');
    }
    return out.toString();
  }

  /** SHA-256 of method + "\n" + target (path and query as received) + "\n" + body. */
  public static byte[] fingerprint(String method, String target, byte[] body) {
    MessageDigest h = sha256();
    h.update((method + "\n" + target + "\n").getBytes(StandardCharsets.ISO_8859_1));
    h.update(body);
    return h.digest();
  }
}
