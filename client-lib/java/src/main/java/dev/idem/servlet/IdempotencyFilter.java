package dev.idem.servlet;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import dev.idem.client.Decision;
import dev.idem.client.IdemClient;
import dev.idem.client.IdemCode;
import dev.idem.client.IdemException;
import dev.idem.client.Outcome;
import dev.idem.client.Reason;
import dev.idem.client.RunReport;
import dev.idem.client.StepKey;
import dev.idem.client.StepOptions;
import dev.idem.client.StepResult;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.logging.Logger;
import java.util.regex.Pattern;

/**
 * The HTTP Idempotency-Key middleware as a Jakarta Servlet 5 filter (docs/api.md §19,
 * docs/http-middleware.md; client-lib/conformance/http-middleware.json drives its tests).
 *
 * <pre>{@code
 * IdempotencyFilter f = IdempotencyFilter.builder(client).service("payments-api").build();
 * // Tomcat: ctx.addFilterDef(...) / FilterRegistration.Dynamic r = servletContext.addFilter("idem", f)
 * }</pre>
 *
 * For each wrapped request (default POST and PATCH) the Idempotency-Key names one step (global
 * id from the caller's scope and the key, service, operation = the route's name); the first
 * request runs the rest of the chain and its answer is stored; a repeat gets the stored answer
 * with {@code Idempotent-Replayed: true}. The request body is read in full first (longer than
 * maxRequestBody → 413, shorter than its Content-Length or broken → 400 body-incomplete, and no
 * step is begun). The handler's answer is held up to bodyLimit bytes; past it the rest streams
 * to the client and the step is stored without its body. 5xx answers complete as retryable (the
 * key is released), 4xx as failed, the rest as succeeded. The handler runs in the request's own
 * thread, as without the filter.
 */
public final class IdempotencyFilter implements Filter {
  static final Set<String> REFUSALS = Set.of("UNAUTHENTICATED", "PERMISSION_DENIED", "INVALID_ARGUMENT");
  /** docs/api.md §22: version 00 is exactly four fields; a later version may append "-" fields. */
  static final Pattern TRACEPARENT = Pattern.compile("([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\\x21-\\x7e]*)?");
  static final Pattern TRACESTATE = Pattern.compile("[\\x20-\\x7e]*");
  static final Pattern METHOD = Pattern.compile("[A-Z0-9!#$%&'*+.^_`|~-]+");
  static final Pattern DIGITS = Pattern.compile("[0-9]+");
  /** The trace context's limit (http-middleware.json defaults.trace_max_bytes). */
  static final int TRACE_MAX = 512;
  static final String PENDING = IdempotencyFilter.class.getName() + ".pending";
  private static final Gson GSON = new GsonBuilder().disableHtmlEscaping().create();

  private final IdemClient client;
  private final String service;
  private final Set<String> methods;
  private final Function<HttpServletRequest, String> operation;
  private final Function<HttpServletRequest, String> scope;
  private final Set<String> keep;
  private final int bodyLimit;
  private final int maxRequestBody;
  private final String problemBase;
  private final boolean waitInProgress;
  private final Duration timeout;
  private final Duration bodyTimeout;
  private final int maxDoc;
  private final Logger log;

  private IdempotencyFilter(Builder b) {
    this.client = b.client;
    this.service = b.service;
    this.methods = b.methods;
    this.operation = b.operation;
    this.scope = b.scope;
    this.keep = b.keep;
    this.bodyLimit = b.bodyLimit;
    this.maxRequestBody = b.maxRequestBody;
    this.problemBase = b.problemBase;
    this.waitInProgress = b.waitInProgress;
    this.timeout = b.timeout;
    this.bodyTimeout = b.bodyTimeout;
    this.maxDoc = b.maxDoc;
    this.log = b.log;
  }

  public static Builder builder(IdemClient client) { return new Builder(client); }

  /** Options; {@link #build()} checks them (IllegalArgumentException naming the option). */
  public static final class Builder {
    private final IdemClient client;
    private String service = "http";
    private Set<String> methods = Set.of("POST", "PATCH");
    private Function<HttpServletRequest, String> operation;
    private Function<HttpServletRequest, String> scope = IdempotencyFilter::defaultScope;
    private Set<String> keep = Set.of("content-type");
    private int bodyLimit = 64 * 1024;
    private int maxRequestBody = 1024 * 1024;
    private String problemBase = "docs/http-middleware.md";
    private boolean waitInProgress;
    private Duration timeout = Duration.ofSeconds(5);
    private Duration bodyTimeout = Duration.ofSeconds(30);
    private int maxDoc = 64 * 1024;
    private Logger log = Logger.getLogger(IdempotencyFilter.class.getName());

    private Builder(IdemClient client) { this.client = client; }

    /** the step's service name (1-64 of [a-z0-9._-]; default "http") */
    public Builder service(String s) { service = s; return this; }
    /** the wrapped methods, upper-case tokens (default POST and PATCH), matched case-sensitively; others pass through */
    public Builder methods(String... m) {
      Set<String> s = new TreeSet<>();
      for (String x : m) {
        if (x == null || !METHOD.matcher(x).matches()) {
          throw new IllegalArgumentException("methods: \"" + x + "\" is not an upper-case method token (methods match"
              + " case-sensitively: POST, not post)");
        }
        s.add(x);
      }
      methods = s;
      return this;
    }
    /** the route's operation name (default method and path, lower-cased, others as "-", at most 64) */
    public Builder operation(Function<HttpServletRequest, String> f) { operation = f; return this; }
    /** the caller's part of the key (default the hex SHA-256 of Authorization, "" without one) */
    public Builder scope(Function<HttpServletRequest, String> f) { scope = f; return this; }
    /** the handler's headers stored and replayed (default Content-Type) */
    public Builder keepHeaders(String... h) {
      Set<String> s = new TreeSet<>();
      for (String x : h) {
        String lower = x.toLowerCase(Locale.ROOT);
        if (StoredResponse.NEVER_KEPT.contains(lower)) {
          throw new IllegalArgumentException("keepHeaders: " + x + " is a framing header the filter writes itself; it"
              + " cannot be stored and replayed");
        }
        s.add(lower);
      }
      keep = s;
      return this;
    }
    /** the handler's answer is held up to this many body bytes (default 64 KiB) */
    public Builder bodyLimit(int n) { bodyLimit = n; return this; }
    /** a longer request body is refused with 413 (default 1 MiB) */
    public Builder maxRequestBody(int n) { maxRequestBody = n; return this; }
    /** the base of problem documents' type (default "docs/http-middleware.md") */
    public Builder problemBase(String b) { problemBase = b; return this; }
    /** a request meeting its key in progress waits for the first and replays it, instead of 409 */
    public Builder waitInProgress(boolean w) { waitInProgress = w; return this; }
    /** the coordinator's part of one request (default 5 s) */
    public Builder timeout(Duration d) { timeout = d; return this; }
    /**
     * how long a request body may take to arrive when the container supports async requests
     * (default 30 s; past it 400 body-incomplete). The body is read without holding a thread, so
     * slow uploads do not starve the server's pool.
     */
    public Builder bodyTimeout(Duration d) { bodyTimeout = d; return this; }
    /** the coordinator's result body limit the stored document must fit (default 64 KiB) */
    public Builder maxStoredDocument(int n) { maxDoc = n; return this; }
    /** where the one line per problem answer goes */
    public Builder logger(Logger l) { log = l; return this; }

    public IdempotencyFilter build() {
      if (client == null) throw new IllegalArgumentException("client: is missing");
      if (service == null || !service.matches("[a-z0-9._-]{1,64}")) {
        throw new IllegalArgumentException("service: must be 1-64 characters of [a-z0-9._-]");
      }
      if (bodyLimit < 0) throw new IllegalArgumentException("bodyLimit: must be 0 or more");
      if (maxRequestBody < 0) throw new IllegalArgumentException("maxRequestBody: must be 0 or more");
      if (timeout == null || timeout.isNegative() || timeout.isZero()) throw new IllegalArgumentException("timeout: must be positive");
      if (bodyTimeout == null || bodyTimeout.isNegative() || bodyTimeout.isZero()) {
        throw new IllegalArgumentException("bodyTimeout: must be positive");
      }
      return new IdempotencyFilter(this);
    }
  }

  // --- the request ---------------------------------------------------------------------------

  /** Whether a request of this method is wrapped (methods match case-sensitively). */
  boolean wraps(String method) { return methods.contains(method); }

  /** What the first pass of a request leaves for the second (an async body read, then a dispatch). */
  private record Pending(String key, IdempotencyKey.Target target, byte[] body, BodyException error) {}

  @Override
  public void doFilter(ServletRequest sreq, ServletResponse sresp, FilterChain chain) throws IOException, ServletException {
    if (!(sreq instanceof HttpServletRequest req) || !(sresp instanceof HttpServletResponse resp)
        || !wraps(req.getMethod())) {
      chain.doFilter(sreq, sresp);
      return;
    }
    if (req.getDispatcherType() == DispatcherType.ASYNC && req.getAttribute(PENDING) instanceof Pending p) {
      req.removeAttribute(PENDING); // the body arrived (or did not): the second pass
      proceed(req, resp, chain, p.key(), p.target(), p.body(), p.error());
      return;
    }
    IdempotencyKey.Target target;
    try {
      String raw = req.getRequestURI() + (req.getQueryString() != null ? "?" + req.getQueryString() : "");
      target = IdempotencyKey.normalizeTarget(raw);
    } catch (IdempotencyKey.TargetMalformed e) {
      problem(req, resp, "target-malformed", e.getMessage() + "; the request target has no one spelling and nothing ran",
          null, 0);
      return;
    }
    // several Idempotency-Key lines are one list: refused by the parser's comma or trailing rule
    List<String> values = java.util.Collections.list(req.getHeaders("Idempotency-Key"));
    String raw = values.isEmpty() ? null : String.join(",", values);
    String key;
    try {
      key = IdempotencyKey.parse(raw);
    } catch (IdempotencyKey.Malformed m) {
      if (m.word().equals("missing")) {
        problem(req, resp, "key-missing", "rule \"missing\": the Idempotency-Key header is missing", null, 0);
      } else {
        problem(req, resp, "key-malformed", "rule \"" + m.word() + "\": " + m.getMessage() + "; header value "
            + GSON.toJson(raw), null, 0);
      }
      return;
    }
    long length;
    try {
      length = framing(req);
      if (length > maxRequestBody) {
        throw new BodyException("body-too-large", "the request body of " + length + " bytes is longer than the "
            + maxRequestBody + "-byte limit");
      }
    } catch (BodyException e) {
      resp.setHeader("Connection", "close"); // the rest of the body is not read
      proceed(req, resp, chain, key, target, null, e);
      return;
    }
    boolean chunked = req.getHeader("Transfer-Encoding") != null;
    if (req.isAsyncSupported() && (length > 0 || chunked)) {
      readAsync(req, key, target, length);
      return;
    }
    byte[] body = null;
    BodyException error = null;
    try {
      body = readBody(req);
    } catch (BodyException e) {
      error = e;
    }
    proceed(req, resp, chain, key, target, body, error);
  }

  private void proceed(HttpServletRequest req, HttpServletResponse resp, FilterChain chain, String key,
                       IdempotencyKey.Target target, byte[] body, BodyException error) throws IOException, ServletException {
    String shown = GSON.toJson(key);
    if (error != null) {
      problem(req, resp, error.word, error.getMessage() + "; the handler did not run and idempotency key " + shown
          + " was not used", key, 0);
      return;
    }
    String method = req.getMethod();
    StepKey step;
    try {
      String op = operation != null ? operation.apply(req) : IdempotencyKey.operation(method, target.path());
      step = StepKey.forward(IdempotencyKey.globalId(key, String.valueOf(scope.apply(req))), service, op);
    } catch (RuntimeException e) {
      log.warning("idempotency key " + shown + ": the operation or scope could not be named: " + e);
      problem(req, resp, "middleware-error", "the operation or scope of idempotency key " + shown
          + " could not be named; the handler did not run", key, 0);
      return;
    }
    StepOptions opts = StepOptions.DEFAULTS.withFingerprint(IdempotencyKey.fingerprint(method, target.fingerprintTarget(), body))
        .withTimeout(timeout)
        .withInProgress(waitInProgress ? StepOptions.InProgress.WAIT : StepOptions.InProgress.FAIL_FAST);
    String[] trace = traceContext(java.util.Collections.list(req.getHeaders("traceparent")),
        java.util.Collections.list(req.getHeaders("tracestate")));
    if (trace[0] != null) opts = opts.withTraceparent(trace[0]); // the SDK sends no tracestate
    run(req, resp, chain, step, opts, key, body);
  }

  /** The default scope: the hex SHA-256 of the Authorization lines joined with ", " in order, "" without one. */
  static String defaultScope(HttpServletRequest r) {
    List<String> auth = java.util.Collections.list(r.getHeaders("Authorization"));
    return IdempotencyKey.authorizationScope(auth.isEmpty() ? null : String.join(", ", auth));
  }

  /**
   * The trace context the filter sends (docs/api.md §19 rule 8): {traceparent,
   * tracestate}, each null when dropped. traceparent only when there is exactly one line that
   * follows §22 within 512 bytes; tracestate (its lines joined with ",") only beside it, within
   * 512 bytes of 0x20-0x7E. Never an error.
   */
  static String[] traceContext(List<String> traceparents, List<String> tracestates) {
    if (traceparents.size() != 1) return new String[] {null, null};
    String tp = traceparents.get(0).strip();
    java.util.regex.Matcher m = TRACEPARENT.matcher(tp);
    if (tp.length() > TRACE_MAX || !m.matches() || m.group(1).equals("ff") || (m.group(1).equals("00") && m.group(5) != null)
        || m.group(2).equals("0".repeat(32)) || m.group(3).equals("0".repeat(16))) {
      return new String[] {null, null};
    }
    String ts = tracestates.isEmpty() ? null : String.join(",", tracestates);
    if (ts != null && (ts.isEmpty() || ts.length() > TRACE_MAX || !TRACESTATE.matcher(ts).matches())) ts = null;
    return new String[] {tp, ts};
  }

  /**
   * What is wrong with a request's body framing (as {@link #framing}), null when nothing: for a
   * server's own error page to answer body-malformed where the server refused the framing itself.
   */
  public static String framingProblem(HttpServletRequest req) {
    try {
      framing(req);
      return null;
    } catch (BodyException e) {
      return e.getMessage();
    }
  }

  /**
   * The declared body length (-1: chunked or none), or BodyException("body-malformed") when the
   * framing is ambiguous: Content-Length beside Transfer-Encoding, a Content-Length that is not
   * 1*DIGIT or comes twice, a Transfer-Encoding other than one chunked (RFC 9112 6.1, 6.3).
   */
  static long framing(HttpServletRequest req) throws BodyException {
    List<String> cl = java.util.Collections.list(req.getHeaders("Content-Length"));
    List<String> te = java.util.Collections.list(req.getHeaders("Transfer-Encoding"));
    if (!cl.isEmpty() && !te.isEmpty()) {
      throw new BodyException("body-malformed", "the request has both Content-Length and Transfer-Encoding");
    }
    if (cl.size() > 1) throw new BodyException("body-malformed", "Content-Length comes " + cl.size() + " times");
    if (te.size() > 1 || (te.size() == 1 && !te.get(0).strip().equalsIgnoreCase("chunked"))) {
      throw new BodyException("body-malformed", "the Transfer-Encoding is not one chunked");
    }
    if (cl.isEmpty()) return -1;
    String v = cl.get(0).strip();
    if (!DIGITS.matcher(v).matches() || v.length() > 18) {
      throw new BodyException("body-malformed", "the Content-Length " + GSON.toJson(v) + " is not one run of digits");
    }
    return Long.parseLong(v);
  }

  /**
   * Reads the body without holding a thread (Servlet 3.1 non-blocking input): the request goes
   * async, bytes are taken as they arrive, and once the body is complete (or broken, too large,
   * or not in within bodyTimeout) the request is dispatched again to this filter's second pass.
   */
  private void readAsync(HttpServletRequest req, String key, IdempotencyKey.Target target, long length) throws IOException {
    AsyncContext ac = req.startAsync();
    ac.setTimeout(bodyTimeout.toMillis());
    ServletInputStream in = req.getInputStream();
    java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
    ByteArrayOutputStream buf = new ByteArrayOutputStream(length > 0 ? (int) Math.min(length, 64 * 1024) : 1024);
    java.util.function.Consumer<BodyException> finish = err -> {
      if (!done.compareAndSet(false, true)) return;
      if (err != null) ((HttpServletResponse) ac.getResponse()).setHeader("Connection", "close");
      req.setAttribute(PENDING, new Pending(key, target, err == null ? buf.toByteArray() : null, err));
      ac.dispatch();
    };
    ac.addListener(new AsyncListener() {
      @Override
      public void onTimeout(AsyncEvent e) {
        finish.accept(new BodyException("body-incomplete", "the request body did not arrive within "
            + bodyTimeout.toMillis() + " ms (" + buf.size() + " bytes came)"));
      }

      @Override
      public void onError(AsyncEvent e) {
        finish.accept(new BodyException("body-incomplete", "the request body could not be read"));
      }

      @Override
      public void onComplete(AsyncEvent e) {}

      @Override
      public void onStartAsync(AsyncEvent e) {}
    });
    in.setReadListener(new ReadListener() {
      private final byte[] chunk = new byte[64 * 1024];

      @Override
      public void onDataAvailable() throws IOException {
        while (!done.get() && in.isReady() && !in.isFinished()) {
          int n = in.read(chunk);
          if (n < 0) break;
          buf.write(chunk, 0, n);
          if (buf.size() > maxRequestBody) {
            finish.accept(new BodyException("body-too-large", "the request body is longer than the " + maxRequestBody
                + "-byte limit"));
            return;
          }
        }
      }

      @Override
      public void onAllDataRead() {
        if (length >= 0 && buf.size() < length) {
          finish.accept(new BodyException("body-incomplete", "the request body ended after " + buf.size() + " of its "
              + length + " bytes"));
        } else {
          finish.accept(null);
        }
      }

      @Override
      public void onError(Throwable t) { // a broken chunk, a reset, an aborted upload
        finish.accept(new BodyException("body-incomplete", "the request body ended after " + buf.size()
            + " bytes, before it was complete"));
      }
    });
  }

  private void run(HttpServletRequest req, HttpServletResponse resp, FilterChain chain, StepKey step,
                   StepOptions opts, String key, byte[] body) throws IOException, ServletException {
    HttpServletRequest inner = new BufferedRequest(req, body);
    CapturingResponse cap = new CapturingResponse(resp, bodyLimit);
    Throwable[] thrown = new Throwable[1];
    RunReport rep;
    try {
      rep = client.run(step, opts, ctx -> {
        int status;
        try {
          chain.doFilter(inner, cap);
          cap.finish();
          status = cap.getStatus();
        } catch (IOException | ServletException | RuntimeException | Error e) {
          thrown[0] = e; // the key is released (retryable), and the failure thrown again below
          return new StepResult(Outcome.RETRYABLE, 500, new byte[0]);
        }
        byte[] doc = StoredResponse.encode(status, kept(resp), cap.streamed() ? null : cap.heldBody(), bodyLimit, maxDoc);
        return new StepResult(status >= 500 ? Outcome.RETRYABLE : status >= 400 ? Outcome.FAILED : Outcome.SUCCEEDED,
            status, doc);
      });
    } catch (IdemException e) {
      if (e.report() != null && e.report().ran()) { // the handler answered: its answer stands
        if (thrown[0] != null) rethrow(thrown[0]);
        if (e.code() != IdemCode.STEP_FAILED) {
          log.warning("idempotency key " + GSON.toJson(key) + ": the step could not be completed after the handler ran: "
              + e.getMessage());
        }
        sendHeld(resp, cap);
        return;
      }
      decided(req, resp, e, key);
      return;
    }
    if (rep.ran()) {
      sendHeld(resp, cap);
      return;
    }
    if (rep.decision() != Decision.REPLAY) { // a SKIP: the key names a compensated step
      problem(req, resp, "compensated", "the request with idempotency key " + GSON.toJson(key)
          + " was compensated and does not run again", key, 0);
      return;
    }
    replay(req, resp, rep.result(), key);
  }

  private static void rethrow(Throwable t) throws IOException, ServletException {
    if (t instanceof IOException e) throw e;
    if (t instanceof ServletException e) throw e;
    if (t instanceof RuntimeException e) throw e;
    throw (Error) t;
  }

  private List<String[]> kept(HttpServletResponse resp) {
    List<String[]> out = new ArrayList<>();
    for (String name : resp.getHeaderNames()) {
      String lower = name.toLowerCase(Locale.ROOT);
      if (!keep.contains(lower) || lower.equals("content-type") || StoredResponse.NEVER_KEPT.contains(lower)) continue;
      for (String v : resp.getHeaders(name)) out.add(new String[] {name, v});
    }
    if (keep.contains("content-type") && resp.getContentType() != null) {
      out.add(0, new String[] {"Content-Type", resp.getContentType()});
    }
    return out;
  }

  private static void sendHeld(HttpServletResponse resp, CapturingResponse cap) throws IOException {
    if (cap.streamed()) {
      resp.flushBuffer();
      return;
    }
    byte[] b = cap.heldBody();
    resp.setContentLength(b.length);
    resp.getOutputStream().write(b);
    resp.flushBuffer();
  }

  private void replay(HttpServletRequest req, HttpServletResponse resp, StepResult res, String key) throws IOException {
    StoredResponse s;
    try {
      s = StoredResponse.replayable(res.body(), res.code(), keep);
    } catch (IllegalArgumentException e) {
      problem(req, resp, "stored-answer-invalid", "the answer stored under idempotency key " + GSON.toJson(key)
          + " cannot be replayed (" + e.getMessage() + "); it was not sent", key, 0);
      return;
    }
    resp.reset();
    resp.setStatus(s.status());
    for (String[] h : s.headers()) {
      if (h[0].equalsIgnoreCase("content-type")) resp.setContentType(h[1]);
      else resp.addHeader(h[0], h[1]);
    }
    resp.setHeader("Idempotent-Replayed", "true");
    if (s.omitted()) resp.setHeader("Idempotent-Body-Omitted", "true");
    resp.setContentLength(s.body().length);
    resp.getOutputStream().write(s.body());
    resp.flushBuffer();
  }

  /** The problem type word of a coordinator error (http-middleware.json's coordinator_errors). */
  static String coordinatorProblem(String code, String reason) {
    if (code.equals("ABORTED")) return "in-progress"; // any reason, lease-lost included
    if (code.equals("FAILED_PRECONDITION") && (reason.equals(Reason.FINGERPRINT_MISMATCH) || reason.isEmpty())) {
      return "fingerprint-mismatch";
    }
    if (REFUSALS.contains(code)) return "coordinator-refused";
    return "coordinator-unavailable";
  }

  /** The answer when the handler did not run here: a problem. */
  private void decided(HttpServletRequest req, HttpServletResponse resp, IdemException e, String key) throws IOException {
    String shown = GSON.toJson(key);
    String why = e.code() + (e.reason().isEmpty() ? "" : " " + e.reason());
    String word = coordinatorProblem(e.code().name(), e.reason());
    switch (word) {
      case "in-progress" -> problem(req, resp, word, "a request with idempotency key " + shown
          + " is still being processed", key, e.retryAfterMs());
      case "fingerprint-mismatch" -> problem(req, resp, word, "idempotency key " + shown
          + " was used for another request (method, target or body)", key, 0);
      case "coordinator-refused" -> problem(req, resp, word, "the idem coordinator refused the middleware (" + why
          + "): a misconfiguration a retry does not fix; the handler did not run", key, 0);
      default -> problem(req, resp, word, "no idem coordinator could decide on idempotency key " + shown
          + " (" + why + ") and the operation fails closed", key, e.retryAfterMs());
    }
  }

  private void problem(HttpServletRequest req, HttpServletResponse resp, String word, String detail, String key,
                       long retryAfterMs) throws IOException {
    Problems.send(req, resp, log, problemBase, word, detail, key, retryAfterMs);
  }

  // --- the request body ----------------------------------------------------------------------

  static final class BodyException extends Exception {
    private static final long serialVersionUID = 1L;
    final String word;

    BodyException(String word, String detail) {
      super(detail);
      this.word = word;
    }
  }

  /** The request body, read in full, blocking (chunked bodies are decoded by the container). */
  private byte[] readBody(HttpServletRequest req) throws BodyException {
    long length = req.getContentLengthLong();
    if (length > maxRequestBody) {
      throw new BodyException("body-too-large", "the request body of " + length + " bytes is longer than the "
          + maxRequestBody + "-byte limit");
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream(length > 0 ? (int) length : 1024);
    byte[] buf = new byte[64 * 1024];
    long want = length >= 0 ? length : (long) maxRequestBody + 1;
    try {
      InputStream in = req.getInputStream();
      while (out.size() < want) {
        int n = in.read(buf, 0, (int) Math.min(buf.length, want - out.size()));
        if (n < 0) break;
        out.write(buf, 0, n);
      }
    } catch (IOException | RuntimeException e) { // a broken chunk, a reset, an aborted upload
      throw new BodyException("body-incomplete", "the request body could not be read (" + e + ")");
    }
    if (out.size() > maxRequestBody) {
      throw new BodyException("body-too-large", "the request body is longer than the " + maxRequestBody + "-byte limit");
    }
    if (length >= 0 && out.size() < length) {
      throw new BodyException("body-incomplete", "the request body ended after " + out.size() + " of its " + length + " bytes");
    }
    return out.toByteArray();
  }

  /** The request as the handler sees it: the body already read, served from memory. */
  private static final class BufferedRequest extends HttpServletRequestWrapper {
    private final byte[] body;

    BufferedRequest(HttpServletRequest r, byte[] body) {
      super(r);
      this.body = body;
    }

    @Override
    public ServletInputStream getInputStream() {
      ByteArrayInputStream in = new ByteArrayInputStream(body);
      return new ServletInputStream() {
        @Override
        public int read() { return in.read(); }

        @Override
        public int read(byte[] b, int off, int len) { return in.read(b, off, len); }

        @Override
        public boolean isFinished() { return in.available() == 0; }

        @Override
        public boolean isReady() { return true; }

        @Override
        public void setReadListener(ReadListener l) { throw new IllegalStateException("non-blocking input is not supported"); }
      };
    }

    @Override
    public BufferedReader getReader() {
      String enc = getCharacterEncoding();
      Charset cs = enc == null ? StandardCharsets.ISO_8859_1 : Charset.forName(enc);
      return new BufferedReader(new InputStreamReader(getInputStream(), cs));
    }

    @Override
    public int getContentLength() { return body.length; }

    @Override
    public long getContentLengthLong() { return body.length; }

    @Override
    public String getHeader(String name) {
      if (name.equalsIgnoreCase("content-length")) return Integer.toString(body.length);
      if (name.equalsIgnoreCase("transfer-encoding")) return null;
      return super.getHeader(name);
    }
  }
}
