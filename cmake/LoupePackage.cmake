# `cmake --build build --target package`: build/loupe_<version>_amd64.deb, one package with
# everything `cmake --install` installs (CLI, plugins, sinks, profiles, SDK headers and CMake
# package, BPF helpers, docs, the systemd unit), under /usr. tests/package checks its contents.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME loupe)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
  "A small core loads profiler and sink plugins (shared libraries against a stable C ABI),\n\
checks them and the kernel, owns the BPF ring buffers and counts every record it could not\n\
deliver. Includes the loupe CLI, the bundled profilers and sinks, ready profiles (loupe\n\
profiles), the plugin SDK with its CMake package, and loupe.service (the agent profile).")
set(CPACK_PACKAGE_CONTACT "loupe maintainers <loupe@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# loupe_0.1.0_amd64.deb: Debian's own file name scheme.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Run-time dependencies from the binaries themselves (dpkg-shlibdeps: libbpf1, libelf1,
# libdw1, ...), so they follow what the build links, never a list kept by hand.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The engine for embedders (libloupe.so in /usr/lib) gets a shlibs file, so a package built
# against it depends on this one.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# Stripped, as Debian ships binaries: with the RelWithDebInfo debug info the .deb was 64 MB
# (257 MiB installed), stripped 6.9 MB.
set(CPACK_STRIP_FILES ON)
# Building a plugin against the SDK (find_package(loupe)) needs these; the CLI does not.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "cmake, pkg-config, libbpf-dev, clang, bpftool")
include(CPack)
