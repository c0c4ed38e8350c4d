# biolat tests: helpers without privileges, and CLI end-to-end runs on the real kernel
# (root + the loupe binary) that check O_DIRECT I/O of known count and size.
set(_bio_dir ${CMAKE_CURRENT_LIST_DIR})

add_executable(biolat_workload ${CMAKE_CURRENT_LIST_DIR}/biolat_workload.c)
set_target_properties(biolat_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

add_executable(biolat_unit_test ${_bio_dir}/biolat_unit_test.cpp)
target_compile_options(biolat_unit_test PRIVATE ${LOUPE_WARNINGS})
target_link_libraries(biolat_unit_test PRIVATE loupe_biolat_support GTest::gtest_main)
gtest_discover_tests(biolat_unit_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")

add_executable(biolat_e2e_test ${_bio_dir}/biolat_e2e_test.cpp)
target_compile_options(biolat_e2e_test PRIVATE ${LOUPE_WARNINGS})
target_link_libraries(biolat_e2e_test PRIVATE GTest::gtest_main nlohmann_json::nlohmann_json)
target_compile_definitions(biolat_e2e_test PRIVATE
  BIOLAT_WORKLOAD="$<TARGET_FILE:biolat_workload>")
add_dependencies(biolat_e2e_test biolat_workload loupe-biolat)
gtest_discover_tests(biolat_e2e_test PROPERTIES LABELS kernel ENVIRONMENT "${LOUPE_TEST_ENV}")
