#include "sqlite/journal.h"

#include <SQLiteCpp/Database.h>
#include <fmt/format.h>
#include <sqlite3.h>

namespace quota::detail {

bool is_hot_journal(const SQLite::Exception& error) {
  return error.getExtendedErrorCode() == SQLITE_READONLY_ROLLBACK;
}

std::string hot_journal_message(const std::string& database, const std::string& journal) {
  return fmt::format(
      "{} holds the journal of a transaction that a process left unfinished ({}), which must "
      "be rolled back before the database can be read, and this process cannot write: give it "
      "write access to the file and its folder and open the database again (quota rolls the "
      "journal back by itself); do not delete the journal, which would corrupt the database",
      database, journal.empty() ? std::string("its -journal file") : "'" + journal + "'");
}

void roll_back_hot_journal(const std::string& path, const BusyHandler& busy) {
  busy.wait_out([&] {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    busy.install(db.getHandle());
    // The first read of a connection that can write rolls a hot journal back.
    db.exec("SELECT count(*) FROM sqlite_schema");
  });
}

}  // namespace quota::detail
