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
 * idempotency_key when the request had a well-formed key; Retry-After exactly when retryable.
 */
final class Problems {
  record Kind(int status, String title, boolean retryable) {}

  static final Map<String, Kind> KINDS = Map.of(
      "key-missing", new Kind(400, "Idempotency-Key missing", false),
      "key-malformed", new Kind(400, "Idempotency-Key malformed", false),
      "body-incomplete", new Kind(400, "Request body incomplete", false),
      "in-progress", new Kind(409, "Request in progress", true),
      "body-too-large", new Kind(413, "Request body too large", false),
      "fingerprint-mismatch", new Kind(422, "Idempotency-Key reused", false),
      "compensated", new Kind(422, "Request compensated", false),
      "coordinator-refused", new Kind(500, "Idempotency coordinator refused the middleware", false),
      "middleware-error", new Kind(500, "Idempotency middleware error", false),
      "coordinator-unavailable", new Kind(503, "Idempotency coordinator unavailable", true));

  private static final Gson GSON = new GsonBuilder().disableHtmlEscaping().create();

  private Problems() {}

  /** Whole seconds, rounded up from idem-retry-after-ms, at least 1. */
  static long retryAfterS(long ms) {
    return ms > 0 ? Math.max(1, (ms + 999) / 1000) : 1;
  }

  static void send(HttpServletRequest req, HttpServletResponse resp, Logger log, String base, String word,
                   String detail, String key, long retryAfterMs) throws IOException {
    Kind k = KINDS.get(word);
    JsonObject doc = new JsonObject();
    doc.addProperty("type", base + "#" + word);
    doc.addProperty("title", k.title());
    doc.addProperty("status", k.status());
    doc.addProperty("detail", detail);
    doc.addProperty("instance", "urn:uuid:" + UUID.randomUUID());
    doc.addProperty("retryable", k.retryable());
    if (key != null) doc.addProperty("idempotency_key", key);
    log.warning(req.getMethod() + " " + req.getRequestURI() + ": " + k.status() + " " + word + " instance="
        + doc.get("instance").getAsString() + (key != null ? " key=" + GSON.toJson(key) : "") + ": " + detail);
    byte[] body = GSON.toJson(doc).getBytes(StandardCharsets.UTF_8);
    if (resp.isCommitted()) { // the container gave up on the connection (an aborted upload): no answer
      return;
    }
    resp.reset();
    resp.setStatus(k.status());
    resp.setContentType("application/problem+json");
    resp.setContentLength(body.length);
    if (k.retryable()) resp.setHeader("Retry-After", Long.toString(retryAfterS(retryAfterMs)));
    resp.getOutputStream().write(body);
    resp.flushBuffer();
  }
}
