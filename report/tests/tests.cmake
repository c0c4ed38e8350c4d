# report/'s own tests: its code on records and files made in the test (no kernel, no
# plugin); the sinks' and `loupe diff`'s tests run it on real records.
foreach(_t findings_rules_test records_file_test)
  add_executable(${_t} ${CMAKE_CURRENT_LIST_DIR}/${_t}.cpp)
  target_include_directories(${_t} PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
  target_link_libraries(${_t} PRIVATE loupe_report loupe::sdk GTest::gtest_main
    nlohmann_json::nlohmann_json)
  target_compile_options(${_t} PRIVATE ${LOUPE_WARNINGS})
  gtest_discover_tests(${_t} PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")
endforeach()
