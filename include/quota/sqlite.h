// quota on the application's own SQLite connection, and the options that only SQLite has.
//
//   #include <SQLiteCpp/Database.h>
//   #include "quota/sqlite.h"
//
//   SQLite::Database db("app.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
//   quota::Engine engine = quota::sqlite::attach(db);
//
// This header takes a SQLite::Database of SQLiteCpp, which the library itself uses only
// privately: a program that includes it links its own SQLiteCpp (Debian's libsqlitecpp-dev,
// the same package the library was built with). Engine::open on a file needs none of it.
#pragma once

#include "quota/engine.h"
#include "quota/export.h"

namespace SQLite {
class Database;
}

namespace quota::sqlite {

// An Engine on the application's own connection (which must be open read-write and must
// outlive the Engine). Operations then take part in the application's transactions: a consume
// inside an open transaction commits or rolls back with it. The journal mode is left as the
// application set it. Like Engine::open, it installs on the connection the engine's busy
// handler and, with Options::restart_checkpoint, its automatic WAL checkpoint; both stay after
// the Engine is gone. Opening checks the schema (and migrates it, with Options::migrate) on
// that connection. Throws Error.
//
// The options that only SQLite reads:
//
// - Options::synchronous_full (Engine::open on a file only; an application's connection keeps
//   its own setting): PRAGMA synchronous. NORMAL (default) keeps a WAL database consistent
//   after any crash and durable after a process crash; FULL also survives a power loss, at
//   the cost of an fsync per consume.
// - Options::restart_checkpoint (default on): replace SQLite's automatic WAL checkpoint on
//   the connection (PASSIVE, at `PRAGMA wal_autocheckpoint` pages, 1000 by default) with the
//   engine's, from half that threshold: a PASSIVE copy, then a RESTART that copies what was
//   committed meanwhile and starts the WAL over even while other processes keep writing. With
//   SQLite's own, two processes that never pause keep the WAL from ever being started over: it
//   grows without limit and every commit past the threshold pays a checkpoint's fsyncs. With
//   the engine's, the WAL stays within the threshold and a contended consume's p99 falls
//   about fivefold (figures: docs/performance-notes.md, "Figures behind the code's choices");
//   other writers wait for the RESTART step (about 1 ms, once per half threshold). A
//   connection whose automatic checkpoint is off is left alone. See docs/embedding.md.
// - Options::busy_timeout is waited out by the engine's busy handler, which retries promptly
//   (yields, then sleeps of at most 128 us) rather than with SQLite's coarse default steps.
QUOTA_API Engine attach(SQLite::Database& database, Options options = {});

}  // namespace quota::sqlite
