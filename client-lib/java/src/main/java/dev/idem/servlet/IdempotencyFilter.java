package dev.idem.servlet;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import dev.idem.client.Decision;
import dev.idem.client.IdemClient;
import dev.idem.client.IdemCode;
import dev.idem.client.IdemException;
import dev.idem.client.Outcome;
import dev.idem.client.RunReport;
import dev.idem.client.StepKey;
import dev.idem.client.StepOptions;
import dev.idem.client.StepResult;
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
import java.util.Collection;
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
  static final Pattern TRACEPARENT = Pattern.compile("[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}");
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
    private Function<HttpServletRequest, String> scope = r -> IdempotencyKey.authorizationScope(r.getHeader("Authorization"));
    private Set<String> keep = Set.of("content-type");
    private int bodyLimit = 64 * 1024;
    private int maxRequestBody = 1024 * 1024;
    private String problemBase = "docs/http-middleware.md";
    private boolean waitInProgress;
    private Duration timeout = Duration.ofSeconds(5);
    private int maxDoc = 64 * 1024;
    private Logger log = Logger.getLogger(IdempotencyFilter.class.getName());

    private Builder(IdemClient client) { this.client = client; }

    /** the step's service name (1-64 of [a-z0-9._-]; default "http") */
    public Builder service(String s) { service = s; return this; }
    /** the wrapped methods (default POST and PATCH); others pass through untouched */
    public Builder methods(String... m) {
      Set<String> s = new TreeSet<>();
      for (String x : m) s.add(x.toUpperCase(Locale.ROOT));
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
      for (String x : h) s.add(x.toLowerCase(Locale.ROOT));
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
      return new IdempotencyFilter(this);
    }
  }

  // --- the request ---------------------------------------------------------------------------

  @Override
  public void doFilter(ServletRequest sreq, ServletResponse sresp, FilterChain chain) throws IOException, ServletException {
    if (!(sreq instanceof HttpServletRequest req) || !(sresp instanceof HttpServletResponse resp)
        || !methods.contains(req.getMethod().toUpperCase(Locale.ROOT))) {
      chain.doFilter(sreq, sresp);
      return;
    }
    Collection<String> values = java.util.Collections.list(req.getHeaders("Idempotency-Key"));
    String raw = values.isEmpty() ? null : values.size() == 1 ? values.iterator().next() : String.join(",", values);
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
    String shown = GSON.toJson(key);
    byte[] body;
    try {
      body = readBody(req);
    } catch (BodyException e) {
      problem(req, resp, e.word, e.getMessage() + "; the handler did not run and idempotency key " + shown
          + " was not used", key, 0);
      return;
    }
    String method = req.getMethod().toUpperCase(Locale.ROOT);
    String path = req.getRequestURI();
    String target = req.getQueryString() == null ? path : path + "?" + req.getQueryString();
    StepKey step;
    try {
      String op = operation != null ? operation.apply(req) : IdempotencyKey.operation(method, path);
      step = StepKey.forward(IdempotencyKey.globalId(key, String.valueOf(scope.apply(req))), service, op);
    } catch (RuntimeException e) {
      problem(req, resp, "middleware-error", "the operation or scope of idempotency key " + shown
          + " could not be named: " + e.getMessage(), key, 0);
      return;
    }
    StepOptions opts = StepOptions.DEFAULTS.withFingerprint(IdempotencyKey.fingerprint(method, target, body))
        .withTimeout(timeout)
        .withInProgress(waitInProgress ? StepOptions.InProgress.WAIT : StepOptions.InProgress.FAIL_FAST);
    String tp = req.getHeader("traceparent");
    if (tp != null && TRACEPARENT.matcher(tp).matches() && !tp.startsWith("ff")) opts = opts.withTraceparent(tp);
    run(req, resp, chain, step, opts, key, body);
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
    replay(resp, rep.result());
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
      if (!keep.contains(lower) || lower.equals("content-type")) continue;
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

  private void replay(HttpServletResponse resp, StepResult res) throws IOException {
    StoredResponse s;
    try {
      s = StoredResponse.decode(res.body());
    } catch (IllegalArgumentException e) { // past retention_s (outcome and code only), or not a stored answer
      s = new StoredResponse(res.code() != 0 ? res.code() : 500, List.of(), new byte[0], true);
    }
    resp.reset();
    resp.setStatus(s.status());
    for (String[] h : s.headers()) {
      if (h[0].equalsIgnoreCase("content-length")) continue;
      if (h[0].equalsIgnoreCase("content-type")) resp.setContentType(h[1]);
      else resp.addHeader(h[0], h[1]);
    }
    resp.setHeader("Idempotent-Replayed", "true");
    if (s.omitted()) resp.setHeader("Idempotent-Body-Omitted", "true");
    resp.setContentLength(s.body().length);
    resp.getOutputStream().write(s.body());
    resp.flushBuffer();
  }

  /** The answer when the handler did not run here: a problem. */
  private void decided(HttpServletRequest req, HttpServletResponse resp, IdemException e, String key) throws IOException {
    String shown = GSON.toJson(key);
    String why = e.code() + (e.reason().isEmpty() ? "" : " " + e.reason());
    if (e.code() == IdemCode.ABORTED) {
      problem(req, resp, "in-progress", "a request with idempotency key " + shown + " is still being processed", key,
          e.retryAfterMs());
    } else if (e.code() == IdemCode.FAILED_PRECONDITION && (e.reason().equals("fingerprint-mismatch") || e.reason().isEmpty())) {
      problem(req, resp, "fingerprint-mismatch", "idempotency key " + shown
          + " was used for another request (method, target or body)", key, 0);
    } else if (REFUSALS.contains(e.code().name())) {
      problem(req, resp, "coordinator-refused", "the idem coordinator refused the middleware (" + why
          + "): a misconfiguration a retry does not fix; the handler did not run: " + e.detail(), key, 0);
    } else {
      problem(req, resp, "coordinator-unavailable", "no idem coordinator could decide on idempotency key " + shown
          + " (" + why + ") and the operation fails closed", key, e.retryAfterMs());
    }
  }

  private void problem(HttpServletRequest req, HttpServletResponse resp, String word, String detail, String key,
                       long retryAfterMs) throws IOException {
    Problems.send(req, resp, log, problemBase, word, detail, key, retryAfterMs);
  }

  // --- the request body ----------------------------------------------------------------------

  private static final class BodyException extends Exception {
    private static final long serialVersionUID = 1L;
    final String word;

    BodyException(String word, String detail) {
      super(detail);
      this.word = word;
    }
  }

  /** The request body, read in full (chunked bodies are decoded by the container). */
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
