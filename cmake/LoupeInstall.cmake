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
install(DIRECTORY ${CMAKE_SOURCE_DIR}/profiles/ DESTINATION ${LOUPE_PROFILE_INSTALL_DIR})
