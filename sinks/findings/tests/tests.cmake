# findings on real runs through the CLI (root + the loupe binary): the offcpu workload's
# halves (a spinning function, a sleeping one) and a latency tail.
loupe_cli_e2e_test(findings_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/findings_e2e_test.cpp
  DEFINITIONS OFFCPU_WORKLOAD="$<TARGET_FILE:offcpu_workload>"
  DEPENDS offcpu_workload loupe-findings loupe-cpusample loupe-offcpu loupe-latency
  PROPERTIES TIMEOUT 120)
# The rules library on records built in the test (no kernel).
add_executable(findings_rules_test ${CMAKE_CURRENT_LIST_DIR}/findings_rules_test.cpp)
target_include_directories(findings_rules_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
target_link_libraries(findings_rules_test PRIVATE loupe_findings_rules loupe::sdk GTest::gtest_main
  nlohmann_json::nlohmann_json)
target_compile_options(findings_rules_test PRIVATE ${LOUPE_WARNINGS})
gtest_discover_tests(findings_rules_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")
