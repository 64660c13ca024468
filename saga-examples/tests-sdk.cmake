# saga-examples/tests-sdk.cmake — the order saga with its payment participant in Go and in Node
# (label sdk; included from tests/CMakeLists.txt). Each runs tests/saga's own scenarios binary
# unchanged (double click, gateway retry, late callback, 100 identical requests, refund before
# its charge, declined charge, reused key; each cross-checked table by table) against C order and
# inventory services and the Go / Node payment (saga-examples/polyglot/run-scenarios.sh, which
# installs and builds the participant first). RUN_SERIAL: the builds share client-lib's outputs.
foreach(lang go node)
  add_test(NAME saga_payment_${lang}
    COMMAND ${CMAKE_SOURCE_DIR}/saga-examples/polyglot/run-scenarios.sh ${CMAKE_BINARY_DIR} ${lang}
            $<TARGET_FILE:saga_test_scenarios> --jobs=2)
  set_tests_properties(saga_payment_${lang} PROPERTIES LABELS sdk TIMEOUT 600 RUN_SERIAL ON)
endforeach()
