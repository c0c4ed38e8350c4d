# biolat tests: helpers without privileges, and CLI end-to-end runs on the real kernel
# (root + the loupe binary) that check O_DIRECT I/O of known count and size.
set(_bio_dir ${CMAKE_CURRENT_LIST_DIR})

add_executable(biolat_workload ${CMAKE_CURRENT_LIST_DIR}/biolat_workload.c)
add_executable(biolat_merge_workload ${CMAKE_CURRENT_LIST_DIR}/biolat_merge_workload.c)
target_link_libraries(biolat_merge_workload PRIVATE Threads::Threads)
set_target_properties(biolat_workload biolat_merge_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

add_executable(biolat_unit_test ${_bio_dir}/biolat_unit_test.cpp)
target_compile_options(biolat_unit_test PRIVATE ${LOUPE_WARNINGS})
target_link_libraries(biolat_unit_test PRIVATE loupe_biolat_support GTest::gtest_main)
gtest_discover_tests(biolat_unit_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")

loupe_cli_e2e_test(biolat_e2e_test SOURCE ${_bio_dir}/biolat_e2e_test.cpp
  DEFINITIONS BIOLAT_WORKLOAD="$<TARGET_FILE:biolat_workload>"
              BIOLAT_MERGE_WORKLOAD="$<TARGET_FILE:biolat_merge_workload>"
  DEPENDS biolat_workload biolat_merge_workload loupe-biolat
  # Two cases load, configure and unload the one scsi_debug disk a kernel can have.
  PROPERTIES RESOURCE_LOCK scsi_debug)
