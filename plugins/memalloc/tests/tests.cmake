# memalloc profiler tests: unit tests of the helpers (no privileges) and CLI end-to-end
# tests on the real kernel (root + the loupe binary) against a workload with known sites.
set(_ma_dir ${CMAKE_CURRENT_LIST_DIR})

add_executable(memalloc_workload ${CMAKE_CURRENT_LIST_DIR}/memalloc_workload.c)
# -O0, frame pointers and noinline sites: the symbolized caller of malloc names the site.
target_compile_options(memalloc_workload PRIVATE -O0 -g -fno-omit-frame-pointer)
target_link_libraries(memalloc_workload PRIVATE Threads::Threads)
set_target_properties(memalloc_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

add_executable(memalloc_unit_test ${_ma_dir}/memalloc_unit_test.cpp)
target_compile_options(memalloc_unit_test PRIVATE ${LOUPE_WARNINGS})
target_link_libraries(memalloc_unit_test PRIVATE loupe_memalloc_support GTest::gtest_main)
gtest_discover_tests(memalloc_unit_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")

loupe_cli_e2e_test(memalloc_e2e_test SOURCE ${_ma_dir}/memalloc_e2e_test.cpp
  DEFINITIONS MEMALLOC_WORKLOAD="$<TARGET_FILE:memalloc_workload>"
  DEPENDS memalloc_workload loupe-memalloc)

# The session's process tree: forked workers' allocations per pid, --no-follow, --pid.
loupe_cli_e2e_test(memalloc_tree_e2e_test SOURCE ${_ma_dir}/memalloc_tree_e2e_test.cpp
  DEPENDS tree_workload loupe-memalloc PROPERTIES RUN_SERIAL TRUE)

# The default unwind = "tables" on tests/unwind's direct_alloc_lock (malloc called straight
# from alloc_site), with and without frame pointers, and on Debian's python3.11 and xz.
loupe_cli_e2e_test(memalloc_unwind_e2e_test SOURCE ${_ma_dir}/memalloc_unwind_e2e_test.cpp
  DEFINITIONS UNWIND_ALLOC_LOCK_NOFP="$<TARGET_FILE:unwind_direct_alloc_lock_nofp>"
              UNWIND_ALLOC_LOCK_FP="$<TARGET_FILE:unwind_direct_alloc_lock_fp>"
  DEPENDS unwind_direct_alloc_lock_nofp unwind_direct_alloc_lock_fp loupe-memalloc
  PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
