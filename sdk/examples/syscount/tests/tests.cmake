# syscount (the SDK example plugin) on the real kernel through the CLI: a workload with a
# known syscall profile, counted exactly.
add_executable(syscount_workload ${CMAKE_CURRENT_LIST_DIR}/syscount_workload.c)
target_compile_options(syscount_workload PRIVATE -O1 -Wall -Wextra)

loupe_cli_e2e_test(syscount_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/syscount_test.cpp
  DEFINITIONS SYSCOUNT_WORKLOAD="$<TARGET_FILE:syscount_workload>"
  DEPENDS syscount_workload loupe-syscount ONE_ENTRY PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
