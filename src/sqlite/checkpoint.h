// Automatic WAL checkpoints that keep the WAL bounded while other connections keep writing.
#pragma once

#include <sqlite3.h>

#include <chrono>

namespace quota::detail {

// SQLite's automatic checkpoint runs after a commit that leaves at least `wal_autocheckpoint`
// pages (default 1000) in the WAL, in PASSIVE mode: it copies what it can and never waits. If
// another connection commits while it copies and syncs (two fsyncs, milliseconds), the WAL is
// not completely copied when the next write begins, so that write cannot start the WAL over.
// Under sustained writes from two processes this never ends: every commit finds the WAL over
// the threshold and checkpoints again, paying the fsyncs inside the operation, and the WAL
// grows without limit (docs/performance-notes.md, "Figures behind the code's choices"; the
// same page's "Two processes on one owner").
//
// install_checkpoint replaces it on `db` with a checkpoint that starts at half that threshold
// (so that the WAL, which keeps growing during the first step, stays within it), in two
// steps. First a PASSIVE one, as SQLite's: it copies the WAL and syncs without the write lock,
// while other writers go on. Then a RESTART: it takes the write lock, copies what they
// committed meanwhile (a few pages), syncs, and waits until no reader uses the WAL, so that
// the next write starts the WAL over. Other writers wait for the second step only (about a
// millisecond, once per half threshold of pages) instead of every commit paying the fsyncs;
// the WAL stays within half the threshold plus what they commit during the first step. The
// checkpoint is also the pause in which a writer of another process, which SQLite's write
// lock does not queue behind one that commits back to back, gets the lock: starting at half
// the threshold halves its longest wait (quota-bench's contention case). The second
// step waits for other connections at most kRestartWait with the engine's busy handler
// (another's transaction, a reader of old pages), since it holds the write lock while it waits
// for readers; refused, it leaves that connection's checkpoints alone on this thread for
// kRestartBackoff, and a later commit tries again. While another connection checkpoints, the
// first step is refused and nothing more is tried: that one restarts the WAL.
//
// A connection whose automatic checkpoint is off or replaced (`PRAGMA wal_autocheckpoint`
// reads 0) is left alone, so is one on which install_checkpoint already ran. Like the busy
// handler, the hook keeps no object alive: the threshold travels in SQLite's context pointer.
void install_checkpoint(sqlite3* db);

inline constexpr std::chrono::milliseconds kRestartWait{10};
inline constexpr std::chrono::milliseconds kRestartBackoff{100};

}  // namespace quota::detail
