// What a database location names: the one place that tells a SQLite file's path from a
// PostgreSQL connection string, and refuses a string that is neither with confidence.
// Engine::open, quota::admin (quotactl status, migrate, sql) and the watch's second connection
// all classify a location here, so that they never disagree. The classification reads the
// text only: it needs no database driver and opens nothing.
//
//   "app.db", "/var/lib/app/quota.db", ":memory:"      -> sqlite_path
//   ":memory:", "file::memory:", "file:x?mode=memory"  -> sqlite_path, in_memory
//   "postgresql://u@db/quota", "POSTGRES://u@db/quota" -> postgresql (the scheme in lower case)
//   "host=db dbname=quota user=u"                     -> postgresql (libpq's key=value form)
//   "postgresq://u:pw@db/quota", " postgresql://...",
//   "postgres:quota", "POSTGRESQL:/x", "mysql://db",
//   "jdbc:postgresql://db/quota", "PASSWORD=pw HOST=db" -> refused (a near miss)
//   a string holding a NUL byte                       -> refused
#pragma once

#include <string>
#include <string_view>

namespace quota::detail {

struct Location {
  enum class Kind { sqlite_path, postgresql, refused };
  Kind kind = Kind::sqlite_path;
  // sqlite_path: the path as given. postgresql: the connection string to hand to libpq (a
  // URI's scheme in lower case, which libpq requires). refused: empty.
  std::string text;
  // refused: why, and what to write instead. It quotes nothing of the location that could
  // hold a credential (only a scheme's letters or a character's position).
  std::string problem;
  // sqlite_path: SQLite opens no file for it but a database in memory that no other
  // connection reaches (":memory:", or a "file:" URI whose path is ":memory:" or that says
  // mode=memory; the SQLite store opens paths with URIs on). Engine::open runs no expiry
  // thread for it and src/open_store.cpp neither checks for the file nor makes it read-only.
  bool in_memory = false;
};

Location classify_location(std::string_view location);

// Whether `word` is one of libpq's connection keywords (host, dbname, password, ...).
bool is_libpq_keyword(std::string_view word);

}  // namespace quota::detail
