# cpusample: CLI end-to-end tests on the real kernel (root + the loupe binary). The sampler
# helpers are the SDK's (loupe/sdk/perf_event.hpp), unit-tested in sdk_helpers_tests.cmake.
add_executable(cpu_spin ${CMAKE_CURRENT_LIST_DIR}/cpu_spin.c)
# Frame pointers so user stacks walk to main.
target_compile_options(cpu_spin PRIVATE -O1 -fno-omit-frame-pointer -Wall -Wextra)
set_target_properties(cpu_spin PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)

loupe_cli_e2e_test(cpusample_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/cpusample_e2e_test.cpp
  DEFINITIONS CPU_SPIN_WORKLOAD="$<TARGET_FILE:cpu_spin>"
  DEPENDS cpu_spin loupe-cpusample ONE_ENTRY PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})

# The session's process tree: forked workers' samples by pid and comm, --no-follow.
loupe_cli_e2e_test(cpusample_tree_e2e_test
  SOURCE ${CMAKE_CURRENT_LIST_DIR}/cpusample_tree_e2e_test.cpp
  DEPENDS tree_workload loupe-cpusample PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
# unwind = "dwarf" on Debian's own xz (no frame pointers), against unwind = "fp". One entry:
# its system-wide case must not see another case's xz. Its four cases take 70 s in a quiet
# guest and took over 300 s under two hogs beside a busy host: three hang timeouts' worth.
# Run alone: its system-wide session builds the tables of every process of the machine,
# one file at a time on the session's thread, and a neighbouring test's JVM (libjvm's
# tables take seconds to build under emulation) kept it from reaching xz within 5 s.
loupe_cli_e2e_test(cpusample_dwarf_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/cpusample_dwarf_e2e_test.cpp
  DEFINITIONS CPU_SPIN_WORKLOAD="$<TARGET_FILE:cpu_spin>"
  DEPENDS cpu_spin loupe-cpusample ONE_ENTRY PROPERTIES TIMEOUT 900 RUN_SERIAL TRUE)
# Java methods of a HotSpot JVM started without flags, named through the perf map the
# session asks it for ([runtimes.hotspot] perf_map). TwoHot.java is compiled with javac at test
# time, into the build dir; the tests skip without java and javac. Host only (label jvm):
# what they test, the JVM's attach listener and its perf map, is the same on every kernel,
# and under emulation the JVM's start-up takes most of a run (6.1 and 6.12 guests: 53-54 %
# of the main thread's samples in the two methods, 99 % on the host). Alone: each case
# starts a JVM, whose start-up takes both cores for a second.
loupe_cli_e2e_test(cpusample_java_e2e_test
  SOURCE ${CMAKE_CURRENT_LIST_DIR}/cpusample_java_e2e_test.cpp
  DEFINITIONS JAVA_SOURCE="${CMAKE_CURRENT_LIST_DIR}/TwoHot.java ${CMAKE_CURRENT_LIST_DIR}/Inlined.java"
              JAVA_CLASSES_DIR="${CMAKE_BINARY_DIR}/tests/workloads/java"
  LABEL jvm DEPENDS loupe-cpusample PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT} RUN_SERIAL TRUE)
# JavaScript functions of a Node.js program started without any flag, named from V8's own
# structures (runtimes/v8). Every kernel: the walk's V8 step is verified by each. Alone: a
# node process takes a core, and the shares are held to its own clock.
loupe_cli_e2e_test(cpusample_node_e2e_test
  SOURCE ${CMAKE_CURRENT_LIST_DIR}/cpusample_node_e2e_test.cpp
  DEFINITIONS TWO_HOT_JS="${CMAKE_CURRENT_LIST_DIR}/two_hot.js"
              INLINED_JS="${CMAKE_CURRENT_LIST_DIR}/inlined.js"
  DEPENDS loupe-cpusample PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT} RUN_SERIAL TRUE)
