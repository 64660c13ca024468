# client-lib/go/tests.cmake — the Go SDK's tests (included from tests/CMakeLists.txt, label sdk).
# Everything runs through client-lib/go/go.sh: GOPATH mode, offline, GOCACHE under
# ${CMAKE_BINARY_DIR}/go (the first test compiles grpc-go once; later ones reuse the cache).
# The tests start their own coordinators (IDEM_COORDINATOR_BIN, IDEM_TEST_PG_URL) and stop them
# by PID. RESOURCE_LOCK sdk_builds: one test at a time of those that build into the shared Go
# cache, client-lib/node/dist or build/java (the saga payments, sdk_failover, http_differential);
# the C tests run beside them.
set(IDEM_GO_SH ${CMAKE_SOURCE_DIR}/client-lib/go/go.sh)
set(IDEM_GO_BUILD ${CMAKE_BINARY_DIR}/go)

# the SDK: validation, the step helper, lease keeper, redirect, TLS, fail-open journal + reconcile,
# trace context (the idem.step span in an in-memory exporter, the trace id in LookupStep and idemctl step)
add_test(NAME go_sdk COMMAND ${IDEM_TEST_RUN} ${IDEM_GO_SH} ${IDEM_GO_BUILD} test -count=1 idem.dev/client)
set_tests_properties(go_sdk PROPERTIES LABELS sdk TIMEOUT 600 RESOURCE_LOCK sdk_builds
  ENVIRONMENT "IDEM_IDEMCTL_BIN=$<TARGET_FILE:idemctl>")

# the conformance scenarios (client-lib/conformance/scenarios.json) through the shared harness
add_test(NAME conformance_go COMMAND ${IDEM_TEST_RUN} ${CMAKE_SOURCE_DIR}/client-lib/conformance/run
  ${CMAKE_SOURCE_DIR}/client-lib/go/conformance.sh ${IDEM_GO_BUILD})
set_tests_properties(conformance_go PROPERTIES LABELS sdk TIMEOUT 600 RESOURCE_LOCK sdk_builds)

# the middleware's header parser, step key, fingerprint (client-lib/conformance/idempotency-key.json),
# Retry-After rounding and the stored-response encoding; a request's traceparent on the step
add_test(NAME go_idemhttp COMMAND ${IDEM_TEST_RUN} ${IDEM_GO_SH} ${IDEM_GO_BUILD} test -count=1 idem.dev/client/idemhttp)
set_tests_properties(go_idemhttp PROPERTIES LABELS sdk TIMEOUT 600 RESOURCE_LOCK sdk_builds
  ENVIRONMENT "IDEM_SOURCE_DIR=${CMAKE_SOURCE_DIR}")

# examples/http behind the middleware, over HTTP on loopback, against real coordinators: 100
# concurrent POSTs with one key, 422, 400, replays, 5xx retried, every malformed key of the
# table, quoted = bare, 255 characters, a stopped coordinator (fail-closed 503 / fail-open)
add_test(NAME go_example_http COMMAND ${IDEM_TEST_RUN} ${IDEM_GO_SH} ${IDEM_GO_BUILD} test -count=1 idem.dev/client/examples/http)
set_tests_properties(go_example_http PROPERTIES LABELS sdk TIMEOUT 600 RESOURCE_LOCK sdk_builds
  ENVIRONMENT "IDEM_SOURCE_DIR=${CMAKE_SOURCE_DIR}")

# the committed idempb/*.pb.go are what proto/idem/v1/coordinator.proto generates today
add_test(NAME go_pb_current COMMAND ${CMAKE_SOURCE_DIR}/client-lib/go/gen.sh --check)
set_tests_properties(go_pb_current PROPERTIES LABELS sdk TIMEOUT 60)
