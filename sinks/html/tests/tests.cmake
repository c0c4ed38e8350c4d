# html sink: dlopen the built library, drive it with the fake host, then load the report
# in headless Chromium (its own #selftest, console errors, a screenshot kept in the build
# dir as a test artifact).
add_executable(sinks_html_test ${CMAKE_CURRENT_LIST_DIR}/html_sink_test.cpp)
target_include_directories(sinks_html_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
target_link_libraries(sinks_html_test PRIVATE loupe::sdk GTest::gtest_main
  nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS})
target_compile_options(sinks_html_test PRIVATE ${LOUPE_WARNINGS})
target_compile_definitions(sinks_html_test PRIVATE
  LOUPE_HTML_SO="$<TARGET_FILE:loupe-html>"
  LOUPE_ARTIFACT_DIR="${CMAKE_BINARY_DIR}/test-artifacts")
add_dependencies(sinks_html_test loupe-html)
gtest_discover_tests(sinks_html_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}" TIMEOUT 90)

# The page's scripts parse (`node --check`): a syntax error would otherwise show only as a
# failed self-test in a browser test, or not at all where Chromium is absent.
file(GLOB _html_page_js CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/sinks/html/page/*.js)
set(_node_check [[
command -v node >/dev/null || { echo "SKIP: node is not installed (Debian package nodejs): $1 not checked"; exit 77; }
exec node --check "$1"]])
foreach(_js ${_html_page_js})
  get_filename_component(_stem ${_js} NAME_WE)
  add_test(NAME sinks_html_page_js_${_stem} COMMAND sh -c "${_node_check}" sh ${_js})
  set_tests_properties(sinks_html_page_js_${_stem} PROPERTIES LABELS unit SKIP_RETURN_CODE 77
    TIMEOUT 30)
endforeach()

# The report of real runs through the CLI (root + the loupe binary): cpusample and offcpu
# on a workload that spins then sleeps (findings, sections, search, label fit at three
# widths), and a differential report of a workload whose CPU time moves from one function
# to another between two runs.
add_executable(shift_workload ${CMAKE_CURRENT_LIST_DIR}/shift_workload.c)
# Frame pointers for the stacks; no sibling calls, or spin_a's frame would vanish into a
# jump to burn().
target_compile_options(shift_workload PRIVATE -O1 -g -fno-omit-frame-pointer
  -fno-optimize-sibling-calls)
set_target_properties(shift_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/workloads)
loupe_cli_e2e_test(html_e2e_test SOURCE ${CMAKE_CURRENT_LIST_DIR}/html_e2e_test.cpp
  DEFINITIONS OFFCPU_WORKLOAD="$<TARGET_FILE:offcpu_workload>"
    SHIFT_WORKLOAD="$<TARGET_FILE:shift_workload>"
    LOUPE_ARTIFACT_DIR="${CMAKE_BINARY_DIR}/test-artifacts"
  DEPENDS offcpu_workload shift_workload loupe-html loupe-findings loupe-cpusample loupe-offcpu
  # Not `kernel`: what it checks is the page in a browser, the same on every kernel, and
  # Chromium under the guests' emulation takes minutes per page. The host runs it.
  LABEL browser PROPERTIES TIMEOUT 240)
