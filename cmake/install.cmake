# `cmake --install`: headers, the library, quotactl, the SQL, and the files through which
# find_package(quota) and pkg-config find them, all in GNUInstallDirs places:
#
#   include/quota/*.h                       the API (engine.h first; quota.h for C)
#   lib/libquota.a or libquota.so.X.Y       the library
#   lib/libquota.so.X.Y (with libquota.a)   the static build's shared twin, for FFIs (ctypes):
#                                           its runtime files only, so -lquota stays static
#   bin/quotactl                            the command line (when built)
#   share/quota/migrations/*.sql            the migrations the library embeds, for reading
#   share/quota/migrations/postgresql/*.sql PostgreSQL's (in a build with that backend)
#   share/quota/schema.sql                  the current schema (tools/schema.sh writes it)
#   lib/libquota_prometheus.a (or .so)      quota::prometheus, when built (cmake/prometheus.cmake)
#   lib/cmake/quota/                        quotaConfig.cmake & co: quota::quota, quota::quotactl,
#                                           a component per backend built, quota_BACKENDS, and
#                                           the component "prometheus" (quota::prometheus)
#   lib/pkgconfig/quota.pc                  for pkg-config
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(QUOTA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/quota)
set(QUOTA_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/quota)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/quota
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(TARGETS quota EXPORT quota-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(QUOTA_SHARED_LIBRARY_TARGET STREQUAL "quota_shared")
  install(TARGETS quota_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP)
endif()
if(TARGET quotactl)
  install(TARGETS quotactl EXPORT quota-targets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(FILES ${quota_migration_files} DESTINATION ${QUOTA_INSTALL_DATADIR}/migrations)
if(QUOTA_HAS_POSTGRESQL)
  install(FILES ${quota_postgresql_migration_files}
          DESTINATION ${QUOTA_INSTALL_DATADIR}/migrations/postgresql)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/schema/schema.sql DESTINATION ${QUOTA_INSTALL_DATADIR})

install(EXPORT quota-targets NAMESPACE quota:: FILE quotaTargets.cmake
        DESTINATION ${QUOTA_INSTALL_CMAKEDIR})
# quota::prometheus in a file of its own, which quotaConfig.cmake loads (with prometheus-cpp)
# only for find_package(quota COMPONENTS prometheus): a program without it needs no
# prometheus-cpp.
if(TARGET quota_prometheus)
  install(TARGETS quota_prometheus EXPORT quota-prometheus-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT quota-prometheus-targets NAMESPACE quota:: FILE quotaPrometheusTargets.cmake
          DESTINATION ${QUOTA_INSTALL_CMAKEDIR})
endif()
get_target_property(quota_type quota TYPE)
if(quota_type STREQUAL "STATIC_LIBRARY")
  set(QUOTA_STATIC ON)  # for quotaConfig.cmake.in: fmt is then needed to link
else()
  set(QUOTA_STATIC OFF)
endif()
# What a static library's users need at link time: per backend built, and nothing of a
# backend left out (quotaConfig.cmake, quota.pc).
set(QUOTA_CONFIG_DEPENDENCIES "  find_dependency(SQLite3)\n  find_dependency(SQLiteCpp)")
set(quota_pc_dependencies "sqlite3 fmt")
if(QUOTA_HAS_POSTGRESQL)
  string(APPEND QUOTA_CONFIG_DEPENDENCIES
         "\n  find_dependency(PkgConfig)\n  pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)")
  string(APPEND quota_pc_dependencies " libpq")
endif()
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/quotaConfig.cmake.in ${PROJECT_BINARY_DIR}/quotaConfig.cmake
  INSTALL_DESTINATION ${QUOTA_INSTALL_CMAKEDIR}
  PATH_VARS QUOTA_INSTALL_DATADIR)
# Before 1.0 a minor release may break the API, so 0.1 accepts 0.1.x only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/quotaConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/quotaConfig.cmake ${PROJECT_BINARY_DIR}/quotaConfigVersion.cmake
        DESTINATION ${QUOTA_INSTALL_CMAKEDIR})

# quota.pc. It locates itself (${pcfiledir}), so `cmake --install --prefix` anywhere gives
# a working file. A static libquota needs its dependencies on every link, so they are in
# Requires and Libs; the C++ runtime is listed for C programs. A shared one needs none.
if(IS_ABSOLUTE ${CMAKE_INSTALL_LIBDIR} OR IS_ABSOLUTE ${CMAKE_INSTALL_INCLUDEDIR})
  set(QUOTA_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
  set(QUOTA_PC_LIBDIR ${CMAKE_INSTALL_FULL_LIBDIR})
  set(QUOTA_PC_INCLUDEDIR ${CMAKE_INSTALL_FULL_INCLUDEDIR})
else()
  file(RELATIVE_PATH quota_pc_to_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
  string(REGEX REPLACE "/$" "" quota_pc_to_prefix ${quota_pc_to_prefix})
  set(QUOTA_PC_PREFIX "\${pcfiledir}/${quota_pc_to_prefix}")
  set(QUOTA_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(QUOTA_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
if(QUOTA_STATIC)
  get_target_property(quota_sqlitecpp_location SQLiteCpp LOCATION)
  get_filename_component(quota_sqlitecpp_dir ${quota_sqlitecpp_location} DIRECTORY)
  set(QUOTA_PC_REQUIRES "Requires: ${quota_pc_dependencies}")
  set(QUOTA_PC_LIBS " -lSQLiteCpp -lstdc++ -lm")
  if(NOT quota_sqlitecpp_dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    set(QUOTA_PC_LIBS " -L${quota_sqlitecpp_dir}${QUOTA_PC_LIBS}")
  endif()
else()
  # A shared library links its dependencies itself: only `pkg-config --static` lists them.
  set(QUOTA_PC_REQUIRES "Requires.private: ${quota_pc_dependencies}")
  set(QUOTA_PC_LIBS "")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/quota.pc.in ${PROJECT_BINARY_DIR}/quota.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/quota.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Everything the rules above copy, built by one target: `cmake --install` builds nothing, so a
# build of some targets only (tools/demo.sh builds this one) must include every installed one.
add_custom_target(quota_installable)
foreach(quota_installed quota quota_shared quotactl quota_prometheus)
  if(TARGET ${quota_installed})
    add_dependencies(quota_installable ${quota_installed})
  endif()
endforeach()
