# cpusample: CLI end-to-end tests on the real kernel (root + the loupe binary). The sampler
# helpers are the SDK's (loupe/sdk/perf_event.hpp), unit-tested in sdk_helpers_tests.cmake.
add_executable(cpu_spin ${CMAKE_CURRENT_LIST_DIR}/cpu_spin.c)
# Frame pointers so user stacks walk to main.
target_compile_options(cpu_spin PRIVATE -O1 -fno-omit-frame-pointer -Wall -Wextra)
set_target_properties(cpu_spin PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

add_executable(cpusample_e2e_test ${CMAKE_CURRENT_LIST_DIR}/cpusample_e2e_test.cpp)
target_compile_options(cpusample_e2e_test PRIVATE ${LOUPE_WARNINGS})
target_link_libraries(cpusample_e2e_test PRIVATE GTest::gtest_main nlohmann_json::nlohmann_json)
target_compile_definitions(cpusample_e2e_test PRIVATE CPU_SPIN_WORKLOAD="$<TARGET_FILE:cpu_spin>")
add_dependencies(cpusample_e2e_test cpu_spin loupe-cpusample)
# One ctest entry: gtest_discover_tests would split LOUPE_TEST_ENV's list on its ';'.
add_test(NAME cpusample_e2e_test COMMAND cpusample_e2e_test)
set_tests_properties(cpusample_e2e_test PROPERTIES
  ENVIRONMENT "${LOUPE_TEST_ENV}" LABELS "kernel" TIMEOUT 120)
