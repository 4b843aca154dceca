# Install rules and the CMake package: headers, the library (static, or shared with
# SAMEBITS_SHARED=ON), samebitsConfig.cmake and its version file under lib/cmake/samebits, and
# the samebits program when it is built. The application library is not installed.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(SAMEBITS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/samebits)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/samebits DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        PATTERN "app" EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/extras/gtest/samebits
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/samebits_gtest)
install(TARGETS samebits samebits_gtest EXPORT samebitsTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET samebits_cli)
  install(TARGETS samebits_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT samebitsTargets NAMESPACE samebits:: DESTINATION ${SAMEBITS_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/samebitsConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/samebitsConfig.cmake
                              INSTALL_DESTINATION ${SAMEBITS_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/samebitsConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/samebitsConfig.cmake
              ${PROJECT_BINARY_DIR}/samebitsConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindxxHash.cmake
        DESTINATION ${SAMEBITS_CMAKE_DIR})
