#!/usr/bin/env python3
"""example.gateway: starts examples/gateway on 127.0.0.1 (a free port, a fresh database,
5 requests per address and 3 per API key in 60 s, 4 in flight), sends it eight requests over
loopback one after another, checks each status and the RateLimit-Policy, RateLimit and
Retry-After fields, then stops it
with SIGTERM and expects a clean exit. Before that it scrapes GET /metrics (never limited),
parses Prometheus's text format and checks the counters against the requests made. Then reads the database: the per-key owners are the
keys' digests ("key:" and 16 hex digits of SHA-256), no key appears anywhere in the file, and
a request refused by one limit charged nothing on the other (consume_all's one decision).

    gateway_test.py GATEWAY SCRATCH_DIR
"""
import http.client
import os
import hashlib
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile

POLICY_IP = '"per-ip";q=5;w=60'
POLICY_KEY = '"per-key";q=3;w=60'
POLICY_INFLIGHT = '"inflight";q=4;qu="concurrent-requests"'
# Distinctive keys, so that a search of the file's bytes cannot match anything else.
ALICE, BOB = "sk-alice-5ba1f7c3e9", "sk-bob-0d94c2a8b6"
LIMIT_ITEM = re.compile(r'^"(per-ip|per-key)";r=(\d+);t=(\d+)$|^"(inflight)";r=(\d+)$')


def request(port, key):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/", headers={"X-API-Key": key} if key else {})
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    return response.status, response, body


def limits(response):
    """RateLimit's items as {policy: remaining}, checking each item's syntax and t."""
    remaining = {}
    for item in response.getheader("RateLimit", "").split(", "):
        match = LIMIT_ITEM.match(item)
        assert match, f"RateLimit item {item!r} is not \"name\";r=N;t=N or \"inflight\";r=N"
        if match.group(4):  # requests at once: no window
            remaining["inflight"] = int(match.group(5))
            continue
        # Within the window: the seconds until the quota is restored, rounded up.
        assert 1 <= int(match.group(3)) <= 60, item
        remaining[match.group(1)] = int(match.group(2))
    return remaining


def check_readme(gateway):
    """The README's commands name the programs where a Release build in build/release puts
    them (this build's tree stands for it)."""
    readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                          "gateway", "README.md")
    with open(readme, encoding="utf-8") as text:
        paths = re.findall(r"(?<![\w/.-])(build/[\w./-]+)", text.read())
    assert paths, "the gateway's README names no build/ path"
    build = os.path.dirname(os.path.dirname(os.path.abspath(gateway)))
    for path in paths:
        assert path == "build/release" or path.startswith("build/release/"), \
            f"the gateway's README names {path}, not under build/release/"
        program = path[len("build/release/"):]
        if program and "/" in program:
            built = os.path.join(build, program)
            assert os.path.exists(built), f"the gateway's README names {path}: no {built}"


def main():
    gateway, scratch = sys.argv[1:3]
    check_readme(gateway)
    database = os.path.join(tempfile.mkdtemp(dir=scratch, prefix="gateway-"), "gateway.db")
    process = subprocess.Popen(
        [gateway, "--db", database, "--host", "127.0.0.1", "--port", "0", "--per-ip", "5",
         "--per-key", "3", "--window", "60", "--inflight", "4"], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        match = re.match(r"listening on http://127\.0\.0\.1:(\d+)$", line.strip())
        assert match, f"the gateway printed {line!r}"
        port = int(match.group(1))

        # (API key, status, RateLimit-Policy, {policy: remaining}, refused by)
        # Each request holds one of its key's (or address's) 4 slots while it is served, and
        # gives it back when done: one after another, 3 are left every time.
        both = f"{POLICY_IP}, {POLICY_KEY}, {POLICY_INFLIGHT}"
        script = [
            (ALICE, 200, both, {"per-ip": 4, "per-key": 2, "inflight": 3}, None),
            (ALICE, 200, both, {"per-ip": 3, "per-key": 1, "inflight": 3}, None),
            (ALICE, 200, both, {"per-ip": 2, "per-key": 0, "inflight": 3}, None),
            # The key's limit refuses: one decision, so the address is not charged either.
            (ALICE, 429, both, {"per-ip": 2, "per-key": 0, "inflight": 3}, "per-key"),
            (BOB, 200, both, {"per-ip": 1, "per-key": 2, "inflight": 3}, None),
            (BOB, 200, both, {"per-ip": 0, "per-key": 1, "inflight": 3}, None),
            # The address's limit refuses: bob's key keeps its unit.
            (BOB, 429, both, {"per-ip": 0, "per-key": 1, "inflight": 3}, "per-ip"),
            (None, 429, f"{POLICY_IP}, {POLICY_INFLIGHT}", {"per-ip": 0, "inflight": 3},
             "per-ip"),
        ]
        for number, (key, status, policy, remaining, refused_by) in enumerate(script, 1):
            got_status, response, body = request(port, key)
            where = f"request {number} ({key}): {got_status} {dict(response.getheaders())} {body}"
            assert got_status == status, where
            assert response.getheader("RateLimit-Policy") == policy, where
            assert limits(response) == remaining, where
            retry_after = response.getheader("Retry-After")
            if refused_by:
                assert retry_after is not None and 1 <= int(retry_after) <= 60, where
                assert f'"policy":"{refused_by}"' in body, where
            else:
                assert retry_after is None, where
                assert body.startswith('{"hello":"127.0.0.1"}'), where
        print(f"{len(script)} requests answered as expected")
        check_metrics(port)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            out, _ = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode == 0, f"the gateway exited with {process.returncode}"
    assert out.strip() == "stopped", out
    check_database(database)
    return 0


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)",?')


def parse_exposition(text):
    """Prometheus's text format: ({family: type}, [(name, {label: value}, value)])."""
    types, samples = {}, []
    for line in text.splitlines():
        if not line or line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        labels = dict(LABEL.findall(match.group(2) or ""))
        samples.append((match.group(1), labels, float(match.group(3))))
    return types, samples


def check_metrics(port):
    """The counters after the script, per operation and under the answers' own reasons:
    consume_all counts its deciding limit's answer as a consume, and each request with a key
    also checks the other limit (the RateLimit fields), counted as a check, never as an
    admission: the consumes allowed are the 5 requests served. Each of the 8 requests took
    its in-flight lease (acquire) and gave it back (the gauge reads 0)."""
    for _ in range(2):  # a scrape is not a request: the counts stay
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        text = response.read().decode()
        connection.close()
        assert response.status == 200, (response.status, text)
        assert response.getheader("RateLimit") is None, "the scrape was rate limited"
    types, samples = parse_exposition(text)
    assert types["quota_decisions_total"] == "counter", types
    assert types["quota_operation_duration_seconds"] == "histogram", types
    assert types["quota_errors_total"] == "counter", types
    assert types["quota_fail_open_total"] == "counter", types
    assert types["quota_leases_held"] == "gauge", types
    decisions = {(labels["limit"], labels["operation"], labels["reason"]): value
                 for name, labels, value in samples if name == "quota_decisions_total"}
    assert decisions == {("per-ip", "consume", "ok"): 2, ("per-ip", "consume", "rate_limited"): 2,
                         ("per-ip", "check", "ok"): 4,
                         ("per-key", "consume", "ok"): 3, ("per-key", "consume", "rate_limited"): 1,
                         ("per-key", "check", "ok"): 3,
                         ("inflight", "acquire", "ok"): 8}, decisions
    served = sum(value for (limit, operation, reason), value in decisions.items()
                 if operation == "consume" and reason == "ok")
    assert served == 5, decisions
    values = {name: value for name, labels, value in samples if not labels}
    assert values["quota_fail_open_total"] == 0, values
    counts = {labels["operation"]: value for name, labels, value in samples
              if name == "quota_operation_duration_seconds_count"}
    assert counts == {"consume": 8, "check": 7, "acquire": 8}, counts
    for operation, count in counts.items():
        buckets = [(float(labels["le"]), value) for name, labels, value in samples
                   if name == "quota_operation_duration_seconds_bucket"
                   and labels["operation"] == operation]
        assert buckets == sorted(buckets) and buckets[-1] == (float("inf"), count), buckets
        # The last finite bound is the busy timeout (Options' default, 5 s).
        assert buckets[-2][0] == 5.0, buckets
    held = {labels["limit"]: value for name, labels, value in samples
            if name == "quota_leases_held"}
    assert held == {"inflight": 0}, held
    print(f"/metrics: {len(samples)} samples as expected")


def digest(key):
    return "key:" + hashlib.sha256(key.encode()).hexdigest()[:16]


def check_database(database):
    """The stored owners are digests, and each refusal was counted on its deciding limit
    only, with nothing charged anywhere else."""
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT limit_name, owner, used, denied FROM quota_usage "
            "ORDER BY limit_name, owner").fetchall()
    connection.close()
    expected = sorted([
        ("per-ip", "127.0.0.1", 5, 2),  # five served; refused twice (requests 7 and 8)
        ("per-key", digest(ALICE), 3, 1),  # three served; request 4 refused
        ("per-key", digest(BOB), 2, 0),  # request 7 charged nothing here
    ])
    assert rows == expected, f"quota_usage holds {rows}, expected {expected}"
    for path in [database, database + "-wal"]:
        if os.path.exists(path):
            with open(path, "rb") as stored:
                data = stored.read()
            for key in [ALICE, BOB]:
                assert key.encode() not in data, f"{path} holds the raw key {key}"
    print("owners are digests; each refusal charged nothing on the other limit")


if __name__ == "__main__":
    sys.exit(main())
