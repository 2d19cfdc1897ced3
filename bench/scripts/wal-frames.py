#!/usr/bin/env python3
"""WAL frames (pages written) per commit of the sliding log held at capacity.

In WAL mode a commit costs mostly the pages it appends to the WAL, which wall-clock figures on a
shared machine hide in their noise. This runs quota-bench's at-capacity sliding-log workload
(10 owners in turn, one consume per ms, period = limit x 10 ms) with a statement through
Python's sqlite3 (the system's libsqlite3) on a copy of a bench template, with automatic
checkpoints off, and counts the WAL's frames, by table and page type (the dbstat table):

  build/release/bench/quota-bench --prepare --filter /10/limit_ --work-dir /tmp/templates
  build/release/tools/quotactl/quotactl --db /tmp/templates/log_10.db \\
      sql consume bench_sliding_log > consume.sql
  bench/scripts/wal-frames.py --statement consume.sql /tmp/templates/log_10.db /tmp/templates/log_100000.db
  bench/scripts/wal-frames.py --statement consume.sql --setup variant.sql /tmp/templates/log_100000.db

--setup FILE runs SQL first (a trigger variant: DROP TRIGGER ...; CREATE TRIGGER ...), so that a
schema change is judged without rebuilding. --warm-up N operations (default 100,000) run before
the N counted ones (--operations, default 50,000), so that the log's pages reach the state the
workload keeps them in.
"""
import argparse
import collections
import os
import shutil
import sqlite3
import struct
import tempfile

START_MS = 1_700_000_000_000  # bench/workloads.cpp kStartMs
OWNERS = 10  # bench/workloads.cpp kLogOwners


def run(db, statement, limit, first_now, start, count):
    for i in range(start, start + count):
        db.execute(statement, {"limit": limit, "owner": f"user:{i % OWNERS}", "cost": None,
                               "now": first_now + i}).fetchall()


def frames_of(wal_path):
    """The page number of every frame in the WAL file, and the number of commit frames."""
    with open(wal_path, "rb") as wal:
        data = wal.read()
    page_size = struct.unpack(">I", data[8:12])[0]
    pages, commits = [], 0
    for offset in range(32, len(data) - 23, 24 + page_size):
        page, size_after_commit = struct.unpack(">II", data[offset:offset + 8])
        pages.append(page)
        commits += size_after_commit != 0
    return pages, commits


def measure(template, statement, setup, warm_up, operations):
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "case.db")
        shutil.copy(template, path)
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")
        if setup:
            db.executescript(setup)
        limit, maximum = db.execute("SELECT name, maximum FROM quota_limits").fetchone()
        first_now = START_MS + maximum * OWNERS
        run(db, statement, limit, first_now, 0, warm_up)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        run(db, statement, limit, first_now, warm_up, operations)
        pages, commits = frames_of(path + "-wal")
        kinds = {page: f"{name} {kind}" for name, page, kind in
                 db.execute("SELECT name, pageno, pagetype FROM dbstat")}
        rows = db.execute("SELECT count(*) FROM quota_log").fetchone()[0]
        db.close()
    print(f"{template}: {len(pages) / commits:.3f} frames per commit "
          f"({commits} commits, {rows} events in quota_log after)")
    for kind, count in collections.Counter(kinds.get(p, "(freed)") for p in pages).most_common():
        print(f"  {kind}: {count / commits:.3f}")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("templates", nargs="+", metavar="TEMPLATE",
                        help="a bench template of the sliding log (log_LIMIT.db)")
    parser.add_argument("--statement", required=True, metavar="FILE",
                        help="the consume statement (quotactl sql consume LIMIT)")
    parser.add_argument("--setup", metavar="FILE", help="SQL to run once first")
    parser.add_argument("--warm-up", type=int, default=100_000, metavar="N")
    parser.add_argument("--operations", type=int, default=50_000, metavar="N")
    arguments = parser.parse_args()
    with open(arguments.statement) as file:
        statement = file.read()
    setup = None
    if arguments.setup:
        with open(arguments.setup) as file:
            setup = file.read()
    for template in arguments.templates:
        measure(template, statement, setup, arguments.warm_up, arguments.operations)


if __name__ == "__main__":
    main()
