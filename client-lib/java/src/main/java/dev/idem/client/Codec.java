package dev.idem.client;

import java.nio.charset.StandardCharsets;

/**
 * How a typed step's value is stored as the step's result body and read back on a replay.
 * {@link #STRING} (UTF-8) and {@link #BYTES} are built in; a JSON codec is a few lines with
 * any JSON library (docs/sdk-java.md).
 */
public interface Codec<T> {
  byte[] encode(T value) throws Exception;

  T decode(byte[] body) throws Exception;

  Codec<String> STRING = new Codec<>() {
    @Override
    public byte[] encode(String v) { return v == null ? new byte[0] : v.getBytes(StandardCharsets.UTF_8); }

    @Override
    public String decode(byte[] b) { return new String(b, StandardCharsets.UTF_8); }
  };

  Codec<byte[]> BYTES = new Codec<>() {
    @Override
    public byte[] encode(byte[] v) { return v == null ? new byte[0] : v.clone(); }

    @Override
    public byte[] decode(byte[] b) { return b.clone(); }
  };
}
