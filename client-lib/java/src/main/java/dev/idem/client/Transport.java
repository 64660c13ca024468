package dev.idem.client;

import io.grpc.CallOptions;
import io.grpc.ClientInterceptors;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.MetadataUtils;
import io.netty.handler.ssl.SslContext;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * Channels to the coordinator nodes and one unary call with leader redirects and failover.
 *
 * <p>A call goes to the current endpoint. UNAVAILABLE with a trailing idem-leader (a standby, or
 * the wrong group's leader, answered: nothing was done) sends it straight to that leader (a
 * channel is added for it); UNAVAILABLE without one, or CANCELLED from a draining node
 * ({@link #lostTry}), moves on to the next address with backoff and jitter, inside the call's
 * timeout. Each endpoint remembers what its last call heard, for
 * the fail-open rule of docs/api.md §20 ({@link #noneCouldDecide}).
 */
final class Transport implements AutoCloseable {
  enum Heard { NONE, NOTHING, UNDECIDED, SENT, DECIDER }

  static final Metadata.Key<String> REASON = Metadata.Key.of("idem-reason", Metadata.ASCII_STRING_MARSHALLER);
  static final Metadata.Key<String> LEADER = Metadata.Key.of("idem-leader", Metadata.ASCII_STRING_MARSHALLER);
  static final Metadata.Key<String> DETAIL = Metadata.Key.of("idem-detail", Metadata.ASCII_STRING_MARSHALLER);
  static final Metadata.Key<String> HINT = Metadata.Key.of("idem-hint", Metadata.ASCII_STRING_MARSHALLER);
  static final Metadata.Key<String> RETRY_AFTER =
      Metadata.Key.of("idem-retry-after-ms", Metadata.ASCII_STRING_MARSHALLER);
  static final Metadata.Key<String> TRACEPARENT = Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER);
  private static final long MIN_TRY_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

  private static final class Endpoint {
    final String addr;
    final ManagedChannel channel;
    long heardAt; // System.nanoTime(), 0 = never
    Heard heard = Heard.NONE;
    String sentTo;

    Endpoint(String addr, ManagedChannel channel) {
      this.addr = addr;
      this.channel = channel;
    }
  }

  private final Object mu = new Object();
  private final List<Endpoint> eps = new ArrayList<>();
  private final Metadata base;
  private final SslContext ssl;
  private final String authority;
  private int cur;
  private volatile boolean closed;

  Transport(List<String> addresses, Metadata base, SslContext ssl, String authority) {
    this.base = base;
    this.ssl = ssl;
    this.authority = authority;
    for (String a : addresses) add(a);
  }

  private int add(String addr) {
    synchronized (mu) {
      for (int i = 0; i < eps.size(); i++) {
        if (eps.get(i).addr.equals(addr)) return i;
      }
      NettyChannelBuilder b = NettyChannelBuilder.forTarget(addr);
      if (ssl != null) {
        b.sslContext(ssl).useTransportSecurity();
        if (authority != null) b.overrideAuthority(authority);
      } else {
        b.usePlaintext();
      }
      eps.add(new Endpoint(addr, b.build()));
      return eps.size() - 1;
    }
  }

  int endpoints() {
    synchronized (mu) {
      return eps.size();
    }
  }

  @Override
  public void close() {
    closed = true;
    List<ManagedChannel> chs = new ArrayList<>();
    synchronized (mu) {
      for (Endpoint e : eps) chs.add(e.channel);
    }
    for (ManagedChannel c : chs) c.shutdownNow();
    for (ManagedChannel c : chs) {
      try {
        c.awaitTermination(2, TimeUnit.SECONDS);
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  /** Full jitter: random(0, min(cap, base * 2^n)) nanoseconds. */
  static long backoffNanos(long base, long cap, int n) {
    long top = Math.min(cap, base * (1L << Math.min(n, 20)));
    return top <= 0 ? 0 : ThreadLocalRandom.current().nextLong(top + 1);
  }

  /** An IdemException from gRPC's failure: code, idem-reason, idem-leader, idem-retry-after-ms,
   *  idem-detail, idem-hint. */
  static IdemException error(Throwable t) {
    Status s = Status.fromThrowable(t);
    Metadata tr = Status.trailersFromThrowable(t);
    String reason = "", leader = "", detail = "", hint = "";
    long retry = 0;
    if (tr != null) {
      reason = nz(tr.get(REASON));
      leader = nz(tr.get(LEADER));
      detail = nz(tr.get(DETAIL));
      hint = nz(tr.get(HINT));
      try {
        retry = Math.max(0, Long.parseLong(nz(tr.get(RETRY_AFTER)).strip()));
      } catch (NumberFormatException e) {
        retry = 0;
      }
    }
    IdemCode code = IdemCode.ofGrpc(s.getCode());
    boolean unknown = code == IdemCode.DEADLINE_EXCEEDED || (code == IdemCode.UNAVAILABLE && leader.isEmpty());
    String msg = s.getDescription() != null ? s.getDescription() : code.name().toLowerCase().replace('_', ' ');
    return new IdemException(code, msg, reason, "", leader, retry, unknown, detail, hint, null);
  }

  /**
   * A try gRPC ended with CANCELLED, without idem-reason, that the caller did not cause (its
   * thread not interrupted, its gRPC Context not cancelled, the client not closed). The
   * coordinator never answers CANCELLED: a draining node's gRPC killed a call that reached it
   * after its shutdown began, without saying whether the handler had it (docs/upgrading.md).
   * Like an UNAVAILABLE without idem-leader: outcome unknown, repeated on the next address only
   * when repeatable.
   */
  /** System.nanoTime() of the last lost try ({@link #lostTry}), any address; 0 = none (mu). */
  private long lostAt;

  /** Whether a try was lost at or after {@code since} (System.nanoTime), on any address. */
  boolean lostSince(long since) {
    synchronized (mu) {
      return lostAt != 0 && lostAt - since >= 0;
    }
  }

  private boolean lostTry(IdemException e) {
    return e.code() == IdemCode.CANCELLED && e.reason().isEmpty() && !closed
        && !Thread.currentThread().isInterrupted() && !Context.current().isCancelled();
  }

  private static String nz(String s) { return s == null ? "" : s; }

  static Heard heardOf(IdemException e) {
    if (e == null) return Heard.DECIDER;
    if (e.code() == IdemCode.DEADLINE_EXCEEDED) return Heard.NOTHING;
    if (e.reason().isEmpty()) return e.code() == IdemCode.UNAVAILABLE ? Heard.NOTHING : Heard.DECIDER;
    switch (e.reason()) {
      case Reason.STORE_UNAVAILABLE, Reason.STORE_TIMEOUT, Reason.NO_LEADER:
        return Heard.UNDECIDED;
      case Reason.NOT_LEADER:
        return e.leader().isEmpty() ? Heard.DECIDER : Heard.SENT;
      default:
        return Heard.DECIDER;
    }
  }

  private void note(Endpoint ep, IdemException e) {
    Heard h = heardOf(e);
    synchronized (mu) {
      ep.heardAt = System.nanoTime();
      ep.heard = h;
      ep.sentTo = h == Heard.SENT ? e.leader() : null;
    }
  }

  /**
   * True when every known address was called since {@code since} (System.nanoTime) and none could
   * decide: no answer, or store-unavailable / store-timeout / no-leader (a standby's not-leader
   * counts as what the leader it names said). Never after a lost try since {@code since}: that
   * node was up and may have decided.
   */
  boolean noneCouldDecide(long since) {
    synchronized (mu) {
      if (eps.isEmpty() || (lostAt != 0 && lostAt - since >= 0)) return false;
      Map<String, Endpoint> byAddr = new HashMap<>();
      for (Endpoint e : eps) byAddr.put(e.addr, e);
      for (Endpoint ep : eps) {
        Endpoint e = ep;
        for (int i = 0; i < eps.size(); i++) {
          if (e.heard != Heard.SENT || e.heardAt - since < 0 || !byAddr.containsKey(e.sentTo)) break;
          e = byAddr.get(e.sentTo);
        }
        if (e.heardAt == 0 || e.heardAt - since < 0 || (e.heard != Heard.NOTHING && e.heard != Heard.UNDECIDED)) {
          return false;
        }
      }
      return true;
    }
  }

  /**
   * One unary call, following redirects and failing over inside {@code timeoutNanos}.
   * repeatable: whether repeating it after an unknown outcome is harmless.
   */
  <Q, R> R call(MethodDescriptor<Q, R> method, Q req, long timeoutNanos, boolean repeatable, String traceparent) {
    long deadline = System.nanoTime() + timeoutNanos;
    boolean unknown = false;
    int tries = 0;
    Metadata md = new Metadata();
    md.merge(base);
    if (traceparent != null) md.put(TRACEPARENT, traceparent);
    while (true) {
      Endpoint ep;
      int idx, n;
      synchronized (mu) {
        idx = cur;
        n = eps.size();
        ep = eps.get(idx);
      }
      IdemException err;
      try {
        long left = Math.max(deadline - System.nanoTime(), TimeUnit.MILLISECONDS.toNanos(1));
        R resp = ClientCalls.blockingUnaryCall(
            ClientInterceptors.intercept(ep.channel, MetadataUtils.newAttachHeadersInterceptor(md)),
            method, CallOptions.DEFAULT.withDeadlineAfter(left, TimeUnit.NANOSECONDS), req);
        note(ep, null);
        return resp;
      } catch (StatusRuntimeException e) {
        err = error(e);
        if (lostTry(err)) {
          err = unknownOutcome(err);
          err.lostTry = true;
          synchronized (mu) {
            lostAt = System.nanoTime();
          }
        }
        note(ep, err);
      }
      if (err.code() == IdemCode.DEADLINE_EXCEEDED && n > 1) { // no answer: start elsewhere next time
        synchronized (mu) {
          if (cur == idx) cur = (idx + 1) % n;
        }
      }
      boolean lost = err.code() == IdemCode.CANCELLED && err.outcomeUnknown(); // lostTry: not ours
      // a refusal after a try that may have acted, unless it proves none did
      if (err.code() != IdemCode.UNAVAILABLE && !lost)
        throw unknown && !Refusal.settles(method.getBareMethodName(), req, err)
            ? unknownOutcome(err) : err;
      boolean standby = !lost && !err.leader().isEmpty(); // idem-leader came with it: nothing was done
      if (!standby) {
        unknown = true;
        if (!repeatable) throw err;
      }
      int next = idx;
      if (standby) next = add(err.leader());
      else if (n > 1) next = (idx + 1) % n;
      synchronized (mu) {
        if (cur == idx) cur = next;
      }
      long wait = standby && next != idx ? 0
          : backoffNanos(TimeUnit.MILLISECONDS.toNanos(25), TimeUnit.MILLISECONDS.toNanos(500), tries);
      tries++;
      if (System.nanoTime() + wait + MIN_TRY_NANOS - deadline >= 0) throw unknown ? unknownOutcome(err) : err;
      sleepNanos(wait);
    }
  }

  private static IdemException unknownOutcome(IdemException e) {
    if (e.outcomeUnknown()) return e;
    return new IdemException(e.code(), e.detail(), e.reason(), e.field(), e.leader(), e.retryAfterMs(), true,
        e.coordinatorDetail(), e.hint(), null);
  }

  static void sleepNanos(long n) {
    if (n <= 0) return;
    try {
      TimeUnit.NANOSECONDS.sleep(n);
    } catch (InterruptedException ie) {
      Thread.currentThread().interrupt();
      throw new IdemException(IdemCode.CANCELLED, "interrupted");
    }
  }
}
