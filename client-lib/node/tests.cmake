# client-lib/node/tests.cmake — idem-client's tests (included from tests/CMakeLists.txt, label sdk).
# Each runs through client-lib/node/test/run.sh, which builds the package (tsc, under a lock) and
# then runs node's built-in test runner. client-lib/node/deps.sh installs node_modules first
# (scripts/test runs it). The tests start their own coordinators on free loopback ports
# (IDEM_COORDINATOR_BIN, IDEM_TEST_PG_URL, a private database each) and stop them by PID.
set(IDEM_NODE_DIR ${CMAKE_SOURCE_DIR}/client-lib/node)

# the SDK: validation, errors, the step helper (lease keep-alive, lost lease, wait, cancel),
# fail-open journal replayed by idemctl reconcile; trace context (docs/api.md §22): the idem.step
# span as the parent's child in an in-memory exporter, the trace id in LookupStep and idemctl, and
# through the Express middleware
add_test(NAME node_sdk COMMAND ${IDEM_TEST_RUN} ${IDEM_NODE_DIR}/test/run.sh node --test test/unit.test.js test/pack.test.js test/sdk.test.js test/trace.test.js
  WORKING_DIRECTORY ${IDEM_NODE_DIR})
set_tests_properties(node_sdk PROPERTIES LABELS sdk TIMEOUT 180
  ENVIRONMENT "IDEMCTL_BIN=$<TARGET_FILE:idemctl>")

# client-lib/conformance/scenarios.json through the harness (leader, standby, stoppable node)
add_test(NAME conformance_node COMMAND ${IDEM_TEST_RUN} ${IDEM_NODE_DIR}/test/run.sh
  ${CMAKE_SOURCE_DIR}/client-lib/conformance/run node ${IDEM_NODE_DIR}/test/conformance-runner.js
  WORKING_DIRECTORY ${IDEM_NODE_DIR})
set_tests_properties(conformance_node PROPERTIES LABELS sdk TIMEOUT 300)

# the middleware: the header parser, step key and fingerprint over the shared table
# (client-lib/conformance/idempotency-key.json), every round-three vector of http-middleware.json
# (test/http-rules.test.js), then examples/http.js against a coordinator
add_test(NAME node_http COMMAND ${IDEM_TEST_RUN} ${IDEM_NODE_DIR}/test/run.sh node --test test/http-key.test.js test/http-rules.test.js test/http-findings.test.js test/http.test.js test/http-middleware.test.js
  WORKING_DIRECTORY ${IDEM_NODE_DIR})
set_tests_properties(node_http PROPERTIES LABELS sdk TIMEOUT 180)
