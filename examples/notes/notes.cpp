// A desktop-style program: a note-taking app that keeps its own table and quota's state in one
// SQLite file, and saves each note in one transaction together with its quota consume.
//
//   notes DB_PATH
//
// It plays a short scripted session and prints what happens:
//
//   - the app opens its database (SQLite::Database) and lets quota use that same connection,
//     quota::sqlite::attach(db), which adds the quota_* tables beside the app's `notes`;
//   - saving a note is one transaction: consume, then INSERT, then commit. Three saves go
//     through; the fourth is refused, and the app commits anyway, so that quota's `denied`
//     counter keeps the attempt (rolling back would forget it);
//   - a save whose INSERT fails after the consume rolls the transaction back, and the consume
//     goes with it: the user is not charged for a note that was never written.
//
// Run by the test suite (tests/embedding/), which compares the output with notes.expected.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>
#include <quota/sqlite.h>

#include <cstdint>
#include <iostream>
#include <string>

namespace {

constexpr const char* kSaveLimit = "notes.save";

// Saves one note for `author`, charging one unit of its quota in the same transaction.
void save_note(SQLite::Database& db, quota::Engine& engine, const std::string& author,
               const std::string& body) {
  std::cout << author << " saves \"" << body << "\": ";
  try {
    SQLite::Transaction transaction(db);
    const quota::Result result = engine.consume(kSaveLimit, author);
    if (!result.allowed) {
      transaction.commit();  // keeps the denial in quota's `denied` counter
      const std::int64_t minutes = (result.retry_after_ms + 59'999) / 60'000;
      std::cout << "refused, try again in " << minutes << " min\n";
      return;
    }
    SQLite::Statement insert(db, "INSERT INTO notes (author, body) VALUES (?, ?)");
    insert.bind(1, author);
    insert.bind(2, body);
    insert.exec();  // may throw: the transaction then rolls back, the consume with it
    transaction.commit();
    std::cout << "saved (" << result.remaining << " left this hour)\n";
  } catch (const SQLite::Exception& error) {
    std::cout << "failed (" << error.what() << "), rolled back\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: notes DB_PATH\n";
    return 2;
  }
  try {
    SQLite::Database db(argv[1], SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(
        "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, author TEXT NOT NULL, "
        "body TEXT NOT NULL CHECK (length(body) > 0))");

    quota::Engine engine =
        quota::sqlite::attach(db);  // migrates the quota_* tables into the same file
    // Created on the first run; afterwards the file's limit wins (quotactl limit set).
    engine.ensure({kSaveLimit, quota::Algorithm::sliding_log, /*maximum*/ 3, std::chrono::hours(1),
                   /*burst*/ std::nullopt});

    save_note(db, engine, "alice", "Buy milk");
    save_note(db, engine, "alice", "Call Bob");
    save_note(db, engine, "alice", "Plan the trip");
    save_note(db, engine, "alice", "One more");
    save_note(db, engine, "bob", "");  // the app's CHECK refuses an empty note

    std::cout << "notes: " << db.execAndGet("SELECT count(*) FROM notes").getInt() << " rows, "
              << db.execAndGet("SELECT count(*) FROM notes WHERE author = 'bob'").getInt()
              << " by bob\n";
    for (const quota::Usage& usage : engine.usage(kSaveLimit)) {
      std::cout << "quota: " << usage.owner << " used " << usage.used << ", " << usage.remaining
                << " left, denied " << usage.denied << "\n";
    }
    std::cout << "quota: bob has " << engine.check(kSaveLimit, "bob").remaining << " left\n";
    std::cout << "one file holds: "
              << db.execAndGet(
                       "SELECT group_concat(name, ', ') FROM (SELECT name FROM "
                       "sqlite_schema WHERE name IN ('notes', 'quota_limits') "
                       "ORDER BY name)")
                     .getString()
              << "\n";
  } catch (const std::exception& error) {
    std::cerr << "notes: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
