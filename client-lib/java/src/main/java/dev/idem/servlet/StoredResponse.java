package dev.idem.servlet;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

/**
 * The stored form of an answer, the step result's body, the same UTF-8 JSON as the Go, Node and
 * Python middlewares store: {"status": 201, "headers": [["Content-Type", "…"]], "body_b64": "…"}
 * plus "body_omitted": true when the body was not kept (it streamed past the limit, or the
 * document would not fit the coordinator's result body).
 */
record StoredResponse(int status, List<String[]> headers, byte[] body, boolean omitted) {
  private static final Gson GSON = new GsonBuilder().disableHtmlEscaping().create();

  /** The stored document; body null = it streamed (omitted). */
  static byte[] encode(int status, List<String[]> kept, byte[] body, int bodyLimit, int maxDoc) {
    JsonObject doc = new JsonObject();
    doc.addProperty("status", status);
    JsonArray hs = new JsonArray();
    for (String[] h : kept) {
      JsonArray p = new JsonArray();
      p.add(h[0]);
      p.add(h[1]);
      hs.add(p);
    }
    doc.add("headers", hs);
    doc.addProperty("body_b64", "");
    if (body != null && body.length <= bodyLimit) {
      doc.addProperty("body_b64", Base64.getEncoder().encodeToString(body));
      byte[] out = GSON.toJson(doc).getBytes(StandardCharsets.UTF_8);
      if (out.length <= maxDoc) return out;
      doc.addProperty("body_b64", "");
    }
    doc.addProperty("body_omitted", true);
    byte[] out = GSON.toJson(doc).getBytes(StandardCharsets.UTF_8);
    if (out.length > maxDoc) {
      doc.add("headers", new JsonArray());
      out = GSON.toJson(doc).getBytes(StandardCharsets.UTF_8);
    }
    return out;
  }

  /** The stored answer; IllegalArgumentException when the bytes are not one. */
  static StoredResponse decode(byte[] data) {
    try {
      JsonObject doc = JsonParser.parseString(new String(data, StandardCharsets.UTF_8)).getAsJsonObject();
      List<String[]> hs = new ArrayList<>();
      if (doc.has("headers")) {
        for (JsonElement e : doc.getAsJsonArray("headers")) {
          JsonArray p = e.getAsJsonArray();
          hs.add(new String[] {p.get(0).getAsString(), p.get(1).getAsString()});
        }
      }
      byte[] body = Base64.getDecoder().decode(doc.has("body_b64") ? doc.get("body_b64").getAsString() : "");
      boolean omitted = doc.has("body_omitted") && doc.get("body_omitted").getAsBoolean();
      return new StoredResponse(doc.get("status").getAsInt(), hs, body, omitted);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("not a stored answer: " + e.getMessage(), e);
    }
  }
}
