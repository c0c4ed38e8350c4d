# offcpu on the real kernel through the CLI (root + the loupe binary): a workload that
# measures its own blocking, every hook flavour. Serial: the run-queue test needs a CPU
# that no other test keeps busy.
add_executable(offcpu_workload ${CMAKE_CURRENT_LIST_DIR}/offcpu_workload.c)
# Frame pointers, and no sibling calls: spin_in_crowd must stay on the stack.
target_compile_options(offcpu_workload PRIVATE -O1 -g -fno-omit-frame-pointer
  -fno-optimize-sibling-calls)
target_link_libraries(offcpu_workload PRIVATE Threads::Threads)
set_target_properties(offcpu_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

loupe_cli_e2e_test(offcpu_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/offcpu_e2e_test.cpp
  DEFINITIONS OFFCPU_WORKLOAD="$<TARGET_FILE:offcpu_workload>"
  DEPENDS offcpu_workload loupe-offcpu PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT} RUN_SERIAL TRUE)

# unwind = "tables" on tests/unwind's direct_workload, with and without frame pointers.
loupe_cli_e2e_test(offcpu_unwind_e2e_test
  SOURCE ${CMAKE_CURRENT_LIST_DIR}/offcpu_unwind_e2e_test.cpp
  DEFINITIONS UNWIND_WORKLOAD_NOFP="$<TARGET_FILE:unwind_direct_workload_nofp>"
              UNWIND_WORKLOAD_FP="$<TARGET_FILE:unwind_direct_workload_fp>"
  DEPENDS unwind_direct_workload_nofp unwind_direct_workload_fp loupe-offcpu
  PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT} RUN_SERIAL TRUE)
