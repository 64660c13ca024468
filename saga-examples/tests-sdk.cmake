# saga-examples/tests-sdk.cmake — the order saga with its payment participant in Go, Node and Java
# (label sdk; included from tests/CMakeLists.txt). Each runs tests/saga's own binaries unchanged
# against C order and inventory services and the Go / Node / Java payment
# (saga-examples/polyglot/run-scenarios.sh, which installs and builds the participant first):
#   saga_payment_LANG         test_scenarios: double click, gateway retry, late callback, 100
#                             identical requests, refund before its charge, declined charge, reused
#                             key; each cross-checked table by table
#   saga_payment_LANG_faults  test_faults' payment cases: kill -9 of the payment at after_begin,
#                             after_write and after_complete, restart, attempt/fence and cross-check
# RESOURCE_LOCK sdk_builds: one at a time of the tests whose builds share client-lib's outputs
# (client-lib/node/dist, the Go cache, build/java); the C tests run beside them.
foreach(lang go node java)
  add_test(NAME saga_payment_${lang}
    COMMAND ${IDEM_TEST_RUN} ${CMAKE_SOURCE_DIR}/saga-examples/polyglot/run-scenarios.sh ${CMAKE_BINARY_DIR} ${lang}
            $<TARGET_FILE:saga_test_scenarios> --jobs=2)
  add_test(NAME saga_payment_${lang}_faults
    COMMAND ${IDEM_TEST_RUN} ${CMAKE_SOURCE_DIR}/saga-examples/polyglot/run-scenarios.sh ${CMAKE_BINARY_DIR} ${lang}
            $<TARGET_FILE:saga_test_faults> --jobs=2 --filter faults/payment_*)
  set_tests_properties(saga_payment_${lang} saga_payment_${lang}_faults PROPERTIES
    LABELS sdk TIMEOUT 600 RESOURCE_LOCK sdk_builds)
endforeach()
# the committed payment-go/shoppb/*.pb.go are what saga-examples/proto generates today
add_test(NAME saga_payment_go_pb_current COMMAND ${CMAKE_SOURCE_DIR}/saga-examples/payment-go/gen.sh --check)
set_tests_properties(saga_payment_go_pb_current PROPERTIES LABELS sdk TIMEOUT 60)
