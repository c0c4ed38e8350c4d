# Latency profiler tests: unit tests of the helpers (no privileges), in-process kernel
# tests through a fake host (root), and CLI end-to-end tests (root + the loupe binary).
set(_lat_dir ${CMAKE_CURRENT_LIST_DIR})

add_executable(latency_workload ${CMAKE_CURRENT_LIST_DIR}/latency_workload.c)
# -O0 and noinline keep one real call per iteration for uprobes; symbols stay in.
target_compile_options(latency_workload PRIVATE -O0 -g -fno-omit-frame-pointer)
set_target_properties(latency_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

add_executable(latency_unit_test ${_lat_dir}/latency_unit_test.cpp ${_lat_dir}/latency_fake_host.cpp)
target_compile_options(latency_unit_test PRIVATE ${LOUPE_WARNINGS})
target_link_libraries(latency_unit_test PRIVATE loupe_latency_support GTest::gtest_main PkgConfig::LIBBPF)
target_compile_definitions(latency_unit_test PRIVATE
  LATENCY_WORKLOAD="$<TARGET_FILE:latency_workload>")
add_dependencies(latency_unit_test latency_workload)
gtest_discover_tests(latency_unit_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")

add_executable(latency_kernel_test ${_lat_dir}/latency_kernel_test.cpp ${_lat_dir}/latency_fake_host.cpp)
target_compile_options(latency_kernel_test PRIVATE ${LOUPE_WARNINGS})
target_link_libraries(latency_kernel_test PRIVATE loupe_latency_support GTest::gtest_main
  PkgConfig::LIBBPF ${CMAKE_DL_LIBS})
target_compile_definitions(latency_kernel_test PRIVATE
  LATENCY_WORKLOAD="$<TARGET_FILE:latency_workload>"
  LATENCY_PLUGIN="$<TARGET_FILE:loupe-latency>")
add_dependencies(latency_kernel_test latency_workload loupe-latency)
gtest_discover_tests(latency_kernel_test PROPERTIES LABELS kernel ENVIRONMENT "${LOUPE_TEST_ENV}" RUN_SERIAL TRUE)

loupe_cli_e2e_test(latency_e2e_test SOURCE ${_lat_dir}/latency_e2e_test.cpp
  DEFINITIONS LATENCY_WORKLOAD="$<TARGET_FILE:latency_workload>"
  DEPENDS latency_workload loupe-latency PROPERTIES RUN_SERIAL TRUE)

# The session's process tree: forked workers, a shell pipeline, --no-follow, --pid.
loupe_cli_e2e_test(latency_tree_e2e_test SOURCE ${_lat_dir}/latency_tree_e2e_test.cpp
  DEPENDS tree_workload loupe-latency PROPERTIES RUN_SERIAL TRUE)

# USDT targets: a C workload with its own SDT probes (two sites of one name, a semaphore),
# and Debian's python3.11 (GC and import probes).
add_executable(usdt_workload ${CMAKE_CURRENT_LIST_DIR}/usdt_workload.c)
target_compile_options(usdt_workload PRIVATE -O2 -g)
set_target_properties(usdt_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)
loupe_cli_e2e_test(latency_usdt_e2e_test SOURCE ${_lat_dir}/latency_usdt_e2e_test.cpp
  DEFINITIONS USDT_WORKLOAD="$<TARGET_FILE:usdt_workload>"
  DEPENDS usdt_workload loupe-latency PROPERTIES RUN_SERIAL TRUE)

# A forking server (one backend process per connection, 1000 of them) firing USDT probes:
# exact per-site counts, sites named from the file, bounded breakdowns that count their
# losses; and a probe on a binary the target never ran.
add_executable(usdt_fork_workload ${CMAKE_CURRENT_LIST_DIR}/usdt_fork_workload.c)
target_compile_options(usdt_fork_workload PRIVATE -O2 -g)
set_target_properties(usdt_fork_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)
loupe_cli_e2e_test(latency_usdt_fork_e2e_test SOURCE ${_lat_dir}/latency_usdt_fork_e2e_test.cpp
  DEFINITIONS USDT_FORK_WORKLOAD="$<TARGET_FILE:usdt_fork_workload>"
  USDT_WORKLOAD="$<TARGET_FILE:usdt_workload>"
  DEPENDS usdt_fork_workload usdt_workload loupe-latency PROPERTIES RUN_SERIAL TRUE)

# Outlier stacks under the default unwind = "tables": a workload without frame pointers whose
# slow read/write/nanosleep come straight from named sites (tests/unwind), and Debian's
# binaries under profiles/latency.toml.
loupe_cli_e2e_test(latency_unwind_e2e_test SOURCE ${_lat_dir}/latency_unwind_e2e_test.cpp
  DEFINITIONS SLOW_CALLS_WORKLOAD="$<TARGET_FILE:unwind_slow_calls_workload>"
  LOUPE_PROFILES_DIR="${CMAKE_SOURCE_DIR}/profiles"
  DEPENDS unwind_slow_calls_workload loupe-latency PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT} RUN_SERIAL TRUE)
