# Writes OUTPUT, a C++ source holding every file of FILES (migrations/NNNN_name.sql, or
# migrations/postgresql/NNNN_name.sql) as a raw string with its version, name and SHA-256, in
# the function FUNCTION. Run by the build (see CMakeLists.txt), which passes FILES joined by
# "|".
string(REPLACE "|" ";" FILES "${FILES}")
set(body "")
foreach(file IN LISTS FILES)
  get_filename_component(base ${file} NAME_WE)
  string(REGEX MATCH "^([0-9]+)_(.+)$" matched ${base})
  if(NOT matched)
    message(FATAL_ERROR "migration ${file}: the name must be NNNN_name.sql")
  endif()
  math(EXPR version "${CMAKE_MATCH_1}")
  set(name ${CMAKE_MATCH_2})
  file(READ ${file} text)
  string(SHA256 checksum "${text}")
  if(text MATCHES "\\)quota_sql\"")
    message(FATAL_ERROR "migration ${file} contains the raw-string delimiter )quota_sql\"")
  endif()
  string(APPEND body "    {${version}, \"${name}\", \"${checksum}\", R\"quota_sql(${text})quota_sql\"},\n")
endforeach()
file(WRITE ${OUTPUT}.tmp
"// Generated from migrations by cmake/embed_migrations.cmake. Do not edit.
#include \"migrations.h\"

namespace quota::detail {

const std::vector<Migration>& ${FUNCTION}() {
  static const std::vector<Migration> migrations = {
${body}  };
  return migrations;
}

}  // namespace quota::detail
")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
