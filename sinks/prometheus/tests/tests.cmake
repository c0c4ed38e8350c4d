# prometheus sink: dlopen the built library, drive it with the fake host, scrape it over
# HTTP, lint the text with promtool, and let a real Prometheus server scrape it.
if(TARGET loupe-prometheus)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
add_executable(sinks_prometheus_test ${CMAKE_CURRENT_LIST_DIR}/prometheus_sink_test.cpp)
target_include_directories(sinks_prometheus_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
target_link_libraries(sinks_prometheus_test PRIVATE loupe::sdk GTest::gtest_main PkgConfig::HTTPLIB
  nlohmann_json::nlohmann_json Threads::Threads ${CMAKE_DL_LIBS})
target_compile_options(sinks_prometheus_test PRIVATE ${LOUPE_WARNINGS})
target_compile_definitions(sinks_prometheus_test PRIVATE
  LOUPE_PROMETHEUS_SO="$<TARGET_FILE:loupe-prometheus>")
add_dependencies(sinks_prometheus_test loupe-prometheus)
gtest_discover_tests(sinks_prometheus_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}" TIMEOUT 60)
endif()
