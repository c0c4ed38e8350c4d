# Installs the CMake package so out-of-tree plugins can `find_package(loupe)` and call
# loupe_add_plugin() exactly as in-tree plugins do.
include(CMakePackageConfigHelpers)

install(EXPORT loupeTargets NAMESPACE loupe:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/loupe
  COMPONENT sdk)
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/loupeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/loupeConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/loupe
  PATH_VARS CMAKE_INSTALL_DATADIR CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/loupeConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${CMAKE_BINARY_DIR}/loupeConfig.cmake
  ${CMAKE_BINARY_DIR}/loupeConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/LoupeBpf.cmake
  ${CMAKE_CURRENT_LIST_DIR}/LoupePlugin.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/loupe
  COMPONENT sdk)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/profiles/ DESTINATION ${LOUPE_PROFILE_INSTALL_DIR}
  FILES_MATCHING PATTERN "*.toml")

# Docs under share/doc/loupe in the source tree's layout, so their relative links still
# lead somewhere: README.md, docs/, and each plugin's, sink's and library's own README.
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
  FILES_MATCHING PATTERN "*.md")
file(GLOB_RECURSE _loupe_readmes RELATIVE ${CMAKE_SOURCE_DIR}
  ${CMAKE_SOURCE_DIR}/plugins/README.md ${CMAKE_SOURCE_DIR}/sinks/README.md
  ${CMAKE_SOURCE_DIR}/sdk/README.md ${CMAKE_SOURCE_DIR}/report/README.md
  ${CMAKE_SOURCE_DIR}/core/include/README.md)
foreach(_readme ${_loupe_readmes})
  get_filename_component(_dir ${_readme} DIRECTORY)
  install(FILES ${CMAKE_SOURCE_DIR}/${_readme} DESTINATION ${CMAKE_INSTALL_DOCDIR}/${_dir})
endforeach()

# loupe.service (packaging/loupe.service.in) names the installed loupe, so it is written
# when installing, with the prefix of that install (/usr for the package, --prefix else).
install(CODE "
  set(LOUPE_EXECUTABLE \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/loupe\")
  set(LOUPE_DOCDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}\")
  configure_file(${CMAKE_SOURCE_DIR}/packaging/loupe.service.in
    ${CMAKE_BINARY_DIR}/packaging/loupe.service @ONLY)")
install(FILES ${CMAKE_BINARY_DIR}/packaging/loupe.service DESTINATION lib/systemd/system)
