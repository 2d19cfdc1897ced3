"""Runs quota-bench --quick --json and checks the document's shape: every case and target
is there with its figures. It never looks at a speed: --quick counts are far too small to
mean anything, and the machine is shared.

usage: python3 check_json.py PATH/TO/quota-bench
"""
import json
import os
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
):
    refused = subprocess.run([bench, *arguments], capture_output=True, text=True)
    expect(refused.returncode == 2 and refused.stderr.startswith("quota-bench: error: ")
           and said in refused.stderr and refused.stdout == "",
           f"{arguments}: exit {refused.returncode}, stderr {refused.stderr!r}")

listed = subprocess.run([bench, "--list"], check=True, capture_output=True, text=True)
names = listed.stdout.split()
run = subprocess.run([bench, "--quick", "--json"], check=True, capture_output=True, text=True)
document = json.loads(run.stdout)


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
    expect(case["p50_us"] <= case["p99_us"] <= case["p999_us"] <= case["max_us"],
           f"{name}: percentiles out of order")
    ratios = case["ratios"]
    for key in ("upsert", "upsert_text", "rss"):
        number(ratios, key, name)
    if case["subject"] == "check":
        number(ratios, "point_select", name)
    if name.endswith("limit_1000"):
        number(ratios, "short_log", name)
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
expect(len(measures) == 12, f"expected 12 targets, got {len(measures)}")
for row in document["targets"]:
    expect(row["met"] in (True, False), f"target {row['measure']}: not evaluated ({row['figures']})")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"quota-bench --quick: {len(cases)} cases, {len(contention)} contention runs, "
      f"{len(measures)} targets evaluated")
