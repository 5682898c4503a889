# `cmake --install build --prefix P`: the tandem CLI in P/bin, the libraries of the public
# API in P/lib, its headers under P/include/tandem (laid out as in the tree, so that their
# own includes, "ir/ir.h", resolve against that one root), and the CMake package in
# P/lib/cmake/Tandem: TandemConfig.cmake, its version file and the exported targets
# (Tandem::tandem and the libraries it links).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# backend/CMakeLists.txt sets TANDEM_HAVE_MPI when the build uses MPI.
if(NOT TANDEM_HAVE_MPI)
  set(TANDEM_HAVE_MPI OFF)
endif()
set(TANDEM_INSTALL_INCLUDE_DIR ${CMAKE_INSTALL_INCLUDEDIR}/tandem)
set(TANDEM_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tandem)

# Every library Tandem::tandem links, which a static library's users link too.
set(TANDEM_EXPORTED_LIBRARIES tandem_api tandem_train tandem_frontend tandem_passes
    tandem_runtime tandem_backends tandem_backend_cpu tandem_backend_api tandem_targets tandem_ir)
if(TANDEM_HAVE_CUDA)
  list(APPEND TANDEM_EXPORTED_LIBRARIES tandem_backend_cuda)
endif()
# An installed program's includes resolve against the install's root, as the tree's
# against the source and generated directories.
target_include_directories(tandem_ir PUBLIC $<INSTALL_INTERFACE:${TANDEM_INSTALL_INCLUDE_DIR}>)

install(TARGETS ${TANDEM_EXPORTED_LIBRARIES} EXPORT TandemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS tandem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(header ${TANDEM_PUBLIC_HEADERS})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${TANDEM_INSTALL_INCLUDE_DIR}/${dir})
endforeach()
# Generated from ir/ops.td: the Op enum that ir/op_info.h includes, the optimizer configs
# that frontend/model.h's TrainingDefaults holds.
install(FILES ${TANDEM_GENERATED_DIR}/ir/op_enum.h ${TANDEM_GENERATED_DIR}/ir/optimizer_configs.h
        DESTINATION ${TANDEM_INSTALL_INCLUDE_DIR}/ir)

install(EXPORT TandemTargets NAMESPACE Tandem:: DESTINATION ${TANDEM_INSTALL_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/TandemConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/TandemConfig.cmake
                              INSTALL_DESTINATION ${TANDEM_INSTALL_CMAKE_DIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TandemConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TandemConfig.cmake
              ${PROJECT_BINARY_DIR}/TandemConfigVersion.cmake
        DESTINATION ${TANDEM_INSTALL_CMAKE_DIR})
