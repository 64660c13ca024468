package dev.idem.saga.payment;

import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

/**
 * The service's connections to Postgres (Debian's PostgreSQL JDBC driver): a small pool of at
 * most --threads connections, each in the service's schema (currentSchema), set up once with the
 * schema, the tables and idem_barrier (serialized between processes as payment.c does).
 */
final class Db {
  static final String SCHEMA_SQL = """
      CREATE TABLE IF NOT EXISTS ledger (
       id bigserial PRIMARY KEY, global_id text NOT NULL, customer text NOT NULL,
       kind text NOT NULL CHECK (kind IN ('charge', 'refund')), amount_cents bigint NOT NULL,
       fence bigint NOT NULL, at timestamptz NOT NULL DEFAULT now());
      CREATE INDEX IF NOT EXISTS ledger_global_id ON ledger (global_id);
      CREATE TABLE IF NOT EXISTS accounts (
       customer text PRIMARY KEY, charged_cents bigint NOT NULL DEFAULT 0)""";

  private final String url;
  private final Properties props = new Properties();
  private final BlockingQueue<Connection> idle;

  Db(Opts o) throws SQLException {
    this.idle = new ArrayBlockingQueue<>(o.threads);
    StringBuilder u = new StringBuilder("jdbc:postgresql://");
    String pg = o.pg;
    if (pg.startsWith("postgres://") || pg.startsWith("postgresql://")) {
      URI uri = URI.create(pg.replaceFirst("^postgres(ql)?://", "http://"));
      String host = uri.getHost() == null ? "localhost" : uri.getHost();
      u.append(host).append(uri.getPort() > 0 ? ":" + uri.getPort() : "").append(uri.getRawPath() == null || uri.getRawPath().isEmpty() ? "/" : uri.getRawPath());
      if (uri.getRawUserInfo() != null) {
        String[] ui = uri.getRawUserInfo().split(":", 2);
        props.setProperty("user", dec(ui[0]));
        if (ui.length > 1) props.setProperty("password", dec(ui[1]));
      }
      if (uri.getRawQuery() != null) {
        for (String kv : uri.getRawQuery().split("&")) {
          String[] p = kv.split("=", 2);
          if (p.length == 2 && !p[0].equals("sslmode")) props.setProperty(dec(p[0]), dec(p[1]));
          if (p.length == 2 && p[0].equals("sslmode")) props.setProperty("sslmode", p[1].equals("prefer") ? "prefer" : p[1]);
        }
      }
    } else { // a conninfo string: key=value pairs
      String host = "localhost", port = "5432", dbname = "";
      for (String kv : pg.trim().split("\\s+")) {
        String[] p = kv.split("=", 2);
        if (p.length != 2) continue;
        switch (p[0]) {
          case "host" -> host = p[1];
          case "port" -> port = p[1];
          case "dbname" -> dbname = p[1];
          case "user" -> props.setProperty("user", p[1]);
          case "password" -> props.setProperty("password", p[1]);
          default -> { }
        }
      }
      u.append(host).append(':').append(port).append('/').append(dbname);
    }
    if (!props.containsKey("sslmode")) props.setProperty("sslmode", "prefer");
    this.url = u.toString();
    try (Connection c = DriverManager.getConnection(url, props); Statement s = c.createStatement()) {
      c.setAutoCommit(false);
      s.execute("SELECT pg_advisory_xact_lock(7342190002)");
      s.execute("CREATE SCHEMA IF NOT EXISTS " + o.schema);
      c.commit();
      c.setAutoCommit(true);
      s.execute("SELECT pg_advisory_lock(7342190003)");
      try {
        s.execute("SET search_path = " + o.schema);
        s.execute("SET client_min_messages = warning");
        s.execute(SCHEMA_SQL);
        Barrier.init(c);
      } finally {
        s.execute("SELECT pg_advisory_unlock(7342190003)");
      }
    }
    props.setProperty("currentSchema", o.schema);
    props.setProperty("options", "-c client_min_messages=warning");
  }

  private static String dec(String s) { return URLDecoder.decode(s, StandardCharsets.UTF_8); }

  /** A connection in the service's schema, autocommit on. */
  Connection take() throws SQLException {
    Connection c = idle.poll();
    if (c != null) {
      try {
        if (c.isValid(5)) return c;
      } catch (SQLException e) {
        // replaced below
      }
      closeQuietly(c);
    }
    return DriverManager.getConnection(url, props);
  }

  /** Back to the pool (a broken one is closed). */
  void give(Connection c, boolean broken) {
    if (c == null) return;
    try {
      if (broken || c.isClosed()) {
        closeQuietly(c);
        return;
      }
      if (!c.getAutoCommit()) {
        c.rollback();
        c.setAutoCommit(true);
      }
    } catch (SQLException e) {
      closeQuietly(c);
      return;
    }
    if (!idle.offer(c)) closeQuietly(c);
  }

  static void closeQuietly(Connection c) {
    try {
      c.close();
    } catch (SQLException e) {
      // gone already
    }
  }

  void close() {
    Connection c;
    while ((c = idle.poll()) != null) closeQuietly(c);
  }
}
