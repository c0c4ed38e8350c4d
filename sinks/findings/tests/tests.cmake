# findings on real runs through the CLI (root + the loupe binary): the offcpu workload's
# halves (a spinning function, a sleeping one) and a latency tail. The rules read the
# report, the same on every kernel: host only (label "report").
loupe_cli_e2e_test(findings_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/findings_e2e_test.cpp
  LABEL report
  DEFINITIONS OFFCPU_WORKLOAD="$<TARGET_FILE:offcpu_workload>"
  DEPENDS offcpu_workload loupe-findings loupe-cpusample loupe-offcpu loupe-latency
  PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
