"""Runs quota-bench --quick --json and checks the document's shape: every case and target
is there with its figures. It never looks at a speed: --quick counts are far too small to
mean anything, and the machine is shared. With $QUOTA_TEST_POSTGRES (the test server's URI,
which tools/test.sh sets) it also runs the PostgreSQL cases there and checks theirs, and that
eight clients on one owner were admitted exactly as often as the limit allows; without it, that
the run says they were skipped.

usage: python3 check_json.py PATH/TO/quota-bench
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

bench = sys.argv[1]
failures = []


def expect(condition, message):
    if not condition:
        failures.append(message)


# Bad input: exit status 2 and one line that says what to do, before anything runs.
for arguments, said in (
    (["--frobnicate"], "unknown option '--frobnicate'"),
    (["--duration", "soon"], "--duration takes a number"),
    (["--repetitions", "0"], "--repetitions takes a number"),
    (["--filter"], "--filter needs a value"),
    (["--count-instructions", "no/such/case", "--operations", "1"], "no case 'no/such/case'"),
    (["--count-instructions", "upsert_int/memory/1000"], "--count-instructions needs --operations"),
    (["--statement", "x.sql"], "--statement needs --count-instructions"),
    (["--prepare"], "--prepare needs --work-dir"),
    (["--report", "/nonexistent/run.json"], "cannot read /nonexistent/run.json"),
    (["--page-size", "1000"], "--page-size takes a power of two"),
    (["--page-size", "256"], "--page-size takes a number from 512 to 65536"),
    (["--pragma", "journal_mode=OFF"], "the setting (memory, wal_normal, wal_full) decides it"),
    (["--pragma", "page_size=1024"], "use --page-size N"),
    (["--pragma", "cache_size=1; DROP TABLE x"], "--pragma takes NAME=VALUE"),
    (["--pragma", "cache_size"], "--pragma takes NAME=VALUE"),
    (["--pragma", "cache_sise=100"], "has no such pragma"),
    (["--postgres", "app.db"], "--postgres takes a postgresql:// URI"),
    (["--postgres", "postgresql://bench@/quota?options=-cwork_mem%3D1MB"], "leave options= out"),
    (["--count-instructions", "upsert_text/postgresql/1000", "--operations", "1"],
     "counts the SQLite cases only"),
):
    refused = subprocess.run([bench, *arguments], capture_output=True, text=True)
    expect(refused.returncode == 2 and refused.stderr.startswith("quota-bench: error: ")
           and said in refused.stderr and refused.stdout == "",
           f"{arguments}: exit {refused.returncode}, stderr {refused.stderr!r}")

# A server that is not there: exit status 1, a message that says so, and no password in it.
unreachable = subprocess.run(
    [bench, "--quick", "--filter", "postgresql", "--postgres",
     "postgresql://bench:s3cret-word@/quota?host=/nonexistent-socket-dir"],
    capture_output=True, text=True)
expect(unreachable.returncode == 1 and
       "cannot connect to the PostgreSQL server given by --postgres" in unreachable.stderr and
       "s3cret-word" not in unreachable.stderr + unreachable.stdout,
       f"an unreachable server: exit {unreachable.returncode}, stderr {unreachable.stderr!r}")

listed = subprocess.run([bench, "--list"], check=True, capture_output=True, text=True)
names = listed.stdout.split()
postgresql_names = [name for name in names if "/postgresql/" in name]
names = [name for name in names if "/postgresql/" not in name]
run = subprocess.run([bench, "--quick", "--json"], check=True, capture_output=True, text=True)
document = json.loads(run.stdout)
expect(document.get("postgresql") == {"skipped": "no --postgres URI given"} and
       "the PostgreSQL cases are skipped: no --postgres URI given" in run.stderr,
       f"a run without --postgres does not say the PostgreSQL cases were skipped: "
       f"{document.get('postgresql')!r}, {run.stderr[-300:]!r}")
expect(len(postgresql_names) == 29, f"expected 25 PostgreSQL cases and 4 exactness runs listed, "
       f"got {len(postgresql_names)}")


def number(item, key, where):
    expect(isinstance(item.get(key), (int, float)) and item[key] >= 0,
           f"{where}: {key} is not a number >= 0: {item.get(key)!r}")


for key in ("cpu", "cores", "kernel", "sqlite", "sqlite_lookaside", "compiler", "build_type", "date"):
    expect(key in document.get("machine", {}), f"machine: no {key}")
expect(document["run"]["quick"] is True, "run.quick is not true")

cases = {case["name"]: case for case in document["cases"]}
contention = {item["name"]: item for item in document["contention"]}
# --list names the full run's cases; --quick shrinks the large ones (2,000 owners, limit 1,000).
quick_names = [name.replace("/1000000", "/2000").replace("limit_100000", "limit_1000") for name in names]
expect(sorted(quick_names) == sorted(list(cases) + list(contention)),
       f"the cases run are not the cases listed: {sorted(set(quick_names) ^ set(cases) ^ set(contention))}")

figures = ("ops_per_s", "p50_us", "p99_us", "p999_us", "max_us", "peak_rss_kib")
for name, case in cases.items():
    for key in figures + ("operations", "allowed_share"):
        number(case, key, name)
    expect(case["operations"] > 0, f"{name}: no operation ran")
    number(case, "cpu_us_per_op", name)
    expect(case.get("cpu_us_per_op", 0) > 0, f"{name}: no CPU time counted")
    expect(case["p50_us"] <= case["p99_us"] <= case["p999_us"] <= case["max_us"],
           f"{name}: percentiles out of order")
    ratios = case["ratios"]
    for key in ("upsert", "upsert_text", "rss"):
        number(ratios, key, name)
    if case["subject"] == "check":
        number(ratios, "point_select", name)
    if name.endswith("limit_1000"):
        number(ratios, "short_log", name)
    if name.endswith(("/block", "/shadow", "/overridden", "/calendar")):
        number(ratios, "plain", name)
    expect(len(case["repetitions"]) == 1, f"{name}: not one repetition")
    if case["subject"] in ("consume", "record") and case.get("log_limit") is None:
        expect(case["allowed_share"] > 0, f"{name}: nothing was allowed")

for name in ("contention/sqlite_busy_timeout", "contention/engine"):
    item = contention.get(name)
    expect(item is not None, f"no {name}")
    if item is None:
        continue
    for key in figures + ("smallest_share", "admitted", "expected_admitted"):
        number(item, key, name)
    # Correctness, not speed: two processes never admit more or less than the limit allows.
    expect(item["exact"] is True, f"{name}: admission was not exact")
    processes = item["repetitions"][0]["processes"]
    expect(len(processes) == 2 and all(p["operations"] > 0 for p in processes),
           f"{name}: a process did no operation")

# A filter ending in $ matches the names that end with the rest: limit_10$ leaves out the
# limit_1000 log (--quick's long one); without the $ it is kept.
for text, want_long in (("wal_normal/10/limit_10$", False), ("wal_normal/10/limit_10", True)):
    names = [case["name"] for case in json.loads(subprocess.run(
        [bench, "--quick", "--json", "--filter", text], check=True, capture_output=True,
        text=True).stdout)["cases"]]
    expect("consume/sliding_log/wal_normal/10/limit_10" in names and
           ("consume/sliding_log/wal_normal/10/limit_1000" in names) == want_long and
           not any("/memory/" in name for name in names),
           f"--filter {text} selected {names}")

# --page-size builds the templates with that page size, under a name of their own, and the run
# records it, the pragmas and --no-memstatus.
with tempfile.TemporaryDirectory() as work:
    settings = ["--page-size", "1024", "--pragma", "cache_size = -4000", "--pragma", "temp_store=2",
                "--no-memstatus"]
    tuned = json.loads(subprocess.run(
        [bench, "--quick", "--json", "--filter", "consume/fixed_window/wal_normal/1000",
         "--work-dir", work, *settings], check=True, capture_output=True, text=True).stdout)
    expect(tuned["run"]["page_size"] == 1024 and
           tuned["run"]["pragmas"] == ["cache_size = -4000", "temp_store = 2"] and
           tuned["run"]["memstatus"] is False,
           f"the run does not record --page-size, --pragma and --no-memstatus: {tuned['run']}")
    expect(document["run"]["page_size"] == 0 and document["run"]["pragmas"] == [] and
           document["run"]["memstatus"] is True, f"the default run records settings: {document['run']}")
    expect(all(case["operations"] > 0 for case in tuned["cases"]), "a case with --page-size did not run")
    for name in ("engine_1000_p1024.db", "bare_1000_p1024.db"):
        path = os.path.join(work, name)
        size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0] if os.path.exists(path) else None
        expect(size == 1024, f"{name}: page size {size}, not 1024")

measures = [row["measure"] for row in document["targets"]]
expect(len(measures) == 14, f"expected 14 targets, got {len(measures)}")
expect("consume_many of 100, per request" in measures,
       f"no target for consume_many of 100: {measures}")
for row in document["targets"]:
    expect(row["met"] in (True, False), f"target {row['measure']}: not evaluated ({row['figures']})")

# The PostgreSQL cases, on the test server when there is one.
server = os.environ.get("QUOTA_TEST_POSTGRES")
if server:
    pg_run = subprocess.run([bench, "--quick", "--json", "--filter", "postgresql", "--postgres", server],
                            capture_output=True, text=True)
    expect(pg_run.returncode == 0, f"the PostgreSQL cases failed: {pg_run.stderr[-600:]!r}")
    if pg_run.returncode == 0:
        pg = json.loads(pg_run.stdout)
        expect(pg["cases"] == [] and pg["contention"] == [], "--filter postgresql ran SQLite cases")
        postgresql = pg["postgresql"]
        for key in ("server_version", "version", "connection", "synchronous_commit", "fsync"):
            expect(isinstance(postgresql.get(key), str) and postgresql[key], f"postgresql: no {key}")
        expect(postgresql["synchronous_commit"] == "on", "postgresql: synchronous_commit not on")
        pg_cases = {case["name"]: case for case in postgresql["cases"]}
        exact = {item["name"]: item for item in postgresql["exact"]}
        expect(sorted(postgresql_names) == sorted(list(pg_cases) + list(exact)),
               f"the PostgreSQL cases run are not those listed: "
               f"{sorted(set(postgresql_names) ^ set(pg_cases) ^ set(exact))}")
        for name, case in pg_cases.items():
            for key in figures[:-1] + ("operations", "allowed_share"):
                number(case, key, name)
            expect(case["operations"] > 0, f"{name}: no operation ran")
            expect(case["clients"] == (8 if name.endswith("/8_clients") else 1),
                   f"{name}: clients {case['clients']}")
            number(case["ratios"], "upsert", name)
            expect(case["reference"].startswith("upsert_text/postgresql/"),
                   f"{name}: ratio to {case['reference']}")
            if case["subject"] == "check":
                number(case["ratios"], "point_select", name)
            if case["subject"] == "consume":
                expect(case["allowed_share"] > 0, f"{name}: nothing was allowed")
        for name, item in exact.items():
            last = item["repetitions"][-1]
            # Correctness, not speed: exactly the limit admitted, and counted by the state.
            expect(item["exact"] is True and last["admitted"] == item["limit_maximum"] and
                   last["recorded"] == last["admitted"] and
                   last["operations"] == 8 * 25 > item["limit_maximum"],
                   f"{name}: not exact: {item}")
        expect(len(postgresql["targets"]) == 4 and
               all(row["met"] in (True, False) for row in postgresql["targets"]),
               f"the PostgreSQL targets are not all evaluated: {postgresql['targets']}")
        psql = shutil.which("psql")
        if psql:
            left = subprocess.run([psql, server, "-Atc", "SELECT count(*) FROM pg_namespace "
                                   f"WHERE nspname = '{postgresql['schema']}'"],
                                  capture_output=True, text=True)
            expect(left.stdout.strip() == "0", f"the bench's schema was not dropped: {left.stdout!r}")
        text = subprocess.run([bench, "--quick", "--filter", "upsert_text/postgresql/1000",
                               "--postgres", server], check=True, capture_output=True, text=True)
        expect("PostgreSQL " + postgresql["server_version"] in text.stdout,
               "the printed table does not name the server's version")
else:
    print("quota-bench --quick: the PostgreSQL cases skipped: no $QUOTA_TEST_POSTGRES")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"quota-bench --quick: {len(cases)} cases, {len(contention)} contention runs, "
      f"{len(measures)} targets evaluated")
