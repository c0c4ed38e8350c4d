# loupe_bpf_skeleton(<target> <file.bpf.c> [INCLUDES dir...])
#
# Compiles a BPF C file with clang (-target bpf, CO-RE, -g for BTF) into <name>.bpf.o and
# generates <name>.skel.h with bpftool. <target> is an INTERFACE library: link it and
# `#include "<name>.skel.h"`.
#
# vmlinux.h comes from the running kernel's BTF when present (so CO-RE types match this
# machine), else from the checked-in copy in bpf/vmlinux/.
include_guard(GLOBAL)

find_program(LOUPE_CLANG NAMES clang clang-14 REQUIRED)
find_program(LOUPE_BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
find_program(LOUPE_LLVM_STRIP NAMES llvm-strip llvm-strip-14)

set(LOUPE_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpf-gen)
file(MAKE_DIRECTORY ${LOUPE_BPF_GEN_DIR})
if(NOT DEFINED LOUPE_CHECKED_IN_VMLINUX)
  set(LOUPE_CHECKED_IN_VMLINUX ${CMAKE_CURRENT_LIST_DIR}/../bpf/vmlinux/vmlinux.h)
endif()
set(_checked_in_vmlinux ${LOUPE_CHECKED_IN_VMLINUX})

if(EXISTS ${LOUPE_VMLINUX_BTF})
  add_custom_command(
    OUTPUT ${LOUPE_BPF_GEN_DIR}/vmlinux.h
    COMMAND ${LOUPE_BPFTOOL} btf dump file ${LOUPE_VMLINUX_BTF} format c > ${LOUPE_BPF_GEN_DIR}/vmlinux.h.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${LOUPE_BPF_GEN_DIR}/vmlinux.h.tmp ${LOUPE_BPF_GEN_DIR}/vmlinux.h
    COMMENT "Generating vmlinux.h from ${LOUPE_VMLINUX_BTF}"
    VERBATIM)
else()
  message(STATUS "loupe: ${LOUPE_VMLINUX_BTF} absent, using the checked-in vmlinux.h")
  configure_file(${_checked_in_vmlinux} ${LOUPE_BPF_GEN_DIR}/vmlinux.h COPYONLY)
endif()
if(NOT TARGET loupe_vmlinux_h)
  add_custom_target(loupe_vmlinux_h DEPENDS ${LOUPE_BPF_GEN_DIR}/vmlinux.h)
endif()

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(LOUPE_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(LOUPE_BPF_ARCH arm64)
else()
  set(LOUPE_BPF_ARCH ${CMAKE_SYSTEM_PROCESSOR})
endif()

# The installed package (loupeConfig.cmake) sets these before including this file.
if(NOT DEFINED LOUPE_BPF_INCLUDE_DIR)
  set(LOUPE_BPF_INCLUDE_DIR ${CMAKE_CURRENT_LIST_DIR}/../bpf/include)
endif()
if(NOT DEFINED LOUPE_SDK_INCLUDE_DIR)
  set(LOUPE_SDK_INCLUDE_DIR ${CMAKE_CURRENT_LIST_DIR}/../sdk/include)
endif()

function(loupe_bpf_skeleton target source)
  cmake_parse_arguments(ARG "" "" "INCLUDES" ${ARGN})
  get_filename_component(_abs ${source} ABSOLUTE)
  get_filename_component(_name ${source} NAME_WE)   # foo.bpf.c -> foo
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/bpf)
  file(MAKE_DIRECTORY ${_out})
  set(_obj ${_out}/${_name}.bpf.o)
  set(_skel ${_out}/${_name}.skel.h)
  set(_incs -I${LOUPE_BPF_GEN_DIR} -I${LOUPE_BPF_INCLUDE_DIR} -I${LOUPE_SDK_INCLUDE_DIR}
            -I${CMAKE_CURRENT_SOURCE_DIR})
  foreach(i ${ARG_INCLUDES})
    list(APPEND _incs -I${i})
  endforeach()
  # libbpf's usdt.bpf.h includes <linux/errno.h>, whose <asm/errno.h> lives in the
  # multiarch directory the bpf target does not search (macros only: no clash with
  # vmlinux.h's types). Searched last, so vmlinux.h and our headers always win.
  if(CMAKE_LIBRARY_ARCHITECTURE AND EXISTS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE})
    list(APPEND _incs -idirafter /usr/include/${CMAKE_LIBRARY_ARCHITECTURE})
  endif()
  file(GLOB _bpf_headers ${LOUPE_BPF_INCLUDE_DIR}/loupe/*.h ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
  add_custom_command(
    OUTPUT ${_obj}
    COMMAND ${LOUPE_CLANG} -g -O2 -Wall -target bpf -D__TARGET_ARCH_${LOUPE_BPF_ARCH}
            ${_incs} -c ${_abs} -o ${_obj}
    DEPENDS ${_abs} ${_bpf_headers} loupe_vmlinux_h ${LOUPE_BPF_GEN_DIR}/vmlinux.h
    COMMENT "BPF ${_name}.bpf.c"
    VERBATIM)
  add_custom_command(
    OUTPUT ${_skel}
    COMMAND ${LOUPE_BPFTOOL} gen skeleton ${_obj} name ${_name}_bpf > ${_skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${_skel}.tmp ${_skel}
    DEPENDS ${_obj}
    COMMENT "Skeleton ${_name}.skel.h"
    VERBATIM)
  add_custom_target(${target}_gen DEPENDS ${_skel})
  add_library(${target} INTERFACE)
  add_dependencies(${target} ${target}_gen)
  target_include_directories(${target} INTERFACE ${_out})
  target_link_libraries(${target} INTERFACE PkgConfig::LIBBPF)
endfunction()
