# client-lib/java/tests.cmake — the Java SDK's JUnit 5 tests (included from tests/CMakeLists.txt,
# label sdk). Everything runs through client-lib/java/junit.sh: build.sh compiles the SDK, the
# filter and the tests with javac into ${CMAKE_BINARY_DIR}/java (once; later tests reuse it) and
# Debian's JUnit console launcher runs the selected classes. The tests start their own
# coordinators (IDEM_COORDINATOR_BIN, IDEM_TEST_PG_URL) and stop them by PID.
set(IDEM_JAVA_SH ${CMAKE_SOURCE_DIR}/client-lib/java/junit.sh)
set(IDEM_JAVA_BUILD ${CMAKE_BINARY_DIR}/java)

# the step helper against a coordinator: bad input naming the field, typed steps and replays,
# failures stored and replayed, retryable releases, exceptions as unknown, 8 concurrent
# CompletableFutures run once, lease extension, a lost lease, fail-closed with no coordinator,
# the journal reconciled by idemctl; the traceparent on every call of a run
add_test(NAME sdk_java_client COMMAND ${IDEM_TEST_RUN} ${IDEM_JAVA_SH} ${IDEM_JAVA_BUILD}
  --select-class dev.idem.client.StepHelperTest --select-class dev.idem.client.TraceparentTest
  --select-class dev.idem.client.LostTryTest)
set_tests_properties(sdk_java_client PROPERTIES LABELS sdk TIMEOUT 180
  ENVIRONMENT "IDEM_IDEMCTL_BIN=$<TARGET_FILE:idemctl>;IDEM_COORDINATOR_BIN=$<TARGET_FILE:idem-coordinator>")

# the conformance scenarios (client-lib/conformance/scenarios.json) as JUnit tests, through the
# shared harness (a leader, a standby and a stoppable coordinator)
add_test(NAME conformance_java COMMAND ${IDEM_TEST_RUN} ${CMAKE_SOURCE_DIR}/client-lib/conformance/run
  ${CMAKE_SOURCE_DIR}/client-lib/java/conformance.sh ${IDEM_JAVA_BUILD} --junit)
set_tests_properties(conformance_java PROPERTIES LABELS sdk TIMEOUT 300
  ENVIRONMENT "IDEM_COORDINATOR_BIN=$<TARGET_FILE:idem-coordinator>")

# the filter's Idempotency-Key parser, global id, default scope, operation and fingerprint
# against client-lib/conformance/idempotency-key.json (and http-middleware.json's key vectors)
add_test(NAME sdk_java_key COMMAND ${IDEM_JAVA_SH} ${IDEM_JAVA_BUILD} --select-class dev.idem.servlet.KeyTableTest)
set_tests_properties(sdk_java_key PROPERTIES LABELS sdk TIMEOUT 120 ENVIRONMENT "IDEM_SOURCE_DIR=${CMAKE_SOURCE_DIR}")

# the servlet filter over HTTP on embedded Tomcat 10 against a real coordinator: the example's
# payments API (100 concurrent POSTs with one key run the handler once, 422, every malformed key
# of the table 400 with the handler count unchanged, quoted then bare replays, 409 with
# Retry-After, a handler 500 runs again, compensated 422, a stopped coordinator: fail-closed 503,
# fail-open runs and is journaled), every case of client-lib/conformance/http-middleware.json and
# its large_response (200 MB through the filter, RSS growth under 100 MB); every other table of the
# file (BehaviourTableTest: problems, coordinator errors with every reason word, operation, header,
# method, trace and stored-answer vectors); the example sent hostile requests byte for byte
# (HostileHttpTest: Tomcat's own errors as problem documents, 300 slow uploads and GET /stats
# within 1 s, framing vectors, stored answers replayed over HTTP, one route under many spellings)
add_test(NAME sdk_java_http COMMAND ${IDEM_TEST_RUN} ${IDEM_JAVA_SH} ${IDEM_JAVA_BUILD}
  --select-class dev.idem.servlet.FilterHttpTest --select-class dev.idem.servlet.BehaviourTableTest
  --select-class dev.idem.servlet.HostileHttpTest)
set_tests_properties(sdk_java_http PROPERTIES LABELS sdk TIMEOUT 300
  ENVIRONMENT "IDEM_SOURCE_DIR=${CMAKE_SOURCE_DIR};IDEM_COORDINATOR_BIN=$<TARGET_FILE:idem-coordinator>")

# the raw-byte front (dev.idem.servlet.HeadFront) on bytes and over loopback before the example on
# embedded Tomcat: obs-fold, Content-Length beside chunked and dot segments above the root as
# docs/api.md §19 says, pipelined requests answered in order before a refusal, a chunked body
# reaching the container byte for byte, slow clients not holding others
add_test(NAME sdk_java_front COMMAND ${IDEM_JAVA_SH} ${IDEM_JAVA_BUILD} --select-class dev.idem.servlet.HeadFrontTest)
set_tests_properties(sdk_java_front PROPERTIES LABELS sdk TIMEOUT 120 ENVIRONMENT "IDEM_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
