package dev.idem.support;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * A single-node coordinator of the test's own on a free loopback port (IDEM_COORDINATOR_BIN on
 * IDEM_TEST_PG_URL, which ctest's own-db wrapper points at a fresh database), started and stopped
 * by its PID; and the helpers the Java tests share (free ports, polling with a deadline).
 */
public final class Coordinator implements AutoCloseable {
  public final int port;
  public final String address;
  private final Path log;
  private Process proc;

  public Coordinator(String... extra) throws IOException {
    String bin = need("IDEM_COORDINATOR_BIN");
    String pg = need("IDEM_TEST_PG_URL");
    this.port = freePort();
    this.address = "127.0.0.1:" + port;
    this.log = Files.createTempFile("idem-java-coord.", ".log");
    List<String> cmd = new ArrayList<>(List.of(bin, "--listen", address, "--pg", pg, "--reaper-interval", "0"));
    cmd.addAll(List.of(extra));
    this.proc = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    try {
      waitUntil(() -> !proc.isAlive() || (portOpen(port) && logged("listening")), 20_000,
          "the coordinator to listen");
      if (!proc.isAlive()) throw new IllegalStateException("coordinator exited " + proc.exitValue() + ":\n" + tail());
    } catch (RuntimeException | Error e) {
      close();
      throw e;
    }
  }

  private boolean logged(String what) {
    try {
      return Files.readString(log).contains(what);
    } catch (IOException e) {
      return false;
    }
  }

  public String tail() {
    try {
      String s = Files.readString(log);
      return s.substring(Math.max(0, s.length() - 3000));
    } catch (IOException e) {
      return "";
    }
  }

  /** SIGTERM by PID and wait; returns once the port refuses connections. */
  public void stop() {
    if (proc != null && proc.isAlive()) {
      proc.destroy();
      try {
        if (!proc.waitFor(15, TimeUnit.SECONDS)) {
          proc.destroyForcibly();
          proc.waitFor();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    waitUntil(() -> !portOpen(port), 5000, "the coordinator's port to close");
  }

  @Override
  public void close() {
    stop();
    try {
      Files.deleteIfExists(log);
    } catch (IOException e) {
      // a temporary file
    }
  }

  public static String need(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) throw new IllegalStateException(name + " must be set (ctest sets it)");
    return v;
  }

  public static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket()) {
      s.bind(new InetSocketAddress("127.0.0.1", 0));
      return s.getLocalPort();
    }
  }

  public static boolean portOpen(int port) {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), 200);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  /** Polls cond until true; AssertionError naming what at the deadline. */
  public static void waitUntil(BooleanSupplier cond, long timeoutMs, String what) {
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    while (System.nanoTime() - end < 0) {
      if (cond.getAsBoolean()) return;
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted waiting for " + what);
      }
    }
    throw new AssertionError("timed out after " + timeoutMs + " ms waiting for " + what);
  }

  public static String unique(String prefix) {
    return prefix + "-" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  }
}
