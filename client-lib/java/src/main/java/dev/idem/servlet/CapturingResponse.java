package dev.idem.servlet;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.Charset;

/**
 * The handler's response as the filter sees it: status and headers go to the real response
 * (nothing is committed while the body is held); the body is held up to {@code limit} bytes.
 * Past the limit what was held and the rest stream to the client ({@link #streamed()}), so
 * memory stays bounded whatever the handler sends. flushBuffer and sendError do not commit.
 */
final class CapturingResponse extends HttpServletResponseWrapper {
  private final int limit;
  private final ByteArrayOutputStream held = new ByteArrayOutputStream();
  private boolean streaming;
  private ServletOutputStream out;
  private PrintWriter writer;

  CapturingResponse(HttpServletResponse r, int limit) {
    super(r);
    this.limit = limit;
  }

  boolean streamed() { return streaming; }

  byte[] heldBody() { return held.toByteArray(); }

  private void write(byte[] b, int off, int len) throws IOException {
    if (streaming) {
      getResponse().getOutputStream().write(b, off, len);
      return;
    }
    if (held.size() + len <= limit) {
      held.write(b, off, len);
      return;
    }
    streaming = true; // status and headers go out now, then what was held, then the rest
    ServletOutputStream real = getResponse().getOutputStream();
    held.writeTo(real);
    held.reset();
    real.write(b, off, len);
  }

  @Override
  public ServletOutputStream getOutputStream() {
    if (writer != null) throw new IllegalStateException("getWriter() has been called");
    if (out == null) {
      out = new ServletOutputStream() {
        @Override
        public void write(int b) throws IOException { CapturingResponse.this.write(new byte[] {(byte) b}, 0, 1); }

        @Override
        public void write(byte[] b, int off, int len) throws IOException { CapturingResponse.this.write(b, off, len); }

        @Override
        public void flush() throws IOException {
          if (streaming) getResponse().getOutputStream().flush();
        }

        @Override
        public boolean isReady() { return true; }

        @Override
        public void setWriteListener(WriteListener l) { throw new IllegalStateException("non-blocking output is not supported"); }
      };
    }
    return out;
  }

  @Override
  public PrintWriter getWriter() {
    if (writer == null) {
      if (out != null) throw new IllegalStateException("getOutputStream() has been called");
      ServletOutputStream s = getOutputStream();
      writer = new PrintWriter(new OutputStreamWriter(s, Charset.forName(getCharacterEncoding())), false);
    }
    return writer;
  }

  /** Flushes the writer into the held body (or the stream). */
  void finish() throws IOException {
    if (writer != null) writer.flush();
    if (streaming) getResponse().flushBuffer();
  }

  @Override
  public void flushBuffer() throws IOException {
    if (writer != null) writer.flush();
    if (streaming) getResponse().flushBuffer();
  }

  @Override
  public void sendError(int sc) { setStatus(sc); }

  @Override
  public void sendError(int sc, String msg) { setStatus(sc); }

  @Override
  public void setContentLength(int len) {
    // the filter sets the length of what it sends
  }

  @Override
  public void setContentLengthLong(long len) {
    // the filter sets the length of what it sends
  }
}
