# prometheus sink: dlopen the built library, drive it with the fake host, scrape it over
# HTTP, lint the text with promtool, and let a real Prometheus server scrape it.
if(TARGET loupe-prometheus)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# metrics.proto as a FileDescriptorSet: the test decodes scrapes in a private descriptor
# pool (the dlopened sink's generated classes hold the process-wide one).
set(_metrics_desc ${CMAKE_CURRENT_BINARY_DIR}/metrics.desc)
add_custom_command(OUTPUT ${_metrics_desc}
  COMMAND protobuf::protoc --descriptor_set_out=${_metrics_desc}
          -I ${CMAKE_SOURCE_DIR}/sinks/prometheus/proto metrics.proto
  DEPENDS ${CMAKE_SOURCE_DIR}/sinks/prometheus/proto/metrics.proto
  COMMENT "metrics.proto -> metrics.desc")
add_custom_target(sinks_prometheus_desc DEPENDS ${_metrics_desc})
add_executable(sinks_prometheus_test ${CMAKE_CURRENT_LIST_DIR}/prometheus_sink_test.cpp)
add_dependencies(sinks_prometheus_test sinks_prometheus_desc)
target_include_directories(sinks_prometheus_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
target_link_libraries(sinks_prometheus_test PRIVATE loupe::sdk GTest::gtest_main PkgConfig::HTTPLIB
  nlohmann_json::nlohmann_json Threads::Threads protobuf::libprotobuf ${CMAKE_DL_LIBS})
target_compile_options(sinks_prometheus_test PRIVATE ${LOUPE_WARNINGS})
target_compile_definitions(sinks_prometheus_test PRIVATE
  LOUPE_PROMETHEUS_SO="$<TARGET_FILE:loupe-prometheus>"
  LOUPE_METRICS_DESC="${_metrics_desc}")
add_dependencies(sinks_prometheus_test loupe-prometheus)
gtest_discover_tests(sinks_prometheus_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}" TIMEOUT 60)
endif()

# Native histograms through the CLI on the real kernel: latency plugin, prometheus sink,
# a real `prometheus --enable-feature=native-histograms`, the jsonl sink's percentiles.
if(TARGET loupe-latency AND TARGET loupe-prometheus)
# Host only (label `report`): what it asserts is the sink's exposition against a real
# Prometheus, the same on every kernel; the latency plugin's kernel side has its own tests.
loupe_cli_e2e_test(prometheus_native_e2e_test
  SOURCE ${CMAKE_CURRENT_LIST_DIR}/prometheus_native_e2e_test.cpp LABEL report
  DEPENDS loupe-prometheus loupe-latency PROPERTIES RUN_SERIAL TRUE TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
target_link_libraries(prometheus_native_e2e_test PRIVATE PkgConfig::HTTPLIB Threads::Threads)
endif()

# Counters and histograms through interval reports: latency (interval histograms, running
# counters) and syscount through the CLI, a real Prometheus scraping every 200 ms across
# several intervals, rate()/resets()/histogram_quantile() against the workload's counts.
if(TARGET loupe-latency AND TARGET loupe-prometheus AND TARGET loupe-syscount)
# Host only (label `report`), as the native histograms' test above.
loupe_cli_e2e_test(prometheus_cumulative_e2e_test
  SOURCE ${CMAKE_CURRENT_LIST_DIR}/prometheus_cumulative_e2e_test.cpp LABEL report
  DEPENDS loupe-prometheus loupe-latency loupe-syscount PROPERTIES RUN_SERIAL TRUE TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
target_link_libraries(prometheus_cumulative_e2e_test PRIVATE PkgConfig::HTTPLIB Threads::Threads)
endif()
