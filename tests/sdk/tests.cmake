# tests/sdk/tests.cmake — tests across the SDKs (client-lib/go, client-lib/node, client-lib/python),
# label sdk; included from tests/CMakeLists.txt. They start their own etcd and coordinators on
# free loopback ports (IDEM_COORDINATOR_BIN, a database of their own beside IDEM_TEST_PG_URL's)
# and stop them by PID.

# the SDKs' failover test: kill -9 of the leader while a Go, a Node and a Python client run steps
# through their step helpers; each follows the failover to the standby; 0 duplicate executions in
# the participants' ledgers (tests/sdk/failover.py says what it asserts)
add_test(NAME sdk_failover COMMAND ${IDEM_TEST_RUN} /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/failover.py)
set_tests_properties(sdk_failover PROPERTIES LABELS sdk TIMEOUT 400 RESOURCE_LOCK sdk_builds
  ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1;IDEM_SOURCE_DIR=${CMAKE_SOURCE_DIR};IDEM_GO_BUILD=${CMAKE_BINARY_DIR}/go;IDEM_IDEMCTL_BIN=$<TARGET_FILE:idemctl>")
