# jitregions: unit tests of the region table (no privileges) and CLI end-to-end tests on
# the real kernel with a hand-written JIT and with node --perf-basic-prof.
add_executable(jit_hot_loop ${CMAKE_CURRENT_LIST_DIR}/jit_hot_loop.c)
target_compile_options(jit_hot_loop PRIVATE -O1 -Wall -Wextra)
set_target_properties(jit_hot_loop PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

add_executable(jitregions_unit_test ${CMAKE_CURRENT_LIST_DIR}/jitregions_unit_test.cpp)
target_compile_options(jitregions_unit_test PRIVATE ${LOUPE_WARNINGS})
target_link_libraries(jitregions_unit_test PRIVATE loupe_jitregions_support GTest::gtest_main)
add_test(NAME jitregions_unit_test COMMAND jitregions_unit_test)
set_tests_properties(jitregions_unit_test PROPERTIES LABELS "unit" TIMEOUT 30)

loupe_cli_e2e_test(jitregions_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/jitregions_e2e_test.cpp
  DEFINITIONS JIT_HOT_LOOP_WORKLOAD="$<TARGET_FILE:jit_hot_loop>"
  DEPENDS jit_hot_loop loupe-jitregions ONE_ENTRY PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
