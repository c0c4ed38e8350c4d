# The SDK's user-space twins of the BPF helpers (sdk/include/loupe/sdk/target_filter.hpp,
# histogram.hpp, percpu.hpp, library.hpp, uprobe.hpp, perf_event.hpp): unit tests; only the
# per-CPU map test needs root (it skips otherwise). The latency fake host supplies config.
add_executable(sdk_helpers_unit_test ${CMAKE_CURRENT_LIST_DIR}/sdk_helpers_unit_test.cpp
  ${CMAKE_SOURCE_DIR}/plugins/latency/tests/latency_fake_host.cpp)
target_include_directories(sdk_helpers_unit_test PRIVATE ${CMAKE_SOURCE_DIR}/plugins/latency/tests)
target_compile_options(sdk_helpers_unit_test PRIVATE ${LOUPE_WARNINGS})
target_include_directories(sdk_helpers_unit_test PRIVATE ${LOUPE_BPF_INCLUDE_DIR})
target_link_libraries(sdk_helpers_unit_test PRIVATE loupe_sdk GTest::gtest_main PkgConfig::LIBBPF
  PkgConfig::LIBELF)
gtest_discover_tests(sdk_helpers_unit_test PROPERTIES LABELS unit)
