# console sink: dlopen the built library and drive it through its C ABI with the fake host
# of tests/support, then assert on what it wrote.
add_executable(sinks_console_test ${CMAKE_CURRENT_LIST_DIR}/console_sink_test.cpp)
# report_text.hpp is header-only: its line fitting is tested directly.
target_include_directories(sinks_console_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/support
  ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(sinks_console_test PRIVATE loupe::sdk GTest::gtest_main nlohmann_json::nlohmann_json
  ${CMAKE_DL_LIBS})
target_compile_options(sinks_console_test PRIVATE ${LOUPE_WARNINGS})
target_compile_definitions(sinks_console_test PRIVATE LOUPE_CONSOLE_SO="$<TARGET_FILE:loupe-console>")
add_dependencies(sinks_console_test loupe-console)
gtest_discover_tests(sinks_console_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")

# Real sessions through the CLI: the bundled latency profile's verdict on `-- true` and on a
# `--pid` sleeper, and interval reports that keep one window (kernel tier).
if(TARGET loupe-latency)
loupe_cli_e2e_test(console_report_e2e_test
  SOURCE ${CMAKE_CURRENT_LIST_DIR}/console_report_e2e_test.cpp
  DEPENDS loupe-console loupe-latency
  DEFINITIONS LOUPE_PROFILES_DIR="${CMAKE_SOURCE_DIR}/profiles" PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
endif()

# Every bundled profile's report on a short command of Debian's binaries fits 120 columns;
# files.toml's tables and histograms honour the console's top and say what they left out
# (kernel tier: real sessions).
set(_console_width_plugins)
foreach(_p loupe-console loupe-jsonl loupe-folded loupe-fileio loupe-latency loupe-cpusample
        loupe-offcpu loupe-memalloc loupe-biolat loupe-lockwait loupe-tcp loupe-jitregions
        loupe-syscount)
  if(TARGET ${_p})
    list(APPEND _console_width_plugins ${_p})
  endif()
endforeach()
if(TARGET loupe-fileio)
# Report layout does not depend on the kernel: it runs on the host only (label "report",
# not "kernel"), sparing the emulated guests two minutes of every bundled profile.
loupe_cli_e2e_test(console_width_e2e_test
  SOURCE ${CMAKE_CURRENT_LIST_DIR}/console_width_e2e_test.cpp
  LABEL report
  DEPENDS ${_console_width_plugins}
  DEFINITIONS LOUPE_PROFILES_DIR="${CMAKE_SOURCE_DIR}/profiles" PROPERTIES TIMEOUT ${LOUPE_KERNEL_TEST_TIMEOUT})
endif()
