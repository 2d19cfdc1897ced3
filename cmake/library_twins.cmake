# The library's twin: the same objects as the other kind of library.
#
# - A shared quota hides the internals (src/*.h) that the tests call, so with
#   BUILD_SHARED_LIBS they also link quota_internal, a static twin: the public API comes
#   from libquota.so, the internals they use from the archive. quotactl uses the public API
#   only; the installed quotactl finds libquota.so through its RUNPATH ($ORIGIN/../lib).
# - A static quota cannot be loaded by Python's ctypes (or any other language's FFI), so a
#   shared twin, quota_shared, is built into ${PROJECT_BINARY_DIR}/shared/ for the tests and
#   for the install, which puts its runtime files (libquota.so.X.Y and its soname link) beside
#   libquota.a but not the libquota.so link: -lquota still links the static library.
#
# QUOTA_SHARED_LIBRARY_TARGET names whichever target is the shared library.
include(GNUInstallDirs)

get_target_property(quota_type quota TYPE)
if(quota_type STREQUAL "SHARED_LIBRARY")
  set(QUOTA_SHARED_LIBRARY_TARGET quota)
  if(QUOTA_TESTS)
    quota_add_library(quota_internal STATIC)
    set_target_properties(quota_internal PROPERTIES OUTPUT_NAME quota_internal)
  endif()
  if(TARGET quotactl_lib)
    file(RELATIVE_PATH quota_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
    set_target_properties(quotactl PROPERTIES INSTALL_RPATH "$ORIGIN/${quota_bin_to_lib}")
  endif()
elseif(QUOTA_TESTS OR QUOTA_INSTALL)
  set(QUOTA_SHARED_LIBRARY_TARGET quota_shared)
  quota_add_library(quota_shared SHARED)
  set_target_properties(quota_shared PROPERTIES LIBRARY_OUTPUT_DIRECTORY
                                                ${PROJECT_BINARY_DIR}/shared)
endif()
