# Lock-wait profiler tests: unit tests of the pure helpers (no privileges) and CLI
# end-to-end tests on the real kernel (root + the loupe binary).
set(_lw_dir ${CMAKE_CURRENT_LIST_DIR})

add_executable(lockwait_mutex ${CMAKE_CURRENT_LIST_DIR}/lockwait_mutex.c)
# Frame pointers and symbols: the waiting stack must name the caller; g_lock stays a
# named global for the data symbolizer.
target_compile_options(lockwait_mutex PRIVATE -O1 -g -fno-omit-frame-pointer)
target_link_libraries(lockwait_mutex PRIVATE Threads::Threads)
set_target_properties(lockwait_mutex PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

# The same contention without frame pointers, optimised, as distributions build: only
# unwind = "dwarf" sees the callers there.
add_executable(lockwait_mutex_nofp ${CMAKE_CURRENT_LIST_DIR}/lockwait_mutex.c)
target_compile_options(lockwait_mutex_nofp PRIVATE -O2 -g -fomit-frame-pointer)
target_link_libraries(lockwait_mutex_nofp PRIVATE Threads::Threads)
set_target_properties(lockwait_mutex_nofp PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

add_executable(lockwait_kernel ${CMAKE_CURRENT_LIST_DIR}/lockwait_kernel.c)
target_compile_options(lockwait_kernel PRIVATE -O1 -g -fno-omit-frame-pointer)
target_link_libraries(lockwait_kernel PRIVATE Threads::Threads)
set_target_properties(lockwait_kernel PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

add_executable(lockwait_unit_test ${_lw_dir}/lockwait_unit_test.cpp)
target_compile_options(lockwait_unit_test PRIVATE ${LOUPE_WARNINGS})
target_link_libraries(lockwait_unit_test PRIVATE loupe_lockwait_support GTest::gtest_main)
gtest_discover_tests(lockwait_unit_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")

loupe_cli_e2e_test(lockwait_e2e_test SOURCE ${_lw_dir}/lockwait_e2e_test.cpp
  DEFINITIONS LOCKWAIT_MUTEX="$<TARGET_FILE:lockwait_mutex>"
              LOCKWAIT_MUTEX_NOFP="$<TARGET_FILE:lockwait_mutex_nofp>"
              LOCKWAIT_KERNEL="$<TARGET_FILE:lockwait_kernel>"
  DEPENDS lockwait_mutex lockwait_mutex_nofp lockwait_kernel loupe-lockwait PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})

# The session's process tree: forked workers' mutex contention, --no-follow.
loupe_cli_e2e_test(lockwait_tree_e2e_test SOURCE ${_lw_dir}/lockwait_tree_e2e_test.cpp
  DEPENDS tree_workload loupe-lockwait PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})

# The default unwind = "tables" on tests/unwind's direct_alloc_lock (pthread_mutex_lock and
# unlock called straight from lock_site and release_site), with and without frame pointers.
loupe_cli_e2e_test(lockwait_unwind_e2e_test SOURCE ${_lw_dir}/lockwait_unwind_e2e_test.cpp
  DEFINITIONS UNWIND_ALLOC_LOCK_NOFP="$<TARGET_FILE:unwind_direct_alloc_lock_nofp>"
              UNWIND_ALLOC_LOCK_FP="$<TARGET_FILE:unwind_direct_alloc_lock_fp>"
  DEPENDS unwind_direct_alloc_lock_nofp unwind_direct_alloc_lock_fp loupe-lockwait
  PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
