# pprof sink: dlopen the built library, drive it with the fake host, then read its files
# back two ways: libprotobuf against the vendored schema, and `go tool pprof -top`.
if(TARGET loupe-pprof)
find_package(Protobuf REQUIRED)
find_package(ZLIB REQUIRED)
# The schema as a FileDescriptorSet: the test builds a private descriptor pool from it.
set(_desc ${CMAKE_CURRENT_BINARY_DIR}/profile.desc)
add_custom_command(OUTPUT ${_desc}
  COMMAND protobuf::protoc --descriptor_set_out=${_desc}
          -I ${CMAKE_SOURCE_DIR}/sinks/pprof/proto profile.proto
  DEPENDS ${CMAKE_SOURCE_DIR}/sinks/pprof/proto/profile.proto
  COMMENT "profile.proto -> profile.desc")
add_custom_target(sinks_pprof_desc DEPENDS ${_desc})
add_executable(sinks_pprof_test ${CMAKE_CURRENT_LIST_DIR}/pprof_sink_test.cpp)
add_dependencies(sinks_pprof_test sinks_pprof_desc)
target_include_directories(sinks_pprof_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
target_link_libraries(sinks_pprof_test PRIVATE loupe::sdk GTest::gtest_main protobuf::libprotobuf
  ZLIB::ZLIB nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS})
target_compile_options(sinks_pprof_test PRIVATE ${LOUPE_WARNINGS})
target_compile_definitions(sinks_pprof_test PRIVATE
  LOUPE_PPROF_SO="$<TARGET_FILE:loupe-pprof>"
  LOUPE_PROFILE_DESC="${_desc}")
add_dependencies(sinks_pprof_test loupe-pprof)
gtest_discover_tests(sinks_pprof_test PROPERTIES LABELS unit ENVIRONMENT "${LOUPE_TEST_ENV}")
endif()
