// A transaction that a killed process left unfinished in rollback-journal mode: its -journal
// file (a "hot journal") must be rolled back before anyone reads the database, and only a
// connection that can write does that. A read-only connection answers
// SQLITE_READONLY_ROLLBACK instead.
#pragma once

#include <SQLiteCpp/Exception.h>

#include <string>

#include "sqlite/busy.h"

namespace quota::detail {

// Whether `error` is a read-only connection's refusal to read past a hot journal.
bool is_hot_journal(const SQLite::Exception& error);

// What is wrong and what to do when a hot journal cannot be rolled back for lack of write
// access. `database` names the file ("the database", or a quoted path); `journal` the
// journal's path, when known.
std::string hot_journal_message(const std::string& database, const std::string& journal = "");

// Rolls back the hot journal of the existing database `path` by reading it on a read-write
// connection (which never creates the file), waiting out other connections with `busy`.
// Throws SQLite::Exception when it cannot: the file or its folder cannot be written.
void roll_back_hot_journal(const std::string& path, const BusyHandler& busy);

}  // namespace quota::detail
