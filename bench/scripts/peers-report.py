#!/usr/bin/env python3
"""The report of bench/scripts/peers.sh: quota's consume against what users would pick instead.

    peers-report.py RUN_DIR [--save FILE]      collect a run's folder (meta.json and
                                               round-N/{quota,redis,rlf,raw}.json) and print
                                               the tables as Markdown; --save keeps it as JSON
    peers-report.py RUN.json [--update DOC]    the tables of a saved run; --update puts them
                                               between DOC's bench-peers markers

Ratios are of operations per second (quota's ÷ the peer's: 2.00 = twice as many decisions per
second), the median of the ratios within each round, so that drift on a noisy machine hits
both sides of a ratio alike; the tables show the rounds' range beside each median, and the
saved JSON keeps every round's figures. Where the rounds have CPU times, a second table
divides the peer's CPU time per decision (Redis: the client's and the server's together) by
quota's: it depends far less than throughput on what else the machine runs.
"""
import argparse
import json
import os
import statistics
import sys

ALGORITHMS = ["sliding_log", "fixed_window", "sliding_window", "token_bucket"]
PEERS = {  # key in a round: (label, target of quota's ÷ it, or None for a floor)
    "redis": ("Redis Lua fixed window (hiredis, EVALSHA, loopback TCP)", 1.3),
    "rlf": ("rate-limiter-flexible's SQLite store (RateLimiterSQLite, better-sqlite3)", 2.5),
    "raw": ("better-sqlite3's bare text-key upsert (`.all()`), the floor under the store", None),
}
MARKERS = ("<!-- bench-peers:begin -->", "<!-- bench-peers:end -->")


def fail(message):
    sys.exit(f"peers-report: {message}")


def load(path):
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        fail(f"cannot read {path}: {error}")


def collect(folder):
    meta = load(os.path.join(folder, "meta.json"))
    rounds = []
    for number in range(1, meta["rounds"] + 1):
        where = os.path.join(folder, f"round-{number}")
        quota = load(os.path.join(where, "quota.json"))
        cases = {case["name"]: case for case in quota["cases"]}
        entry = {"order": meta["orders"][number - 1], "quota": {}, "machine": quota["machine"]}
        for name, case in cases.items():
            entry["quota"][name] = {key: case.get(key) for key in
                                    ("ops_per_s", "p50_us", "p99_us", "p999_us", "max_us",
                                     "allowed_share", "operations", "cpu_us_per_op")}
        for key in PEERS:
            entry[key] = load(os.path.join(where, f"{key}.json"))
        rounds.append(entry)
    machine = rounds[0].pop("machine")
    for entry in rounds[1:]:
        entry.pop("machine")
    return {"meta": meta, "machine": machine, "rounds": rounds}


def consume_name(algorithm, owners):
    return f"consume/{algorithm}/wal_normal/{owners}"


def figures(run):
    """Per case: its ops/s in each round and the medians of its figures."""
    owners = run["meta"]["owners"]
    rows = []
    names = [consume_name(a, owners) for a in ALGORITHMS]
    names += [f"upsert_int/wal_normal/{owners}", f"upsert_text/wal_normal/{owners}"]
    for name in names:
        per_round = [entry["quota"].get(name) for entry in run["rounds"]]
        if all(per_round):
            rows.append((f"quota-bench `{name}`", per_round))
    for key, (label, _) in PEERS.items():
        rows.append((label, [entry[key] for entry in run["rounds"]]))
    return rows


def has_cpu(run):
    """Whether every round has CPU times (runs before they were measured have none)."""
    return all(entry[key].get("cpu_us_per_op") for entry in run["rounds"] for key in PEERS)


def ratio_medians(run, cpu=False):
    """{(algorithm, peer): (per-round ratios, median)}: quota's ops/s ÷ the peer's, or with
    `cpu` the peer's CPU time per operation ÷ quota's (above 1, quota spends less)."""
    owners = run["meta"]["owners"]
    result = {}
    for algorithm in ALGORITHMS:
        name = consume_name(algorithm, owners)
        for key in PEERS:
            if cpu:
                ratios = [entry[key]["cpu_us_per_op"] / entry["quota"][name]["cpu_us_per_op"]
                          for entry in run["rounds"]]
            else:
                ratios = [entry["quota"][name]["ops_per_s"] / entry[key]["ops_per_s"]
                          for entry in run["rounds"]]
            result[(algorithm, key)] = (ratios, statistics.median(ratios))
    return result


def render(run):
    meta, machine = run["meta"], run["machine"]
    ratios = ratio_medians(run)
    out = []
    # The store's line names Node, better-sqlite3 and its SQLite too, which the bare upsert's has.
    versions = "; ".join(run["rounds"][0][key]["server"] for key in ("redis", "rlf"))
    out.append(
        f"Run {meta['date']}. Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
        f"{machine.get('kernel', '?')}; quota on SQLite {machine.get('sqlite', '?')}, "
        f"{machine.get('compiler', '?')}; {versions}. Load average {meta['load_before']} before, "
        f"{meta['load_after']} after (a shared machine: other work was running). "
        f"{meta['rounds']} interleaved rounds of {meta['duration_s']:g} s per case, one client, "
        f"{meta['owners']:,} owners, WAL/NORMAL; a ratio is of operations per second" +
        (" (in the last table, the peer's CPU time per decision ÷ quota's)" if has_cpu(run) else "") +
        ", the median of the rounds' ratios.")
    out.append("")
    out.append("| measure | target | figures | met |")
    out.append("|---|---|---|---|")
    for key, (label, target) in PEERS.items():
        if target is None:
            continue
        medians = [ratios[(a, key)][1] for a in ALGORITHMS]
        met = all(m >= target for m in medians)
        text = ", ".join(f"{a} {m:.2f}×" for a, m in zip(ALGORITHMS, medians))
        out.append(f"| consume ÷ {label}, every algorithm | ≥ {target}× | {text} | "
                   f"{'met' if met else 'MISSED'} |")
    out.append("")
    cpu = has_cpu(run)
    out.append("| case | median ops/s | rounds' lowest–highest ops/s | p50 µs | p99 µs | allowed |" +
               (" CPU µs per operation |" if cpu else ""))
    out.append("|---|---:|---:|---:|---:|---:|" + ("---:|" if cpu else ""))
    for label, per_round in figures(run):
        def median(key):
            return statistics.median(r[key] for r in per_round)
        speeds = [r["ops_per_s"] for r in per_round]
        allowed = median("allowed_share")
        out.append(f"| {label} | {median('ops_per_s') / 1000:.1f}k | "
                   f"{min(speeds) / 1000:.1f}k–{max(speeds) / 1000:.1f}k | "
                   f"{median('p50_us'):.1f} | {median('p99_us'):.1f} | " +
                   (f"{allowed * 100:.1f} %" if "upsert" not in label else "") + " |" +
                   (f" {median('cpu_us_per_op'):.1f} |" if cpu else ""))
    out.append("")
    tables = [("consume, ops/s", ratios)]
    if cpu:
        tables.append(("consume, CPU per decision", ratio_medians(run, cpu=True)))
    for title, table in tables:
        out.append(f"| {title} | ÷ Redis Lua | rounds' range | ÷ the JS store | rounds' range | "
                   "÷ the JS bare upsert | rounds' range |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        for algorithm in ALGORITHMS:
            cells = []
            for key in PEERS:
                per_round, middle = table[(algorithm, key)]
                cells += [f"{middle:.2f}×", f"{min(per_round):.2f}–{max(per_round):.2f}"]
            out.append(f"| {algorithm} | " + " | ".join(cells) + " |")
        out.append("")
    out.pop()
    return "\n".join(out) + "\n"


def update(document, tables):
    with open(document) as file:
        text = file.read()
    begin, end = MARKERS
    if begin not in text or end not in text:
        fail(f"{document}: no {begin} ... {end} markers to put the tables between")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(document, "w") as file:
        file.write(f"{head}{begin}\n{tables.strip()}\n{end}{tail}")
    print(f"{document}: the peers' tables updated", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run's folder (from peers.sh) or its saved JSON")
    parser.add_argument("--save", metavar="FILE", help="keep the collected run as JSON")
    parser.add_argument("--update", metavar="DOC", help="put the tables between DOC's markers")
    args = parser.parse_args()
    run = collect(args.run) if os.path.isdir(args.run) else load(args.run)
    if args.save:
        with open(args.save, "w") as file:
            json.dump(run, file, indent=2)
            file.write("\n")
    tables = render(run)
    if args.update:
        update(args.update, tables)
    sys.stdout.write(tables)


if __name__ == "__main__":
    main()
