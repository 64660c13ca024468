package dev.idem.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import idem.v1.CoordinatorGrpc;
import idem.v1.CoordinatorOuterClass;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/**
 * The W3C traceparent of docs/api.md §22 goes out as call metadata on every call of a run, with
 * the tenant. A gRPC Java server on loopback records what each call carried (the coordinator's
 * own handling of the header is the server's tests').
 */
class TraceparentTest {
  static final Metadata.Key<String> TP = Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER);
  static final Metadata.Key<String> TENANT = Metadata.Key.of("idem-tenant", Metadata.ASCII_STRING_MARSHALLER);

  @Test
  void everyCallOfARunCarriesTheTraceparent() throws Exception {
    List<String> seen = new CopyOnWriteArrayList<>();
    ServerInterceptor capture = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata h, ServerCallHandler<Q, R> next) {
        seen.add(call.getMethodDescriptor().getBareMethodName() + " " + h.get(TP) + " " + h.get(TENANT));
        return next.startCall(call, h);
      }
    };
    CoordinatorGrpc.CoordinatorImplBase impl = new CoordinatorGrpc.CoordinatorImplBase() {
      @Override
      public void beginStep(CoordinatorOuterClass.BeginStepRequest r, StreamObserver<CoordinatorOuterClass.BeginStepResponse> o) {
        o.onNext(CoordinatorOuterClass.BeginStepResponse.newBuilder().setDecisionValue(1).setAttempt(1)
            .setLeaseExpiresUnixMs(System.currentTimeMillis() + 30000).setFailureModeValue(1).build());
        o.onCompleted();
      }

      @Override
      public void completeStep(CoordinatorOuterClass.CompleteStepRequest r, StreamObserver<CoordinatorOuterClass.CompleteStepResponse> o) {
        o.onNext(CoordinatorOuterClass.CompleteStepResponse.getDefaultInstance());
        o.onCompleted();
      }

      @Override
      public void getPolicy(CoordinatorOuterClass.GetPolicyRequest r, StreamObserver<CoordinatorOuterClass.Policy> o) {
        o.onNext(CoordinatorOuterClass.Policy.getDefaultInstance());
        o.onCompleted();
      }
    };
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
        .addService(ServerInterceptors.intercept(impl, capture)).build().start();
    String tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    try (IdemClient c = IdemClient.builder().address("127.0.0.1:" + server.getPort()).tenant("shop").build()) {
      RunReport r = c.run(StepKey.forward("g1", "payment", "charge"), StepOptions.DEFAULTS.withTraceparent(tp),
          ctx -> StepResult.succeeded("ok"));
      assertEquals(Decision.PROCEED, r.decision());
      // the answer names the failure mode: no GetPolicy before (or after) the first try
      assertEquals(List.of("BeginStep " + tp + " shop", "CompleteStep " + tp + " shop"), seen);
      seen.clear();
      c.run(StepKey.forward("g2", "payment", "charge"), ctx -> StepResult.succeeded("ok"));
      assertEquals(List.of("BeginStep null shop", "CompleteStep null shop"), seen);
    } finally {
      server.shutdownNow().awaitTermination();
    }
  }
}
