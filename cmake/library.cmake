# quota_add_library(NAME KIND): a library made of quota_objects' objects, called libquota.
# KIND is STATIC, SHARED, or "" for BUILD_SHARED_LIBS' choice.
#
# A shared library exports only the API: what the headers mark QUOTA_API (the objects are
# compiled with hidden visibility), filtered once more by libquota.map; nothing of the static
# archives it absorbs (SQLiteCpp) is exported: users who pass their own SQLite::Database link
# their own SQLiteCpp, from the same Debian package.
function(quota_add_library name kind)
  add_library(${name} ${kind} $<TARGET_OBJECTS:quota_objects>)
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                            $<INSTALL_INTERFACE:include>)
  target_link_libraries(${name} PRIVATE SQLiteCpp SQLite::SQLite3 fmt::fmt
                                          ${quota_backend_libraries})
  target_compile_features(${name} PUBLIC cxx_std_20)  # the headers need it
  set_target_properties(${name} PROPERTIES OUTPUT_NAME quota LINKER_LANGUAGE CXX)
  quota_target_options(${name})
  get_target_property(type ${name} TYPE)
  if(type STREQUAL "SHARED_LIBRARY")
    # Before 1.0 every minor release may change the ABI: libquota.so.0.1.
    set_target_properties(${name} PROPERTIES VERSION ${PROJECT_VERSION}
                          SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
    target_compile_definitions(${name} INTERFACE QUOTA_SHARED)
    target_link_options(${name} PRIVATE "LINKER:--exclude-libs,ALL" "LINKER:--no-undefined"
                        "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/libquota.map")
    set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/libquota.map)
  endif()
endfunction()
