package dev.idem.client;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/** The contract's input rules (docs/api.md §1), checked before any call is made. */
final class Validate {
  static final Pattern GLOBAL_ID = Pattern.compile("[A-Za-z0-9._:-]{1,128}");
  static final Pattern NAME = Pattern.compile("[a-z0-9._-]{1,64}");
  static final Pattern POLICY_NAME = Pattern.compile("\\*|[a-z0-9._-]{1,64}");
  static final Pattern HOST_PORT = Pattern.compile("(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9._-]+):([0-9]{1,5})");
  /** docs/api.md §22: version 00 is exactly these four fields; a later version may append "-" fields. */
  static final Pattern TRACEPARENT = Pattern.compile("([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\\x21-\\x7e]*)?");
  static final int TRACEPARENT_MAX = 512;
  static final int FINGERPRINT_MAX = 64;
  static final int BODY_MAX = 64 * 1024;

  private Validate() {}

  static String matching(String v, String field, Pattern p, String rule) {
    if (v == null || v.isEmpty()) throw IdemException.invalid(field, "is empty");
    if (!p.matcher(v).matches()) throw IdemException.invalid(field, rule);
    return v;
  }

  static String globalId(String v, String field) {
    return matching(v, field, GLOBAL_ID, "must be 1-128 characters of [A-Za-z0-9._:-]");
  }

  static String name(String v, String field) {
    return matching(v, field, NAME, "must be 1-64 characters of [a-z0-9._-]");
  }

  static String policyName(String v, String field) {
    return matching(v, field, POLICY_NAME, "must be \"*\" or 1-64 characters of [a-z0-9._-]");
  }

  static byte[] bytes(byte[] v, String field, int limit) {
    if (v == null) return new byte[0];
    if (v.length > limit) {
      throw IdemException.invalid(field, "is " + v.length + " bytes, more than the limit of " + limit);
    }
    return v;
  }

  static String traceparent(String v) {
    if (v == null || v.isEmpty()) return null;
    if (!validTraceparent(v)) {
      throw IdemException.invalid("traceparent", "must be W3C traceparent 00-<32 hex>-<16 hex>-<2 hex>"
          + " (a later version may append fields), at most " + TRACEPARENT_MAX + " bytes");
    }
    return v;
  }

  /** A traceparent of docs/api.md §22: not version ff, no all-zero id, version 00 without more fields, ≤ 512 bytes. */
  static boolean validTraceparent(String v) {
    if (v == null || v.length() > TRACEPARENT_MAX) return false;
    java.util.regex.Matcher m = TRACEPARENT.matcher(v);
    if (!m.matches() || m.group(1).equals("ff") || (m.group(1).equals("00") && m.group(5) != null)) return false;
    return !m.group(2).equals("0".repeat(32)) && !m.group(3).equals("0".repeat(16));
  }

  /** "host:port" a list, or one string "h1:p1,h2:p2"; duplicates dropped. */
  static List<String> addresses(List<String> in) {
    List<String> out = new ArrayList<>();
    for (String s : in) {
      if (s == null) continue;
      for (String a : s.split(",")) {
        a = a.strip();
        if (a.isEmpty()) continue;
        var m = HOST_PORT.matcher(a);
        if (!m.matches() || Integer.parseInt(m.group(2)) < 1 || Integer.parseInt(m.group(2)) > 65535) {
          throw IdemException.invalid("address", "\"" + a + "\" is not host:port");
        }
        if (!out.contains(a)) out.add(a);
      }
    }
    if (out.isEmpty()) throw IdemException.invalid("address", "is empty");
    return out;
  }
}
