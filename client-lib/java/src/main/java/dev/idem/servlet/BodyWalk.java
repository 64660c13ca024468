package dev.idem.servlet;

/**
 * Walks one request body's framing (a Content-Length, or chunked: RFC 9112 §7.1 chunk sizes,
 * extensions, data, trailers) over the bytes as they arrive, for {@link HeadFront}: how many of
 * them belong to the body, so that the bytes after it are read as the next request's head. It
 * keeps no body bytes (a chunk-size or trailer line counts only its length, at most 8 KiB).
 * Not thread-safe: one per connection.
 */
final class BodyWalk {
  private static final int LINE_LIMIT = 8192;

  private enum State { LENGTH, SIZE, EXT, SIZE_LF, DATA, DATA_CR, DATA_LF, TRAILER, TRAILER_LF, DONE, BROKEN }

  private State state;
  private long left; // LENGTH, DATA: bytes still to come
  private int line; // SIZE, EXT, TRAILER: bytes of the line so far
  private boolean digits;

  /** A walk of a body of the framing {@link RequestHead#body} says (&gt; 0 length, -1 chunked). */
  BodyWalk(long body) {
    if (body > 0) {
      state = State.LENGTH;
      left = body;
    } else {
      state = body < 0 ? State.SIZE : State.DONE;
    }
  }

  /** The body has ended. */
  boolean done() { return state == State.DONE; }

  /** The chunked framing is broken: the rest of the connection is not readable as requests. */
  boolean broken() { return state == State.BROKEN; }

  /** Of b[off..off+n), how many bytes belong to the body (fewer than n only when it ends or breaks). */
  int feed(byte[] b, int off, int n) {
    int i = off;
    int end = off + n;
    while (i < end && state != State.DONE && state != State.BROKEN) {
      switch (state) {
        case LENGTH -> {
          int k = (int) Math.min(left, end - i);
          i += k;
          left -= k;
          if (left == 0) state = State.DONE;
        }
        case DATA -> {
          int k = (int) Math.min(left, end - i);
          i += k;
          left -= k;
          if (left == 0) state = State.DATA_CR;
        }
        default -> step(b[i++] & 0xff);
      }
    }
    return i - off;
  }

  private void step(int c) {
    switch (state) {
      case SIZE -> {
        int d = Character.digit(c, 16);
        if (d >= 0 && c < 0x80) {
          if (left > (Long.MAX_VALUE >> 5)) {
            state = State.BROKEN;
            return;
          }
          left = left * 16 + d;
          digits = true;
          line++;
        } else if (digits && (c == ';' || c == ' ' || c == '\t')) {
          state = State.EXT;
        } else if (digits && c == '\r') {
          state = State.SIZE_LF;
        } else {
          state = State.BROKEN;
        }
      }
      case EXT -> {
        if (c == '\r') {
          state = State.SIZE_LF;
        } else if (c == '\n' || ++line > LINE_LIMIT) {
          state = State.BROKEN;
        }
      }
      case SIZE_LF -> {
        if (c != '\n') {
          state = State.BROKEN;
        } else if (left == 0) {
          state = State.TRAILER;
          line = 0;
        } else {
          state = State.DATA;
        }
      }
      case DATA_CR -> state = c == '\r' ? State.DATA_LF : State.BROKEN;
      case DATA_LF -> {
        if (c == '\n') {
          state = State.SIZE;
          left = 0;
          line = 0;
          digits = false;
        } else {
          state = State.BROKEN;
        }
      }
      case TRAILER -> {
        if (c == '\r') {
          state = State.TRAILER_LF;
        } else if (c == '\n' || ++line > LINE_LIMIT) {
          state = State.BROKEN;
        }
      }
      case TRAILER_LF -> {
        if (c != '\n') {
          state = State.BROKEN;
        } else if (line == 0) {
          state = State.DONE;
        } else {
          line = 0;
          state = State.TRAILER;
        }
      }
      default -> state = State.BROKEN;
    }
  }
}
