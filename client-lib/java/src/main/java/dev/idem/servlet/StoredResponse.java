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
import java.util.Set;

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

  /** Headers a keep list can never name: the filter frames a replay itself. */
  static final Set<String> NEVER_KEPT = Set.of("content-length", "transfer-encoding", "connection");

  /**
   * The stored answer; IllegalArgumentException naming what is wrong when the bytes are not one
   * (http-middleware.json's stored_answer_rule: a JSON object, status an integer, headers
   * [name, value] string pairs, body_b64 base64 text, body_omitted a boolean).
   */
  static StoredResponse decode(byte[] data) {
    JsonElement root;
    try {
      String text = StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(data)).toString();
      root = JsonParser.parseString(text);
    } catch (RuntimeException | java.nio.charset.CharacterCodingException e) {
      throw new IllegalArgumentException("the stored answer is not JSON");
    }
    if (!root.isJsonObject()) throw new IllegalArgumentException("the stored answer is not a JSON object");
    JsonObject doc = root.getAsJsonObject();
    JsonElement st = doc.get("status");
    if (st == null || !st.isJsonPrimitive() || !st.getAsJsonPrimitive().isNumber()
        || !st.getAsString().matches("-?[0-9]+") || st.getAsString().length() > 9) {
      throw new IllegalArgumentException("the stored status " + st + " is not an integer");
    }
    List<String[]> hs = new ArrayList<>();
    JsonElement h = doc.get("headers");
    if (h != null) {
      if (!h.isJsonArray()) throw new IllegalArgumentException("the stored headers are not a list");
      for (JsonElement e : h.getAsJsonArray()) {
        if (!e.isJsonArray() || e.getAsJsonArray().size() != 2 || !isString(e.getAsJsonArray().get(0))
            || !isString(e.getAsJsonArray().get(1))) {
          throw new IllegalArgumentException("the stored headers are not [name, value] text pairs");
        }
        hs.add(new String[] {e.getAsJsonArray().get(0).getAsString(), e.getAsJsonArray().get(1).getAsString()});
      }
    }
    JsonElement b64 = doc.get("body_b64");
    if (b64 != null && !isString(b64)) throw new IllegalArgumentException("the stored body_b64 is not text");
    byte[] body;
    try {
      body = Base64.getDecoder().decode(b64 == null ? "" : b64.getAsString());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("the stored body_b64 is not base64");
    }
    JsonElement om = doc.get("body_omitted");
    if (om != null && !(om.isJsonPrimitive() && om.getAsJsonPrimitive().isBoolean())) {
      throw new IllegalArgumentException("the stored body_omitted is not a boolean");
    }
    return new StoredResponse(st.getAsInt(), hs, body, om != null && om.getAsBoolean());
  }

  private static boolean isString(JsonElement e) { return e.isJsonPrimitive() && e.getAsJsonPrimitive().isString(); }

  /**
   * What a replay may send, from the step result's body and code (an empty body, dropped past
   * the policy's retention: the code, no headers, body omitted), checked: status 200-599, only
   * kept headers (never NEVER_KEPT), values free of control characters but HTAB.
   * IllegalArgumentException naming what is wrong otherwise: nothing of it may be sent.
   */
  static StoredResponse replayable(byte[] data, int code, Set<String> keep) {
    StoredResponse s = data.length == 0 ? new StoredResponse(code, List.of(), new byte[0], true) : decode(data);
    if (s.status() < 200 || s.status() > 599) {
      throw new IllegalArgumentException("the stored status " + s.status() + " is outside 200-599");
    }
    for (String[] h : s.headers()) {
      String lower = h[0].toLowerCase(java.util.Locale.ROOT);
      if (NEVER_KEPT.contains(lower) || !keep.contains(lower)) {
        throw new IllegalArgumentException("the stored header \"" + h[0] + "\" is not one the filter keeps");
      }
      for (int i = 0; i < h[1].length(); i++) {
        char c = h[1].charAt(i);
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
          throw new IllegalArgumentException("the stored value of header \"" + h[0] + "\" has a control character");
        }
        if (c > 0xff) throw new IllegalArgumentException("the stored value of header \"" + h[0] + "\" is not ISO-8859-1");
      }
    }
    return s;
  }
}
