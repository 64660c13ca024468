package dev.idem.servlet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.idem.support.Coordinator;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The filter's Idempotency-Key parser, global id, default scope, operation and fingerprint
 * against client-lib/conformance/idempotency-key.json, the table every middleware reads.
 */
class KeyTableTest {
  static JsonObject table() throws Exception {
    Path f = Path.of(Coordinator.need("IDEM_SOURCE_DIR"), "client-lib/conformance/idempotency-key.json");
    return JsonParser.parseString(Files.readString(f)).getAsJsonObject();
  }

  static String str(JsonObject o, String k) {
    return o.has(k) && !o.get(k).isJsonNull() ? o.get(k).getAsString() : null;
  }

  @TestFactory
  List<DynamicTest> vectors() throws Exception {
    JsonObject t = table();
    List<DynamicTest> out = new ArrayList<>();
    int i = 0;
    for (JsonElement e : t.getAsJsonArray("header")) {
      JsonObject c = e.getAsJsonObject();
      String header = str(c, "header"), key = str(c, "key"), error = str(c, "error");
      out.add(DynamicTest.dynamicTest("header " + (++i) + " " + str(c, "about"), () -> {
        if (error != null) {
          var m = assertThrows(IdempotencyKey.Malformed.class, () -> IdempotencyKey.parse(header), header);
          assertEquals(error, m.word(), header);
        } else {
          assertEquals(key, IdempotencyKey.parse(header));
        }
      }));
    }
    for (JsonElement e : t.getAsJsonArray("global_id")) {
      JsonObject c = e.getAsJsonObject();
      out.add(DynamicTest.dynamicTest("global id of " + str(c, "scope") + "/" + str(c, "key"), () ->
          assertEquals(str(c, "global_id"), IdempotencyKey.globalId(str(c, "key"), str(c, "scope")))));
    }
    for (JsonElement e : t.getAsJsonArray("scope_default")) {
      JsonObject c = e.getAsJsonObject();
      out.add(DynamicTest.dynamicTest("default scope of " + str(c, "authorization"), () ->
          assertEquals(str(c, "scope"), IdempotencyKey.authorizationScope(str(c, "authorization")))));
    }
    for (JsonElement e : t.getAsJsonArray("operation")) {
      JsonObject c = e.getAsJsonObject();
      out.add(DynamicTest.dynamicTest("operation of " + str(c, "method") + " " + str(c, "path"), () ->
          // the table's path is a request target: normalized first (its query is not part of it)
          assertEquals(str(c, "operation"), IdempotencyKey.operation(str(c, "method"),
              IdempotencyKey.normalizeTarget(str(c, "path")).path()))));
    }
    for (JsonElement e : t.getAsJsonArray("fingerprint")) {
      JsonObject c = e.getAsJsonObject();
      out.add(DynamicTest.dynamicTest("fingerprint of " + str(c, "target") + " " + str(c, "body"), () ->
          assertEquals(str(c, "sha256"), HexFormat.of().formatHex(IdempotencyKey.fingerprint(str(c, "method"),
              str(c, "target"), str(c, "body").getBytes(StandardCharsets.UTF_8))))));
    }
    // the behaviour file's key-to-step vectors (the Authorization header's default scope)
    Path f = Path.of(Coordinator.need("IDEM_SOURCE_DIR"), "client-lib/conformance/http-middleware.json");
    JsonObject hm = JsonParser.parseString(Files.readString(f)).getAsJsonObject();
    for (JsonElement e : hm.getAsJsonObject("key_to_step").getAsJsonArray("vectors")) {
      JsonObject c = e.getAsJsonObject();
      out.add(DynamicTest.dynamicTest("key to step " + str(c, "authorization") + " " + str(c, "key"), () ->
          assertEquals(str(c, "global_id"), IdempotencyKey.globalId(str(c, "key"),
              IdempotencyKey.authorizationScope(str(c, "authorization"))))));
    }
    return out;
  }
}
