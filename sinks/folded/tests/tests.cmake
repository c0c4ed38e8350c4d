# folded sink: dlopen the built library and drive it through its C ABI with the fake
# host of tests/support, then read the files it wrote.
add_executable(sinks_folded_test ${CMAKE_CURRENT_LIST_DIR}/folded_sink_test.cpp)
target_include_directories(sinks_folded_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
target_link_libraries(sinks_folded_test PRIVATE loupe::sdk GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_options(sinks_folded_test PRIVATE ${LOUPE_WARNINGS})
target_compile_definitions(sinks_folded_test PRIVATE LOUPE_FOLDED_SO="$<TARGET_FILE:loupe-folded>")
add_dependencies(sinks_folded_test loupe-folded)
gtest_discover_tests(sinks_folded_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")
