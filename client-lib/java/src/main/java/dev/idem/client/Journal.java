package dev.idem.client;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HexFormat;
import java.util.Set;

/**
 * The unguarded-execution journal, in libidem's line format (idem.h), so that
 * {@code idemctl reconcile} replays it into the coordinator:
 *
 * <pre>idem1 TIME_MS SOURCE TENANT GLOBAL_ID SERVICE OPERATION PHASE OUTCOME CODE FP BODY</pre>
 *
 * one space apart; SOURCE "client" (no coordinator could decide) or "server"
 * (PROCEED_UNGUARDED); FP lower-case hex; text fields percent-encoded (every byte outside
 * [A-Za-z0-9._:/-] as %XX, and a lone "-" too); an empty field is "-". Each line is appended
 * with O_APPEND and forced to disk.
 */
final class Journal {
  private static final Object MU = new Object();

  private Journal() {}

  static String encode(byte[] v) {
    if (v == null || v.length == 0) return "-";
    if (v.length == 1 && v[0] == '-') return "%2D";
    StringBuilder sb = new StringBuilder(v.length);
    for (byte b : v) {
      int c = b & 0xff;
      boolean plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
          || c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
      if (plain) sb.append((char) c);
      else sb.append('%').append(String.format("%02X", c));
    }
    return sb.toString();
  }

  static String encode(String s) { return encode(s.getBytes(StandardCharsets.UTF_8)); }

  static String line(String source, String tenant, StepKey key, byte[] fp, StepResult r) {
    return String.join(" ", "idem1", Long.toString(System.currentTimeMillis()), source, encode(tenant),
        encode(key.globalId()), encode(key.service()), encode(key.operation()), key.phase().word(),
        r.outcome().word(), Integer.toString(r.code()),
        fp == null || fp.length == 0 ? "-" : HexFormat.of().formatHex(fp), encode(r.body())) + "\n";
  }

  static void append(Path path, String line) throws IOException {
    byte[] data = line.getBytes(StandardCharsets.UTF_8);
    synchronized (MU) {
      try (FileChannel ch = FileChannel.open(path, Set.of(StandardOpenOption.CREATE, StandardOpenOption.WRITE,
          StandardOpenOption.APPEND), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
        ByteBuffer buf = ByteBuffer.wrap(data);
        while (buf.hasRemaining()) ch.write(buf);
        ch.force(true);
      }
    }
  }
}
