package dev.idem.servlet;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.UUID;
import java.util.logging.Logger;

/**
 * The RFC 9457 problem documents the filter answers itself (400, 409, 413, 422, 500, 503), as
 * client-lib/conformance/http-middleware.json's "problems" say: type (problemBase + "#" + word),
 * title, status, detail, instance (urn:uuid:, also in the log line), retryable, and
 * idempotency_key when the request had a well-formed key; Retry-After only when retryable and
 * the coordinator gave a hint. The example server's own problems (404, 405, 400, 431) too.
 */
public final class Problems {
  record Kind(int status, String title, boolean retryable) {}

  /** The middleware's problems (http-middleware.json's "problems"). */
  static final Map<String, Kind> KINDS = Map.ofEntries(
      Map.entry("body-incomplete", new Kind(400, "Request body incomplete", false)),
      Map.entry("body-malformed", new Kind(400, "Request body framing malformed", false)),
      Map.entry("key-malformed", new Kind(400, "Idempotency-Key malformed", false)),
      Map.entry("key-missing", new Kind(400, "Idempotency-Key missing", false)),
      Map.entry("target-malformed", new Kind(400, "Request target malformed", false)),
      Map.entry("in-progress", new Kind(409, "Request in progress", true)),
      Map.entry("body-too-large", new Kind(413, "Request body too large", false)),
      Map.entry("compensated", new Kind(422, "Request compensated", false)),
      Map.entry("fingerprint-mismatch", new Kind(422, "Idempotency-Key reused", false)),
      Map.entry("coordinator-refused", new Kind(500, "Idempotency coordinator refused the middleware", false)),
      Map.entry("middleware-error", new Kind(500, "Idempotency middleware error", false)),
      Map.entry("stored-answer-invalid", new Kind(500, "Stored answer invalid", false)),
      Map.entry("coordinator-unavailable", new Kind(503, "Idempotency coordinator unavailable", true)));

  /** What a server around the filter answers itself (http-middleware.json's example_server problems). */
  static final Map<String, Kind> SERVER_KINDS = Map.of(
      "request-malformed", new Kind(400, "Request malformed", false),
      "not-found", new Kind(404, "Not found", false),
      "method-not-allowed", new Kind(405, "Method not allowed", false),
      "header-too-large", new Kind(431, "Request header fields too large", false));

  static Kind kind(String word) {
    Kind k = KINDS.get(word);
    return k != null ? k : SERVER_KINDS.get(word);
  }

  /** The problem document's JSON (UTF-8) of one of KINDS' or SERVER_KINDS' words, with its instance. */
  static JsonObject document(String base, String word, String detail, String key) {
    Kind k = kind(word);
    JsonObject doc = new JsonObject();
    doc.addProperty("type", base + "#" + word);
    doc.addProperty("title", k.title());
    doc.addProperty("status", k.status());
    doc.addProperty("detail", detail);
    doc.addProperty("instance", "urn:uuid:" + UUID.randomUUID());
    doc.addProperty("retryable", k.retryable());
    if (key != null) doc.addProperty("idempotency_key", key);
    return doc;
  }

  static byte[] bytes(JsonObject doc) { return GSON.toJson(doc).getBytes(StandardCharsets.UTF_8); }

  /** The status of a problem type word (http-middleware.json's problems and example_server problems). */
  public static int status(String word) {
    Kind k = kind(word);
    if (k == null) throw new IllegalArgumentException("problem: no type word " + word);
    return k.status();
  }

  /** A problem document (UTF-8 JSON) a server around the filter answers itself, without idempotency_key. */
  public static byte[] document(String word, String detail) {
    status(word);
    return bytes(document("docs/http-middleware.md", word, detail, null));
  }

  /**
   * Answers a server's own problem (404 not-found, 405 method-not-allowed with allow, 400
   * request-malformed or target-malformed) and logs one line naming its instance.
   */
  public static void send(HttpServletRequest req, HttpServletResponse resp, String word, String detail, String allow)
      throws IOException {
    status(word);
    send(req, resp, Logger.getLogger(Problems.class.getName()), "docs/http-middleware.md", word, detail, null, 0, allow);
  }

  private static final Gson GSON = new GsonBuilder().disableHtmlEscaping().create();

  private Problems() {}

  /** Whole seconds, rounded up from idem-retry-after-ms, at least 1. */
  static long retryAfterS(long ms) {
    return ms > 0 ? Math.max(1, (ms + 999) / 1000) : 1;
  }

  static void send(HttpServletRequest req, HttpServletResponse resp, Logger log, String base, String word,
                   String detail, String key, long retryAfterMs) throws IOException {
    send(req, resp, log, base, word, detail, key, retryAfterMs, null);
  }

  /**
   * Answers the problem (Retry-After only on a retryable problem whose coordinator answer
   * carried a hint: never made up; allow: the Allow header of a 405, else null) and logs one
   * line naming its instance.
   */
  static void send(HttpServletRequest req, HttpServletResponse resp, Logger log, String base, String word,
                   String detail, String key, long retryAfterMs, String allow) throws IOException {
    Kind k = kind(word);
    JsonObject doc = document(base, word, detail, key);
    log.warning(req.getMethod() + " " + req.getRequestURI() + ": " + k.status() + " " + word + " instance="
        + doc.get("instance").getAsString() + (key != null ? " key=" + GSON.toJson(key) : "") + ": " + detail);
    byte[] body = bytes(doc);
    if (resp.isCommitted()) { // the container gave up on the connection (an aborted upload): no answer
      return;
    }
    resp.reset();
    resp.setStatus(k.status());
    resp.setContentType("application/problem+json");
    resp.setContentLength(body.length);
    if (k.retryable() && retryAfterMs > 0) resp.setHeader("Retry-After", Long.toString(retryAfterS(retryAfterMs)));
    if (allow != null) resp.setHeader("Allow", allow);
    resp.getOutputStream().write(body);
    resp.flushBuffer();
  }
}
