# tcp on the real kernel through the CLI (root + the loupe binary): loopback connections
# with known bytes, a refused one and a reset one.
add_executable(tcp_workload ${CMAKE_CURRENT_LIST_DIR}/tcp_workload.c)
target_link_libraries(tcp_workload PRIVATE Threads::Threads)
set_target_properties(tcp_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

loupe_cli_e2e_test(tcp_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/tcp_e2e_test.cpp
  DEFINITIONS TCP_WORKLOAD="$<TARGET_FILE:tcp_workload>"
  DEPENDS tcp_workload loupe-tcp PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})

# Pre-fork servers: connections accepted by a listener and served by forked children or by
# workers the fd was passed to; and a connection table set tiny against many open at once.
add_executable(tcp_server_workload ${CMAKE_CURRENT_LIST_DIR}/tcp_server_workload.c)
set_target_properties(tcp_server_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

loupe_cli_e2e_test(tcp_server_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/tcp_server_e2e_test.cpp
  DEFINITIONS TCP_SERVER_WORKLOAD="$<TARGET_FILE:tcp_server_workload>"
  DEPENDS tcp_server_workload loupe-tcp PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
