# fileio on the real kernel through the CLI (root + the loupe binary): a workload with known
# file activity, counted exactly per path and operation.
add_executable(fileio_workload ${CMAKE_CURRENT_LIST_DIR}/fileio_workload.c)
set_target_properties(fileio_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

loupe_cli_e2e_test(fileio_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/fileio_e2e_test.cpp
  DEFINITIONS FILEIO_WORKLOAD="$<TARGET_FILE:fileio_workload>"
  DEPENDS fileio_workload loupe-fileio PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})

# Slow-event stacks under the default unwind = "tables": a workload without frame pointers
# whose slow reads and writes come straight from named sites (tests/unwind), and Debian's
# binaries under profiles/files.toml.
loupe_cli_e2e_test(fileio_unwind_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/fileio_unwind_e2e_test.cpp
  DEFINITIONS SLOW_CALLS_WORKLOAD="$<TARGET_FILE:unwind_slow_calls_workload>"
  LOUPE_PROFILES_DIR="${CMAKE_SOURCE_DIR}/profiles"
  DEPENDS unwind_slow_calls_workload loupe-fileio PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT} RUN_SERIAL TRUE)
