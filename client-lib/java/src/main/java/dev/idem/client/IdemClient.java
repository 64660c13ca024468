package dev.idem.client;

import com.google.protobuf.ByteString;
import idem.v1.AdminGrpc;
import idem.v1.CoordinatorGrpc;
import idem.v1.CoordinatorOuterClass;
import io.grpc.Metadata;
import io.grpc.netty.GrpcSslContexts;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import java.io.File;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The client of the idem coordinator (docs/sdk-java.md). Thread-safe; one per process is enough.
 *
 * <pre>{@code
 * try (IdemClient client = IdemClient.builder().address("127.0.0.1:50051").tenant("shop").build()) {
 *   String gid = client.beginSaga().globalId();
 *   String receipt = client.step(StepKey.forward(gid, "payment", "charge"), () -> charge(order));
 * }
 * }</pre>
 *
 * Every call takes the client's per-call timeout (default 2 s) for the whole call, redirects and
 * retries included. Bad input throws {@link IdemException} INVALID_ARGUMENT naming the field
 * before anything is sent; every other failure is an {@link IdemException} with the gRPC code
 * and the coordinator's reason.
 */
public final class IdemClient implements AutoCloseable {
  static final int WAIT_MS_MAX = 60000;
  /** SetPolicy's defaults for a retention or lease left at 0 (the built-in policy's: 24 h, 30 s). */
  static final int POLICY_DEFAULT_RETENTION_S = 86400;
  static final int POLICY_DEFAULT_LEASE_MS = 30000;

  final Transport transport;
  final String tenant;
  final Duration timeout;
  final Path journal;
  final Duration policyRefresh;
  final int maxBody;
  final ScheduledExecutorService leases;
  private final ExecutorService ownExecutor;
  private final Executor executor;
  private final Map<String, Object[]> policies = new HashMap<>(); // "service\0operation" -> {mode, nanos}

  private IdemClient(Builder b, List<String> addrs, SslContext ssl) {
    Metadata md = new Metadata();
    if (b.tenant != null && !b.tenant.isEmpty()) md.put(Metadata.Key.of("idem-tenant", Metadata.ASCII_STRING_MARSHALLER), b.tenant);
    if (b.token != null) md.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + b.token);
    this.transport = new Transport(addrs, md, ssl, b.tlsServerName);
    this.tenant = b.tenant == null || b.tenant.isEmpty() ? "default" : b.tenant;
    this.timeout = b.timeout;
    this.journal = b.journal;
    this.policyRefresh = b.policyRefresh;
    this.maxBody = b.maxBody;
    AtomicInteger n = new AtomicInteger();
    this.leases = Executors.newScheduledThreadPool(4, r -> daemon(r, "idem-lease-" + n.incrementAndGet()));
    if (b.executor != null) {
      this.ownExecutor = null;
      this.executor = b.executor;
    } else {
      this.ownExecutor = Executors.newCachedThreadPool(r -> daemon(r, "idem-step-" + n.incrementAndGet()));
      this.executor = ownExecutor;
    }
  }

  private static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  public static Builder builder() { return new Builder(); }

  /** Options of {@link IdemClient}; {@link #build()} checks them (INVALID_ARGUMENT naming the field). */
  public static final class Builder {
    private final List<String> addresses = new ArrayList<>();
    private String tenant, token, tlsServerName;
    private File tlsRoot, tlsCert, tlsKey;
    private boolean tls;
    private Duration timeout = Duration.ofSeconds(2);
    private Path journal;
    private Duration policyRefresh = Duration.ofSeconds(30);
    private int maxBody = Validate.BODY_MAX;
    private Executor executor;

    private Builder() {}

    /** "host:port", or several comma-separated: calls go to the leader, found from idem-leader answers. */
    public Builder address(String... a) {
      addresses.addAll(List.of(a));
      return this;
    }

    /** sent as idem-tenant (a server with authentication takes the token's tenant instead) */
    public Builder tenant(String t) { tenant = t; return this; }
    /** sent as "authorization: Bearer TOKEN" */
    public Builder token(String t) { token = t; return this; }
    /** TLS against gRPC's default roots (implied by the tls* files) */
    public Builder tls(boolean on) { tls = on; return this; }
    /** PEM roots that verify the server */
    public Builder tlsRoot(File f) { tlsRoot = f; return this; }
    /** PEM certificate and PKCS#8 key for mutual TLS */
    public Builder tlsClient(File cert, File key) { tlsCert = cert; tlsKey = key; return this; }
    /** the name expected in the server's certificate */
    public Builder tlsServerName(String n) { tlsServerName = n; return this; }
    /** per call, redirects and retries included (default 2 s) */
    public Builder timeout(Duration d) { timeout = d; return this; }
    /** the unguarded-execution journal; without it a fail-open step is refused like a fail-closed one */
    public Builder journal(Path p) { journal = p; return this; }
    /** how long a fetched policy stays fresh (default 30 s); negative = never fetch */
    public Builder policyRefresh(Duration d) { policyRefresh = d; return this; }
    /** the coordinator's result body limit (default 64 KiB) */
    public Builder maxBody(int n) { maxBody = n; return this; }
    /** where the CompletableFuture variants run (default a cached pool of daemon threads) */
    public Builder executor(Executor e) { executor = e; return this; }

    public IdemClient build() {
      List<String> addrs = Validate.addresses(addresses);
      if (tenant != null && !tenant.isEmpty()) Validate.globalId(tenant, "tenant");
      if (token != null && (token.isEmpty() || token.indexOf('\n') >= 0 || token.indexOf('\r') >= 0)) {
        throw IdemException.invalid("token", "must be a non-empty line");
      }
      if (timeout == null || timeout.isNegative() || timeout.isZero()) {
        throw IdemException.invalid("timeout", "must be positive");
      }
      if (maxBody < 1) throw IdemException.invalid("maxBody", "must be positive");
      if ((tlsCert == null) != (tlsKey == null)) throw IdemException.invalid("tlsClient", "certificate and key go together");
      SslContext ssl = null;
      if (tls || tlsRoot != null || tlsCert != null) {
        try {
          SslContextBuilder sb = GrpcSslContexts.forClient();
          if (tlsRoot != null) sb.trustManager(tlsRoot);
          if (tlsCert != null) sb.keyManager(tlsCert, tlsKey);
          ssl = sb.build();
        } catch (Exception e) {
          throw IdemException.invalid(tlsRoot != null ? "tlsRoot" : "tlsClient", "cannot be read: " + e.getMessage());
        }
      }
      if (policyRefresh == null) policyRefresh = Duration.ofSeconds(30);
      return new IdemClient(this, addrs, ssl);
    }
  }

  /** Closes the channels; runs in flight fail. */
  @Override
  public void close() {
    transport.close();
    leases.shutdownNow();
    if (ownExecutor != null) ownExecutor.shutdownNow();
  }

  public String tenant() { return tenant; }

  // --- plumbing ------------------------------------------------------------------------------

  long nanos(Duration t) {
    Duration d = t == null ? timeout : t;
    if (d.isNegative() || d.isZero()) throw IdemException.invalid("timeout", "must be positive");
    return d.toNanos();
  }

  static CoordinatorOuterClass.StepKey keyPb(StepKey k) {
    if (k == null) throw IdemException.invalid("key", "is missing");
    Validate.globalId(k.globalId(), "global_id");
    Validate.name(k.service(), "service");
    Validate.name(k.operation(), "operation");
    return CoordinatorOuterClass.StepKey.newBuilder().setGlobalId(k.globalId()).setService(k.service())
        .setOperation(k.operation()).setPhaseValue(k.phase().wire).build();
  }

  static StepResult result(CoordinatorOuterClass.StepResult r, boolean expired) {
    return new StepResult(Outcome.ofWire(r.getOutcomeValue()), r.getCode(), r.getBody().toByteArray(),
        r.getCompletedUnixMs(), expired);
  }

  private static final String[] STATES = {"none", "in_progress", "succeeded", "failed", "unknown", "abandoned", "released"};

  static Types.StepRecord record(CoordinatorOuterClass.StepRecord r) {
    var k = r.getKey();
    StepKey key = new StepKey(k.getGlobalId(), k.getService(), k.getOperation(),
        k.getPhaseValue() == 2 ? Phase.COMPENSATION : Phase.FORWARD);
    int st = r.getStateValue();
    return new Types.StepRecord(key, st >= 0 && st < STATES.length ? STATES[st] : "unspecified", r.getAttempt(),
        r.getFingerprint().toByteArray(), r.hasResult() ? result(r.getResult(), r.getResultExpired()) : null,
        r.getCreatedUnixMs(), r.getUpdatedUnixMs(), r.getLeaseExpiresUnixMs(), r.getExpiresUnixMs(), r.getTenant());
  }

  static Types.Policy policy(CoordinatorOuterClass.Policy p) {
    return new Types.Policy(p.getService(), p.getOperation(),
        p.getFailureModeValue() == 2 ? FailureMode.FAIL_OPEN : FailureMode.FAIL_CLOSED,
        p.getRetentionS(), p.getLeaseMs(), p.getUpdatedUnixMs(), p.getKeyRetentionS());
  }

  // --- Coordinator ---------------------------------------------------------------------------

  /** BeginSaga without a request id: a new global id (UUIDv7). */
  public Types.SagaStarted beginSaga() { return beginSaga(null, "", Map.of(), null); }

  /** BeginSaga: the same requestId again (within retention) returns the same global id. */
  public Types.SagaStarted beginSaga(String requestId, String sagaType, Map<String, String> labels, Duration t) {
    if (requestId != null && (requestId.isEmpty() || requestId.length() > 255
        || !requestId.chars().allMatch(c -> c > 0x20 && c < 0x7f))) {
      throw IdemException.invalid("request_id", "must be 1-255 printable ASCII characters");
    }
    var req = CoordinatorOuterClass.BeginSagaRequest.newBuilder().setRequestId(requestId == null ? "" : requestId)
        .setSagaType(sagaType == null ? "" : sagaType).putAllLabels(labels == null ? Map.of() : labels).build();
    var r = transport.call(CoordinatorGrpc.getBeginSagaMethod(), req, nanos(t), requestId != null, null);
    return new Types.SagaStarted(r.getGlobalId(), r.getCreated(), r.getCreatedUnixMs());
  }

  CoordinatorOuterClass.BeginStepRequest beginRequest(StepKey key, byte[] fp, int leaseMs, int waitMs) {
    var k = keyPb(key);
    byte[] f = Validate.bytes(fp, "fingerprint", Validate.FINGERPRINT_MAX);
    if (leaseMs < 0 || leaseMs > 3600000) throw IdemException.invalid("lease_ms", "must be 0-3600000");
    if (waitMs < 0 || waitMs > WAIT_MS_MAX) throw IdemException.invalid("wait_ms", "must be 0-60000");
    return CoordinatorOuterClass.BeginStepRequest.newBuilder().setKey(k).setFingerprint(ByteString.copyFrom(f))
        .setLeaseMs(leaseMs).setWaitMs(waitMs).build();
  }

  /** One raw BeginStep (the step helper is {@link #run}); waitMs 0–60000 holds the call while in progress. */
  public Types.Begin beginStep(StepKey key, byte[] fingerprint, int leaseMs, int waitMs) {
    var req = beginRequest(key, fingerprint, leaseMs, waitMs);
    return begin(req, timeout.toNanos() + TimeUnit.MILLISECONDS.toNanos(waitMs), null);
  }

  Types.Begin begin(CoordinatorOuterClass.BeginStepRequest req, long nanos, String traceparent) {
    var r = transport.call(CoordinatorGrpc.getBeginStepMethod(), req, nanos, true, traceparent);
    Decision d = Decision.ofWire(r.getDecisionValue());
    if (d == null) throw new IdemException(IdemCode.BAD_RESPONSE, "unknown decision " + r.getDecisionValue());
    // every answer names the operation's failure mode (docs/api.md §20; 0 from an older coordinator)
    int fm = r.getFailureModeValue();
    if ((fm == FailureMode.FAIL_CLOSED.wire || fm == FailureMode.FAIL_OPEN.wire) && !policyRefresh.isNegative()) {
      cachePolicy(req.getKey().getService(), req.getKey().getOperation(),
          fm == FailureMode.FAIL_OPEN.wire ? FailureMode.FAIL_OPEN : FailureMode.FAIL_CLOSED);
    }
    return new Types.Begin(d, r.getAttempt(), r.getLeaseExpiresUnixMs(), r.getTakeover(), r.getExpiresUnixMs(),
        d == Decision.REPLAY ? result(r.getResult(), r.getResultExpired()) : null);
  }

  /** CompleteStep of {@code attempt}: settles (succeeded/failed/unknown) or releases (retryable) the step. */
  public Types.StepRecord completeStep(StepKey key, long attempt, StepResult res) {
    return complete(key, attempt, res, timeout.toNanos(), null);
  }

  Types.StepRecord complete(StepKey key, long attempt, StepResult res, long nanos, String traceparent) {
    var k = keyPb(key);
    if (attempt < 1) throw IdemException.invalid("attempt", "must be a positive integer");
    if (res == null) throw IdemException.invalid("result", "is missing");
    byte[] body = Validate.bytes(res.body(), "body", maxBody);
    var req = CoordinatorOuterClass.CompleteStepRequest.newBuilder().setKey(k).setAttempt(attempt)
        .setOutcomeValue(res.outcome().wire).setCode(res.code()).setBody(ByteString.copyFrom(body)).build();
    return record(transport.call(CoordinatorGrpc.getCompleteStepMethod(), req, nanos, true, traceparent).getRecord());
  }

  /** ExtendLease of the caller's attempt; the new lease expiry (Unix ms). */
  public long extendLease(StepKey key, long attempt, int leaseMs) {
    return extend(key, attempt, leaseMs, timeout.toNanos(), null);
  }

  long extend(StepKey key, long attempt, int leaseMs, long nanos, String traceparent) {
    var req = CoordinatorOuterClass.ExtendLeaseRequest.newBuilder().setKey(keyPb(key)).setAttempt(attempt)
        .setLeaseMs(Math.max(leaseMs, 0)).build();
    return transport.call(CoordinatorGrpc.getExtendLeaseMethod(), req, nanos, true, traceparent).getLeaseExpiresUnixMs();
  }

  /** LookupStep: the step's record (NOT_FOUND when there is none). */
  public Types.StepRecord lookup(StepKey key) {
    var req = CoordinatorOuterClass.LookupStepRequest.newBuilder().setKey(keyPb(key)).build();
    return record(transport.call(CoordinatorGrpc.getLookupStepMethod(), req, timeout.toNanos(), true, null));
  }

  /** GetSaga with every step (follows the pages of docs/api.md §16). */
  public Types.Saga getSaga(String globalId) {
    Validate.globalId(globalId, "global_id");
    List<Types.StepRecord> steps = new ArrayList<>();
    String token = "";
    while (true) {
      var req = CoordinatorOuterClass.GetSagaRequest.newBuilder().setGlobalId(globalId).setPageToken(token).build();
      var r = transport.call(CoordinatorGrpc.getGetSagaMethod(), req, timeout.toNanos(), true, null);
      for (var s : r.getStepsList()) steps.add(record(s));
      token = r.getNextPageToken();
      if (token.isEmpty()) return new Types.Saga(r.getGlobalId(), r.getSagaType(), r.getCreatedUnixMs(), steps, r.getLabelsMap());
    }
  }

  /** GetPolicy: the effective policy of (service, operation); cached for the fail-open rule. */
  public Types.Policy getPolicy(String service, String operation) {
    Validate.name(service, "service");
    Validate.name(operation, "operation");
    var req = CoordinatorOuterClass.GetPolicyRequest.newBuilder().setService(service).setOperation(operation).build();
    Types.Policy p = policy(transport.call(CoordinatorGrpc.getGetPolicyMethod(), req, timeout.toNanos(), true, null));
    cachePolicy(service, operation, p.failureMode());
    return p;
  }

  /** Admin.SetPolicy (admin role) with the key kept as long as the result (key_retention_s 0). */
  public Types.Policy setPolicy(String service, String operation, FailureMode mode, int retentionS, int leaseMs) {
    return setPolicy(service, operation, mode, retentionS, leaseMs, 0);
  }

  /**
   * Admin.SetPolicy (admin role); service and operation may be "*". retentionS 0 = 24 h and
   * leaseMs 0 = 30 s (the built-in default, as in every SDK); keyRetentionS 0 = retentionS, else
   * from retentionS to 400 days (docs/api.md §12). A negative value is refused before any call.
   */
  public Types.Policy setPolicy(String service, String operation, FailureMode mode, int retentionS, int leaseMs,
      int keyRetentionS) {
    Validate.policyName(service, "service");
    Validate.policyName(operation, "operation");
    if (mode == null) throw IdemException.invalid("failure_mode", "is missing");
    if (retentionS < 0) throw IdemException.invalid("retention_s", "must not be negative");
    if (leaseMs < 0) throw IdemException.invalid("lease_ms", "must not be negative");
    if (keyRetentionS < 0) throw IdemException.invalid("key_retention_s", "must not be negative");
    var req = CoordinatorOuterClass.Policy.newBuilder().setService(service).setOperation(operation)
        .setFailureModeValue(mode.wire).setRetentionS(retentionS == 0 ? POLICY_DEFAULT_RETENTION_S : retentionS)
        .setLeaseMs(leaseMs == 0 ? POLICY_DEFAULT_LEASE_MS : leaseMs).setKeyRetentionS(keyRetentionS).build();
    return policy(transport.call(AdminGrpc.getSetPolicyMethod(), req, timeout.toNanos(), true, null));
  }

  // --- the policy cache (fail-open) ----------------------------------------------------------

  private void cachePolicy(String service, String operation, FailureMode m) {
    synchronized (policies) {
      policies.put(service + "\0" + operation, new Object[] {m, System.nanoTime()});
    }
  }

  /** Fetches and caches the effective policy now (e.g. at start-up). */
  public void prefetchPolicy(String service, String operation) { getPolicy(service, operation); }

  /** Fetches the policy when the cached copy is stale; a failed fetch keeps the old copy. */
  void refreshPolicy(String service, String operation) {
    if (policyRefresh.isNegative()) return;
    String k = service + "\0" + operation;
    synchronized (policies) {
      Object[] e = policies.get(k);
      if (e != null && System.nanoTime() - (long) e[1] < policyRefresh.toNanos()) return;
      if (e != null) e[1] = System.nanoTime();
      else policies.put(k, new Object[] {null, System.nanoTime()});
    }
    try {
      getPolicy(service, operation);
    } catch (IdemException e) {
      // kept: the last known mode (or none) decides
    }
  }

  /** The cached failure mode of (service, operation), or null when never fetched. */
  public FailureMode cachedFailureMode(String service, String operation) {
    synchronized (policies) {
      Object[] e = policies.get(service + "\0" + operation);
      return e == null ? null : (FailureMode) e[0];
    }
  }

  // --- the step helper -----------------------------------------------------------------------

  /**
   * Runs one guarded step (BeginStep → the action on PROCEED → CompleteStep) and says how it was
   * settled; see {@link StepRunner} for the rules. Throws {@link IdemException}: FAILED_PRECONDITION
   * (fingerprint mismatch), ABORTED (in progress at the deadline, or reason lease-lost),
   * UNAVAILABLE / DEADLINE_EXCEEDED (no coordinator could decide, fail-closed), STEP_FAILED (the
   * action reported retryable: the key was released), DATA_LOSS (the journal).
   */
  public RunReport run(StepKey key, StepOptions opts, StepAction action) {
    return new StepRunner(this, key, opts == null ? StepOptions.DEFAULTS : opts, action).run();
  }

  public RunReport run(StepKey key, StepAction action) { return run(key, StepOptions.DEFAULTS, action); }

  public CompletableFuture<RunReport> runAsync(StepKey key, StepOptions opts, StepAction action) {
    return CompletableFuture.supplyAsync(() -> run(key, opts, action), executor);
  }

  /**
   * A typed step: the action's value, stored with {@code codec} as a success; on a replay the
   * stored value, decoded, without running. The action throws {@link StepFailure} to report a
   * definite failure or a retryable one; a result that is not a success (now or replayed) throws
   * {@link StepFailedException} carrying it. A skipped step (a compensation with nothing to undo,
   * a forward step already compensated) returns null.
   */
  public <T> T step(StepKey key, StepOptions opts, Codec<T> codec, StepFunction<T> action) {
    if (codec == null) throw IdemException.invalid("codec", "is missing");
    if (action == null) throw IdemException.invalid("action", "is missing");
    RunReport rep;
    Object[] value = new Object[1];
    try {
      rep = run(key, opts, ctx -> {
        try {
          T v = action.apply(ctx);
          value[0] = v;
          return new StepResult(Outcome.SUCCEEDED, 0, codec.encode(v));
        } catch (StepFailure f) {
          return f.result();
        }
      });
    } catch (IdemException e) {
      if (e.code() == IdemCode.STEP_FAILED && e.report() != null && e.report().result() != null) {
        throw new StepFailedException(e.report().result(), false, e.report());
      }
      throw e;
    }
    StepResult r = rep.result();
    if (r == null) return null; // a skip
    if (r.outcome() != Outcome.SUCCEEDED) throw new StepFailedException(r, rep.replayed(), rep);
    if (rep.ran()) {
      @SuppressWarnings("unchecked")
      T v = (T) value[0];
      return v;
    }
    try {
      return codec.decode(r.body());
    } catch (Exception e) {
      throw new IdemException(IdemCode.BAD_RESPONSE, "the stored body cannot be decoded: " + e, "", "body", "", 0, false, e);
    }
  }

  public <T> T step(StepKey key, Codec<T> codec, Callable<T> action) {
    return step(key, StepOptions.DEFAULTS, codec, ctx -> action.call());
  }

  /** A typed step whose value is text (stored as UTF-8). */
  public String step(StepKey key, Callable<String> action) {
    return step(key, StepOptions.DEFAULTS, Codec.STRING, ctx -> action.call());
  }

  public <T> CompletableFuture<T> stepAsync(StepKey key, StepOptions opts, Codec<T> codec, StepFunction<T> action) {
    return CompletableFuture.supplyAsync(() -> step(key, opts, codec, action), executor);
  }

  public CompletableFuture<String> stepAsync(StepKey key, Callable<String> action) {
    return CompletableFuture.supplyAsync(() -> step(key, action), executor);
  }
}
