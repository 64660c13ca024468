package dev.idem.saga.payment;

import dev.idem.client.Outcome;
import dev.idem.client.StepKey;
import dev.idem.client.StepResult;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;

/**
 * libidem_pg's barrier (client-lib/include/idem/idem_pg.h) in Java on JDBC: the business writes
 * and the step's dedup row commit in ONE local transaction, so an attempt that takes over after a
 * crash between that COMMIT and CompleteStep finds the row and keeps the earlier attempt's result
 * instead of acting twice. Same table (idem_barrier in the connection's schema), same claim, same
 * columns as saga-examples/payment-go/barrier.go: the C services and the cross-check read it.
 */
final class Barrier {
  static final String CREATE = """
      CREATE TABLE IF NOT EXISTS idem_barrier (
       global_id text NOT NULL, service text NOT NULL, operation text NOT NULL,
       phase smallint NOT NULL, fence bigint NOT NULL CHECK (fence >= 1),
       outcome smallint, code integer NOT NULL DEFAULT 0, body bytea,
       applied_at timestamptz NOT NULL DEFAULT now(),
       PRIMARY KEY (global_id, service, operation, phase))""";
  // the claim: a row no attempt has finished, from an older attempt only (fence < attempt)
  static final String CLAIM = """
      INSERT INTO idem_barrier (global_id, service, operation, phase, fence) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (global_id, service, operation, phase) DO UPDATE SET fence = EXCLUDED.fence
       WHERE idem_barrier.fence < EXCLUDED.fence AND idem_barrier.outcome IS NULL
       RETURNING fence""";
  static final String SELECT = """
      SELECT fence, outcome, code, body FROM idem_barrier
       WHERE global_id = ? AND service = ? AND operation = ? AND phase = ?""";
  static final String FINISH = """
      UPDATE idem_barrier SET outcome = ?, code = ?, body = ?, applied_at = now()
       WHERE global_id = ? AND service = ? AND operation = ? AND phase = ? AND fence = ?""";

  private Barrier() {}

  /** The effect, inside the barrier's transaction: SUCCEEDED / FAILED commit with the dedup row. */
  interface Effect {
    StepResult apply(Connection tx, long attempt) throws SQLException;
  }

  record Report(boolean applied, boolean appliedEarlier, boolean rolledBack, long fence, StepResult result) {}

  /** COMMIT itself failed: the effect may have committed (a retry: the barrier tells). */
  static final class CommitFailed extends Exception {
    private static final long serialVersionUID = 1L;

    CommitFailed(SQLException e) { super("barrier commit: " + e.getMessage(), e); }
  }

  static void init(Connection c) throws SQLException {
    boolean auto = c.getAutoCommit();
    c.setAutoCommit(false);
    try (Statement s = c.createStatement()) {
      s.execute("SELECT pg_advisory_xact_lock(7342190001)");
      s.execute(CREATE);
      c.commit();
    } catch (SQLException e) {
      c.rollback();
      throw e;
    } finally {
      c.setAutoCommit(auto);
    }
  }

  static short wire(Outcome o) {
    return switch (o) {
      case SUCCEEDED -> 1;
      case FAILED -> 2;
      case RETRYABLE -> 3;
      case UNKNOWN -> 4;
    };
  }

  static Outcome outcome(int n) {
    return switch (n) {
      case 1 -> Outcome.SUCCEEDED;
      case 2 -> Outcome.FAILED;
      case 3 -> Outcome.RETRYABLE;
      default -> Outcome.UNKNOWN;
    };
  }

  private static void key(PreparedStatement ps, int at, StepKey k) throws SQLException {
    ps.setString(at, k.globalId());
    ps.setString(at + 1, k.service());
    ps.setString(at + 2, k.operation());
    ps.setShort(at + 3, (short) (k.phase() == dev.idem.client.Phase.COMPENSATION ? 2 : 1));
  }

  static Report run(Connection c, StepKey k, long attempt, Effect fn) throws SQLException, CommitFailed {
    if (attempt == 0) throw new SQLException("barrier: attempt 0");
    c.setAutoCommit(false);
    try {
      long claimed = -1;
      try (PreparedStatement ps = c.prepareStatement(CLAIM)) {
        key(ps, 1, k);
        ps.setLong(5, attempt);
        try (ResultSet rs = ps.executeQuery()) {
          if (rs.next()) claimed = rs.getLong(1);
        }
      }
      if (claimed < 0) { // applied by an earlier (or concurrent, now committed) attempt
        try (PreparedStatement ps = c.prepareStatement(SELECT)) {
          key(ps, 1, k);
          try (ResultSet rs = ps.executeQuery()) {
            if (!rs.next()) throw new SQLException("barrier read: no row");
            long fence = rs.getLong(1);
            int oc = rs.getInt(2);
            boolean known = !rs.wasNull();
            int code = rs.getInt(3);
            byte[] body = rs.getBytes(4);
            c.rollback();
            return new Report(false, true, false, fence, new StepResult(known ? outcome(oc) : Outcome.UNKNOWN, code, body));
          }
        }
      }
      StepResult out = fn.apply(c, attempt);
      if (out.outcome() != Outcome.SUCCEEDED && out.outcome() != Outcome.FAILED) {
        c.rollback();
        return new Report(false, false, true, 0, new StepResult(Outcome.RETRYABLE, out.code(), null));
      }
      try (PreparedStatement ps = c.prepareStatement(FINISH)) {
        ps.setShort(1, wire(out.outcome()));
        ps.setInt(2, out.code());
        if (out.body().length > 0) ps.setBytes(3, out.body()); // NULL when empty, as libidem_pg stores it
        else ps.setNull(3, Types.BINARY);
        key(ps, 4, k);
        ps.setLong(8, attempt);
        int n = ps.executeUpdate();
        if (n != 1) throw new SQLException("barrier record: " + n + " rows");
      }
      try {
        c.commit();
      } catch (SQLException e) {
        throw new CommitFailed(e);
      }
      return new Report(true, false, false, attempt, out);
    } catch (SQLException e) {
      try {
        c.rollback();
      } catch (SQLException ignored) {
        // the connection is gone: it is closed by the caller
      }
      throw e;
    } finally {
      try {
        c.setAutoCommit(true);
      } catch (SQLException ignored) {
        // as above
      }
    }
  }
}
