# client-lib/python/tests.cmake — the Python SDK's tests (included from tests/CMakeLists.txt).
# Each runs with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf) and starts its own
# coordinator(s) on free loopback ports (IDEM_COORDINATOR_BIN, IDEM_TEST_PG_URL).
set(_idem_py ${CMAKE_SOURCE_DIR}/client-lib/python)
set(_idem_py_env "PYTHONDONTWRITEBYTECODE=1" "IDEM_IDEMCTL_BIN=$<TARGET_FILE:idemctl>")

# the Idempotency-Key parser, step key and fingerprint against client-lib/conformance's table
add_test(NAME sdk_python_key COMMAND ${IDEM_TEST_RUN} /usr/bin/python3 -m unittest -v test_key
  WORKING_DIRECTORY ${_idem_py}/tests)
# the SDK's calls and step helper against a coordinator (bad input, lease keep-alive, lost lease,
# the journal replayed by idemctl reconcile)
add_test(NAME sdk_python_client COMMAND ${IDEM_TEST_RUN} /usr/bin/python3 -m unittest -v test_sdk
  WORKING_DIRECTORY ${_idem_py}/tests)
# trace context (docs/api.md §22): an explicit traceparent on run_step and the raw calls ends on
# the step (LookupStep, idemctl step), a malformed one is INVALID_ARGUMENT; a request with a
# traceparent through the WSGI middleware (wsgiref on loopback) leaves its trace id on the step
add_test(NAME sdk_python_trace COMMAND ${IDEM_TEST_RUN} /usr/bin/python3 -m unittest -v test_trace
  WORKING_DIRECTORY ${_idem_py}/tests)
# an idle client's next call while its only node drains (a real coordinator, SIGTERMed): not
# written on the connection whose GOAWAY it has not read, so UNAVAILABLE / DEADLINE_EXCEEDED with
# the outcome known, never a lost try (docs/internals.md, "An idle client's next call")
add_test(NAME sdk_python_drain COMMAND ${IDEM_TEST_RUN} /usr/bin/python3 -m unittest -v test_drain
  WORKING_DIRECTORY ${_idem_py}/tests)
# pip install client-lib/python into a venv with --system-site-packages, offline
add_test(NAME sdk_python_install COMMAND ${IDEM_TEST_RUN} /usr/bin/python3 -m unittest -v test_install
  WORKING_DIRECTORY ${_idem_py}/tests)
# examples/http.py behind the WSGI middleware, against a real coordinator (docs/http-middleware.md),
# then the middleware driven by client-lib/conformance/http-middleware.json (test_http_middleware:
# chunked and truncated bodies, scope, problems, a 200 MB answer's RSS, every vector table), and the
# example on waitress sent hostile requests byte for byte (test_http_hostile: framing, stored answers,
# trace context, its own errors as problem documents)
add_test(NAME sdk_python_http COMMAND ${IDEM_TEST_RUN} /usr/bin/python3 -m unittest -v test_http test_http_middleware test_http_hostile
  WORKING_DIRECTORY ${_idem_py}/tests)
set_tests_properties(sdk_python_key sdk_python_client sdk_python_drain sdk_python_trace sdk_python_install
  sdk_python_http
  PROPERTIES LABELS sdk TIMEOUT 120 ENVIRONMENT "${_idem_py_env}")

# the step helper's conformance scenarios (client-lib/conformance/README.md)
add_test(NAME conformance_python COMMAND ${IDEM_TEST_RUN} ${CMAKE_SOURCE_DIR}/client-lib/conformance/run
  /usr/bin/python3 ${_idem_py}/conformance.py)
set_tests_properties(conformance_python PROPERTIES LABELS sdk TIMEOUT 300
  ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
