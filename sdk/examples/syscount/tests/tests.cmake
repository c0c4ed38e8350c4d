# syscount (the SDK example plugin) on the real kernel through the CLI: a workload with a
# known syscall profile, counted exactly.
add_executable(syscount_workload ${CMAKE_CURRENT_LIST_DIR}/syscount_workload.c)
target_compile_options(syscount_workload PRIVATE -O1 -Wall -Wextra)

add_executable(syscount_test ${CMAKE_CURRENT_LIST_DIR}/syscount_test.cpp)
target_compile_options(syscount_test PRIVATE ${LOUPE_WARNINGS})
target_compile_definitions(syscount_test PRIVATE
  SYSCOUNT_WORKLOAD="$<TARGET_FILE:syscount_workload>")
target_link_libraries(syscount_test PRIVATE GTest::gtest_main nlohmann_json::nlohmann_json)
add_dependencies(syscount_test syscount_workload loupe-syscount)

# One ctest entry: gtest_discover_tests would split LOUPE_TEST_ENV's list on its ';'.
add_test(NAME syscount_test COMMAND syscount_test)
set_tests_properties(syscount_test PROPERTIES
  ENVIRONMENT "${LOUPE_TEST_ENV}" LABELS "kernel" TIMEOUT 90)
