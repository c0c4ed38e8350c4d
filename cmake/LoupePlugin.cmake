# loupe_add_plugin(<name> SOURCES src... [BPF file.bpf.c...] [LIBS lib...] [NO_INSTALL])
#
# Builds a loupe plugin (profiler or sink): a MODULE library named loupe-<name>.so with
# hidden visibility (only the entry symbol is exported), linked against the SDK, with one
# skeleton target per BPF source. Works in-tree and out of tree (find_package(loupe)).
include_guard(GLOBAL)

function(loupe_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIR" "SOURCES;BPF;LIBS" ${ARGN})
  set(target loupe-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  elseif(DEFINED LOUPE_PLUGIN_BUILD_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${LOUPE_PLUGIN_BUILD_DIR})
  endif()
  if(TARGET loupe::sdk)
    target_link_libraries(${target} PRIVATE loupe::sdk)
  else()
    target_link_libraries(${target} PRIVATE loupe_sdk)
  endif()
  if(DEFINED LOUPE_WARNINGS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${LOUPE_WARNINGS}>)
  endif()
  # Plugins must not leak undefined symbols the host would have to provide.
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  # Hidden visibility does not cover libstdc++ template instantiations (namespace std is
  # declared visibility("default")), so they would be exported as weak/unique symbols and
  # could bind across plugins. The version script leaves the entry as the only export.
  set(_vscript ${CMAKE_CURRENT_BINARY_DIR}/${target}.exports.map)
  file(CONFIGURE OUTPUT ${_vscript}
       CONTENT "{\n  global: loupe_plugin_entry;\n  local: *;\n};\n")
  target_link_options(${target} PRIVATE -Wl,--version-script=${_vscript})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${_vscript})
  set(_i 0)
  foreach(src ${ARG_BPF})
    loupe_bpf_skeleton(${target}_skel${_i} ${src})
    target_link_libraries(${target} PRIVATE ${target}_skel${_i})
    math(EXPR _i "${_i}+1")
  endforeach()
  if(ARG_LIBS)
    target_link_libraries(${target} PRIVATE ${ARG_LIBS})
  endif()
  if(NOT ARG_NO_INSTALL AND DEFINED LOUPE_PLUGIN_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${LOUPE_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
