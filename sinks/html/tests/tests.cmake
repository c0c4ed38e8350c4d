# html sink: dlopen the built library, drive it with the fake host, then load the report
# in headless Chromium (its own #selftest, console errors, a screenshot kept in the build
# dir as a test artifact).
add_executable(sinks_html_test ${CMAKE_CURRENT_LIST_DIR}/html_sink_test.cpp)
target_include_directories(sinks_html_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
target_link_libraries(sinks_html_test PRIVATE loupe::sdk GTest::gtest_main
  nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS})
target_compile_options(sinks_html_test PRIVATE ${LOUPE_WARNINGS})
target_compile_definitions(sinks_html_test PRIVATE
  LOUPE_HTML_SO="$<TARGET_FILE:loupe-html>"
  LOUPE_ARTIFACT_DIR="${CMAKE_BINARY_DIR}/test-artifacts")
add_dependencies(sinks_html_test loupe-html)
gtest_discover_tests(sinks_html_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}" TIMEOUT 90)
