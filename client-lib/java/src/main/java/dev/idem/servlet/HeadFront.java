package dev.idem.servlet;

import com.google.gson.JsonObject;
import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A raw-byte front for a servlet container (the Java counterpart of Go's idemhttp.CheckHeads):
 * it listens on the public address, reads each request's head from the bytes as received, answers
 * what docs/api.md §19 refuses itself with the rule's problem document, and relays every other
 * request to the container on a loopback address, and the container's bytes back, unchanged.
 * It exists because a container repairs or refuses some requests before any filter sees them, with
 * no setting to change it: Tomcat unfolds a folded field line, drops a Content-Length beside
 * Transfer-Encoding: chunked, and refuses dot segments above the root.
 *
 * <p>Per connection: each head is parsed by {@link RequestHead} (refusals: obs-fold, a control
 * character, a malformed request line: 400 request-malformed; ambiguous framing: 400
 * body-malformed; a head past {@code headLimit}: 431 header-too-large) and its body walked by
 * {@link BodyWalk} (Content-Length or chunked) to find the next request, so keep-alive and
 * pipelining keep working; a target whose dot segments climb above the root is rewritten to its
 * normalized path, every other byte goes on as it came. A refusal is answered only after the
 * container's answers to the requests before it on the connection: the front half-closes toward
 * the container, relays until the container closes, then writes the problem document
 * ({@code Connection: close}) and closes. The container sees the front's loopback address as the
 * peer; anything that can reach its loopback port bypasses the front.
 *
 * <p>Bounds: one thread (a selector) for every connection; per connection at most
 * {@code headLimit} + 1 KiB of head and 16 KiB of answer held; at most {@code maxConnections}
 * connections (then new ones wait in the listen backlog); a head must be complete within
 * {@code headTimeout} of its first byte (of the accept, for a connection's first), else the
 * connection is closed without an answer. Bodies are not held: they go on as the container reads
 * them, so a slow upload holds a connection, not a thread. A chunked body whose framing is broken
 * goes on as received and the connection is not read as requests after it (the container answers
 * it). Started by {@link Builder#start}; {@link #close} stops it and closes every connection.
 */
public final class HeadFront implements AutoCloseable {
  private static final int ANSWER_BUFFER = 16 * 1024;
  private static final long LINGER_MS = 500;
  private static final long LINGER_BYTES = 1 << 20;

  /** The options: {@link HeadFront#builder}. */
  public static final class Builder {
    private final InetSocketAddress listen;
    private final InetSocketAddress upstream;
    private int headLimit = 16384;
    private Duration headTimeout = Duration.ofSeconds(20);
    private int maxConnections = 4096;
    private Logger logger = Logger.getLogger(HeadFront.class.getName());

    private Builder(InetSocketAddress listen, InetSocketAddress upstream) {
      this.listen = listen;
      this.upstream = upstream;
    }

    /** The longest head (request line and fields, line ends included) relayed; longer is 431. Default 16384. */
    public Builder headLimit(int bytes) {
      if (bytes < 256 || bytes > 1 << 20) throw new IllegalArgumentException("headLimit: " + bytes + " is not 256-1048576 bytes");
      headLimit = bytes;
      return this;
    }

    /** How long a head may take from its first byte. Default 20 s. */
    public Builder headTimeout(Duration d) {
      if (d.isNegative() || d.isZero()) throw new IllegalArgumentException("headTimeout: " + d + " is not positive");
      headTimeout = d;
      return this;
    }

    /** Connections held at once. Default 4096. */
    public Builder maxConnections(int n) {
      if (n < 1) throw new IllegalArgumentException("maxConnections: " + n + " is not at least 1");
      maxConnections = n;
      return this;
    }

    /** Where a refusal's line (with its problem instance) is logged. */
    public Builder logger(Logger l) {
      logger = l;
      return this;
    }

    /** Binds the listen address (BindException when it is taken) and starts relaying. */
    public HeadFront start() throws IOException {
      return new HeadFront(this);
    }
  }

  /**
   * A front listening on {@code listen} for a container on {@code upstream} (a loopback address:
   * the front relays each connection to it).
   */
  public static Builder builder(InetSocketAddress listen, InetSocketAddress upstream) {
    return new Builder(listen, upstream);
  }

  private final Builder o;
  private final Selector selector;
  private final ServerSocketChannel server;
  private final Thread thread;
  private final Set<Conn> conns = new HashSet<>();
  private volatile boolean stopping;

  private HeadFront(Builder b) throws IOException {
    this.o = b;
    this.selector = Selector.open();
    this.server = ServerSocketChannel.open();
    try {
      server.bind(b.listen, 512);
    } catch (IOException e) {
      server.close();
      selector.close();
      BindException be = new BindException("cannot listen on " + b.listen + ": " + e.getMessage());
      be.initCause(e);
      throw be;
    }
    server.configureBlocking(false);
    server.register(selector, SelectionKey.OP_ACCEPT);
    thread = new Thread(this::loop, "idem-head-front-" + port());
    thread.setDaemon(true);
    thread.start();
  }

  /** The port it listens on. */
  public int port() { return server.socket().getLocalPort(); }

  @Override
  public void close() {
    stopping = true;
    selector.wakeup();
    try {
      thread.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void loop() {
    long lastTick = System.nanoTime();
    try {
      while (!stopping) {
        selector.select(250);
        for (SelectionKey k : selector.selectedKeys()) {
          if (!k.isValid()) continue;
          if (k.channel() == server) {
            try {
              accept();
            } catch (IOException e) { // one connection lost (out of descriptors, reset): the others go on
              o.logger.warning("head front: accepting a connection failed: " + e);
            }
            continue;
          }
          Conn c = (Conn) k.attachment();
          try {
            c.ready(k);
          } catch (IOException | RuntimeException e) {
            if (e instanceof RuntimeException) o.logger.log(Level.WARNING, "head front: " + e, e);
            c.close();
          }
        }
        selector.selectedKeys().clear();
        long now = System.nanoTime();
        if (now - lastTick < 100_000_000L) continue;
        lastTick = now;
        for (Conn c : new ArrayList<>(conns)) {
          try {
            c.tick(now);
          } catch (IOException e) {
            c.close();
          }
        }
      }
    } catch (IOException | ClosedSelectorException e) {
      o.logger.log(Level.WARNING, "head front: the selector failed: " + e);
    } finally {
      for (Conn c : new ArrayList<>(conns)) c.close();
      try {
        server.close();
        selector.close();
      } catch (IOException e) {
        // closing: nothing left to answer
      }
    }
  }

  private void accept() throws IOException {
    while (conns.size() < o.maxConnections) {
      SocketChannel ch = server.accept();
      if (ch == null) return;
      ch.configureBlocking(false);
      ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
      conns.add(new Conn(ch));
    }
    server.keyFor(selector).interestOps(0); // at the limit: the backlog holds the rest
  }

  /** One client connection and, once it sent a request that passed, its container connection. */
  private final class Conn {
    final SocketChannel client;
    final SelectionKey ck;
    SocketChannel up;
    SelectionKey uk;
    boolean upConnected;
    final ByteBuffer in; // from the client, not yet handled (read mode between calls: flip/compact)
    final ByteBuffer toUp; // to the container (read mode)
    final ByteBuffer toClient = ByteBuffer.allocate(ANSWER_BUFFER); // from the container (read mode)
    BodyWalk body; // the current request's body, null between requests
    boolean raw; // the framing broke: bytes go on unread
    boolean clientEof;
    boolean upEof;
    boolean upShut;
    ByteBuffer problem; // a refusal waiting for the earlier answers
    boolean refusing;
    boolean closing; // answered and half-closed: draining what the client still sends
    long headDeadline; // nanoTime; 0 = none
    long lingerDeadline;
    long lingered;
    int scanned; // bytes of the head being read already searched for its end

    Conn(SocketChannel ch) throws IOException {
      client = ch;
      in = ByteBuffer.allocate(o.headLimit + 1024);
      toUp = ByteBuffer.allocate(o.headLimit + 4096);
      in.flip();
      toUp.flip();
      toClient.flip();
      ck = ch.register(selector, SelectionKey.OP_READ, this);
      headDeadline = System.nanoTime() + o.headTimeout.toNanos();
    }

    void close() {
      if (!conns.remove(this)) return;
      try {
        client.close();
      } catch (IOException e) {
        // already gone
      }
      if (up != null) {
        try {
          up.close();
        } catch (IOException e) {
          // already gone
        }
      }
      if (!stopping && server.isOpen() && server.keyFor(selector).interestOps() == 0) {
        server.keyFor(selector).interestOps(SelectionKey.OP_ACCEPT);
      }
    }

    void tick(long now) throws IOException {
      if (closing && now - lingerDeadline > 0) {
        close();
      } else if (!closing && !refusing && headDeadline != 0 && now - headDeadline > 0) {
        close(); // a head not complete in time: closed without an answer, as the container does
      }
    }

    void ready(SelectionKey k) throws IOException {
      if (k == uk && k.isConnectable()) {
        try {
          up.finishConnect();
        } catch (IOException e) {
          o.logger.warning("head front: " + peer() + ": the container at " + o.upstream + " cannot be reached: " + e);
          throw e;
        }
        upConnected = true;
      }
      if (k == ck && k.isReadable()) readClient();
      if (k == uk && upConnected && k.isReadable()) readUp();
      pump();
    }

    private void readClient() throws IOException {
      if (closing) { // answered: what the client still sends is read and dropped for a moment
        ByteBuffer sink = ByteBuffer.allocate(8192);
        int n = client.read(sink);
        lingered += Math.max(n, 0);
        if (n < 0 || lingered > LINGER_BYTES) close();
        return;
      }
      in.compact();
      int n;
      try {
        n = client.read(in);
      } finally {
        in.flip();
      }
      if (n < 0) clientEof = true;
    }

    private void readUp() throws IOException {
      toClient.compact();
      int n;
      try {
        n = up.read(toClient);
      } catch (IOException e) {
        n = -1;
      } finally {
        toClient.flip();
      }
      if (n < 0) upEof = true;
    }

    /** Moves what can move, writes what can be written, and sets what to wait for. */
    private void pump() throws IOException {
      if (!closing) {
        handle();
        if (toUp.hasRemaining() && up != null && upConnected && !upShut) {
          try {
            up.write(toUp);
          } catch (IOException e) { // the container closed: its answer is still read and relayed
            toUp.position(toUp.limit());
            upShut = true;
          }
        }
        if (toClient.hasRemaining()) client.write(toClient);
        if (!upShut && up != null && upConnected && !toUp.hasRemaining() && (clientEof || refusing)) {
          up.shutdownOutput();
          upShut = true;
        }
        if (!toClient.hasRemaining() && (up == null || upEof)) {
          if (problem != null) {
            client.write(problem);
            if (!problem.hasRemaining()) finish();
          } else if (up != null || clientEof) {
            finish(); // the container closed, or the client did and nothing is in flight
          }
        }
      }
      if (!conns.contains(this)) return;
      int ci = 0;
      if (closing || (!clientEof && !refusing && in.remaining() < in.capacity())) ci |= SelectionKey.OP_READ;
      if (!closing && (toClient.hasRemaining() || (problem != null && (up == null || upEof)))) ci |= SelectionKey.OP_WRITE;
      ck.interestOps(ci);
      if (uk != null && uk.isValid()) {
        int ui = SelectionKey.OP_CONNECT;
        if (upConnected) {
          ui = 0;
          if (!upEof && toClient.remaining() < toClient.capacity()) ui |= SelectionKey.OP_READ;
          if (toUp.hasRemaining() && !upShut) ui |= SelectionKey.OP_WRITE;
        }
        uk.interestOps(ui);
      }
    }

    /** Half-closes toward the client and drains what it still sends for a moment, then closes. */
    private void finish() throws IOException {
      closing = true;
      lingerDeadline = System.nanoTime() + LINGER_MS * 1_000_000;
      try {
        client.shutdownOutput();
      } catch (IOException e) {
        close();
        return;
      }
      if (up != null) up.close();
      if (clientEof) close();
    }

    /** Hands the client's bytes on: heads parsed, bodies walked, as far as toUp has room. */
    private void handle() throws IOException {
      while (!refusing && in.hasRemaining()) {
        if (upShut || upEof) { // the container is gone: nothing more goes to it
          in.position(in.limit());
          return;
        }
        if (raw || body != null) {
          toUp.compact();
          int room = toUp.remaining();
          toUp.flip();
          if (room == 0) return;
          int n = Math.min(room, in.remaining());
          if (!raw) n = body.feed(in.array(), in.position(), n);
          put(in.array(), in.position(), n);
          in.position(in.position() + n);
          if (!raw && body.broken()) {
            raw = true;
          } else if (!raw && body.done()) {
            body = null;
          }
          continue;
        }
        in.compact().flip(); // the head starts at 0
        if (headDeadline == 0) headDeadline = System.nanoTime() + o.headTimeout.toNanos();
        if (!ended() && in.remaining() <= o.headLimit) break; // parsed once it has ended
        scanned = 0;
        RequestHead h = RequestHead.parse(in.array(), in.remaining(), o.headLimit);
        if (h == RequestHead.MORE) break;
        if (h.problem != null) {
          refuse(h.problem, h.detail);
          return;
        }
        byte[] head = h.rewritten;
        int len = head != null ? head.length : h.length;
        toUp.compact();
        int room = toUp.remaining();
        toUp.flip();
        if (room < len) return; // toUp drains first
        if (head != null) {
          put(head, 0, head.length);
        } else {
          put(in.array(), in.position(), h.length);
        }
        in.position(in.position() + h.length);
        headDeadline = 0;
        if (h.body != 0) body = new BodyWalk(h.body);
        if (up == null) connect();
      }
      if (clientEof && !refusing && in.hasRemaining() && body == null && !raw && !blank()) {
        refuse("request-malformed", "the connection ended inside the request head");
      }
    }

    /** Whether in (from 0) holds LF LF or LF CR LF: the head may have ended. Scans each byte once. */
    private boolean ended() {
      byte[] b = in.array();
      int n = in.remaining();
      for (int i = Math.max(0, scanned - 2); i < n; i++) {
        if (b[i] == '\n' && ((i + 1 < n && b[i + 1] == '\n') || (i + 2 < n && b[i + 1] == '\r' && b[i + 2] == '\n'))) {
          return true;
        }
      }
      scanned = n;
      return false;
    }

    private boolean blank() {
      for (int i = in.position(); i < in.limit(); i++) {
        if (in.get(i) != '\r' && in.get(i) != '\n') return false;
      }
      return true;
    }

    private void put(byte[] b, int off, int n) {
      toUp.compact();
      toUp.put(b, off, n);
      toUp.flip();
    }

    private void connect() throws IOException {
      up = SocketChannel.open();
      up.configureBlocking(false);
      up.setOption(StandardSocketOptions.TCP_NODELAY, true);
      upConnected = up.connect(o.upstream);
      uk = up.register(selector, upConnected ? SelectionKey.OP_WRITE : SelectionKey.OP_CONNECT, this);
    }

    /** Refuses the head being read: the problem goes out after the container's earlier answers. */
    private void refuse(String word, String detail) {
      refusing = true;
      headDeadline = 0;
      in.position(in.limit());
      JsonObject doc = Problems.document("docs/http-middleware.md", word, detail, null);
      int status = Problems.status(word);
      o.logger.warning("head front: " + peer() + ": " + status + " " + word + " instance="
          + doc.get("instance").getAsString() + ": " + detail);
      byte[] json = Problems.bytes(doc);
      byte[] head = ("HTTP/1.1 " + status + " " + reason(status) + "\r\nContent-Type: application/problem+json\r\n"
          + "Content-Length: " + json.length + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1);
      problem = ByteBuffer.allocate(head.length + json.length).put(head).put(json).flip();
    }

    private String peer() {
      try {
        return String.valueOf(client.getRemoteAddress());
      } catch (IOException e) {
        return "?";
      }
    }
  }

  private static String reason(int status) {
    return switch (status) {
      case 400 -> "Bad Request";
      case 431 -> "Request Header Fields Too Large";
      default -> "Error";
    };
  }
}
