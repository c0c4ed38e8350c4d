# jsonl sink: dlopen the built library and drive it through its C ABI with the fake host
# of tests/support, then assert on what it wrote.
add_executable(sinks_jsonl_test ${CMAKE_CURRENT_LIST_DIR}/jsonl_sink_test.cpp)
target_include_directories(sinks_jsonl_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
target_link_libraries(sinks_jsonl_test PRIVATE loupe::sdk GTest::gtest_main nlohmann_json::nlohmann_json
  ${CMAKE_DL_LIBS})
target_compile_options(sinks_jsonl_test PRIVATE ${LOUPE_WARNINGS})
target_compile_definitions(sinks_jsonl_test PRIVATE LOUPE_JSONL_SO="$<TARGET_FILE:loupe-jsonl>")
add_dependencies(sinks_jsonl_test loupe-jsonl)
gtest_discover_tests(sinks_jsonl_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")
