package dev.idem.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.idem.support.Coordinator;
import io.grpc.HandlerRegistry;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerMethodDefinition;
import io.grpc.Status;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A CANCELLED the caller did not cause (a draining node's gRPC killed the try, no idem-reason) is
 * a lost try: repeated on the next node when repeatable, else thrown with its outcome unknown. One
 * the caller caused (its thread interrupted) stays final.
 */
class LostTryTest {
  static Coordinator coord;
  static FakeNode draining;
  static String tenant;

  /** A stand-in node on a free loopback port: every call goes to behaviour; counts calls. */
  static final class FakeNode implements AutoCloseable {
    final AtomicInteger calls = new AtomicInteger();
    final CountDownLatch reached = new CountDownLatch(1);
    final Server server;
    final String address;

    FakeNode(Consumer<StreamObserver<byte[]>> behaviour) throws IOException {
      MethodDescriptor.Marshaller<byte[]> raw = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] v) { return new ByteArrayInputStream(v); }

        @Override
        public byte[] parse(InputStream in) {
          try {
            return in.readAllBytes();
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      };
      HandlerRegistry any = new HandlerRegistry() {
        @Override
        public ServerMethodDefinition<?, ?> lookupMethod(String name, String authority) {
          MethodDescriptor<byte[], byte[]> m = MethodDescriptor.<byte[], byte[]>newBuilder()
              .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName(name)
              .setRequestMarshaller(raw).setResponseMarshaller(raw).build();
          return ServerMethodDefinition.create(m, ServerCalls.asyncUnaryCall((req, obs) -> {
            calls.incrementAndGet();
            reached.countDown();
            behaviour.accept(obs);
          }));
        }
      };
      server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
          .fallbackHandlerRegistry(any).build().start();
      address = "127.0.0.1:" + server.getPort();
    }

    @Override
    public void close() {
      server.shutdownNow();
    }
  }

  @BeforeAll
  static void start() throws IOException {
    coord = new Coordinator();
    tenant = Coordinator.unique("java-lost-try");
    draining = new FakeNode(obs -> obs.onError(Status.CANCELLED.withDescription("server is shutting down").asRuntimeException()));
  }

  @AfterAll
  static void stop() {
    if (draining != null) draining.close();
    if (coord != null) coord.close();
  }

  static IdemClient connect(String first) {
    return IdemClient.builder().address(first, coord.address).tenant(tenant).build();
  }

  @Test
  void aRepeatableCallGoesOnToTheNextNode() {
    try (IdemClient c = connect(draining.address)) {
      RunReport r = c.run(StepKey.forward("lost-try-1", "payment", "charge"), ctx -> StepResult.succeeded("next node"));
      assertTrue(r.ran());
      assertTrue(draining.calls.get() > 0, "the draining node was not called");
    }
  }

  @Test
  void beginSagaWithoutARequestIdIsNotRepeated() {
    try (IdemClient c = connect(draining.address)) {
      int before = draining.calls.get();
      IdemException x = assertThrows(IdemException.class, c::beginSaga);
      assertEquals(IdemCode.CANCELLED, x.code(), x.toString());
      assertEquals("", x.reason());
      assertTrue(x.outcomeUnknown(), x.toString());
      assertEquals(1, draining.calls.get() - before);
    }
  }

  @Test
  void anInterruptedCallIsFinal() throws Exception {
    try (FakeNode hanging = new FakeNode(obs -> { }); IdemClient c = connect(hanging.address)) {
      AtomicReference<Throwable> got = new AtomicReference<>();
      Thread t = new Thread(() -> {
        try {
          c.lookup(StepKey.forward("lost-try-2", "payment", "charge"));
        } catch (Throwable e) {
          got.set(e);
        }
      });
      t.start();
      assertTrue(hanging.reached.await(10, TimeUnit.SECONDS), "the call did not reach the node");
      t.interrupt();
      t.join(10_000);
      assertFalse(t.isAlive(), "the interrupted call did not end");
      assertTrue(got.get() instanceof IdemException, String.valueOf(got.get()));
      IdemException x = (IdemException) got.get();
      assertEquals(IdemCode.CANCELLED, x.code(), x.toString());
      assertFalse(x.outcomeUnknown(), x.toString());
    }
  }
}
