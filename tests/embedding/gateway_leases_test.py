#!/usr/bin/env python3
"""example.gateway_leases: examples/gateway's in-flight bound and Idempotency-Key.

Starts the gateway on 127.0.0.1 (a free port, a fresh database, 2 requests in flight per API
key, rate limits high enough not to refuse) and checks:

- in flight: four slow requests (GET /work?ms=5000) of one key sent at once: two are served,
  two refused at once with 429, Retry-After and the "inflight" item alone, charged nothing;
  while the two run, the leases table holds exactly two leases of that key, another key is
  served, and a fifth request of the key is refused; once they are done no lease is left;
- the lease goes back on every path: a request that fails in its handler (400), one refused
  by a rate limit (429), one whose Idempotency-Key conflicts (422) leave no lease behind;
- retries: a request repeated with its Idempotency-Key is served again, says
  "Idempotent-Replayed: true" and is charged once; the key on another route (another cost)
  is 422 with the engine's message and charges nothing; a key of 256 bytes is 400 and charges
  nothing, one of 255 bytes is taken; an empty field is no key at all.

    gateway_leases_test.py GATEWAY SCRATCH_DIR
"""
import hashlib
import http.client
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading

KEY, OTHER = "sk-lease-3f9a61c07e", "sk-lease-other-8d20b4"


def digest(key):
    return "key:" + hashlib.sha256(key.encode()).hexdigest()[:16]


def request(port, path, key=None, idempotency_key=None):
    headers = {}
    if key is not None:
        headers["X-API-Key"] = key
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    return response.status, response, body


def leases(database, owner=None):
    with sqlite3.connect(database) as connection:
        if owner is None:
            rows = connection.execute("SELECT owner FROM quota_leases").fetchall()
        else:
            rows = connection.execute("SELECT owner FROM quota_leases WHERE owner = ?",
                                      (owner,)).fetchall()
    connection.close()
    return len(rows)


def used(database, limit, owner):
    """The units an owner has used of a rate limit (0 without state)."""
    with sqlite3.connect(database) as connection:
        row = connection.execute(
            "SELECT used FROM quota_usage WHERE limit_name = ? AND owner = ?",
            (limit, owner)).fetchone()
    connection.close()
    return row[0] if row else 0


def remaining(response):
    """RateLimit's items without their t (the seconds to a reset, which time moves)."""
    return [re.sub(r";t=\d+", "", item) for item in response.getheader("RateLimit").split(", ")]


def check_inflight(port, database):
    answers = [None] * 4
    start = threading.Barrier(len(answers) + 1)

    def slow(index):
        start.wait()
        answers[index] = request(port, "/work?ms=5000", KEY)

    threads = [threading.Thread(target=slow, args=(i,)) for i in range(len(answers))]
    for thread in threads:
        thread.start()
    start.wait()
    # Wait until both admitted requests hold their leases (the refusals answer at once).
    for _ in range(400):
        if leases(database, digest(KEY)) == 2:
            break
        threading.Event().wait(0.01)
    assert leases(database, digest(KEY)) == 2, "two leases while two requests run"
    status, response, body = request(port, "/", KEY)
    assert status == 429 and '"policy":"inflight"' in body, (status, body)
    status, response, body = request(port, "/", OTHER)
    assert status == 200, (status, body)
    assert leases(database, digest(KEY)) == 2, "never more than two at once"
    for thread in threads:
        thread.join()

    statuses = sorted(answer[0] for answer in answers)
    assert statuses == [200, 200, 429, 429], statuses
    slots_left = []
    for status, response, body in answers:
        where = f"{status} {dict(response.getheaders())} {body}"
        if status == 200:
            assert body.startswith('{"worked_ms":5000}'), where
            slots_left += re.findall(r'"inflight";r=(\d+)$', response.getheader("RateLimit"))
            continue
        assert '"policy":"inflight"' in body, where
        assert response.getheader("RateLimit-Policy") == \
            '"inflight";q=2;qu="concurrent-requests"', where
        assert response.getheader("RateLimit") == '"inflight";r=0', where
        # The wait until a held lease expires (its TTL is 30 s): an upper bound.
        assert 1 <= int(response.getheader("Retry-After")) <= 30, where
    assert sorted(slots_left) == ["0", "1"], slots_left  # the first admitted left one slot
    assert leases(database) == 0, "every lease was released when its request was done"
    # Two served at cost 2; the refusals (three of them) charged nothing.
    assert used(database, "per-key", digest(KEY)) == 4, used(database, "per-key", digest(KEY))
    status, response, body = request(port, "/", KEY)
    assert status == 200 and '"inflight";r=1' in response.getheader("RateLimit"), body
    print("in flight: two at once, the others refused and charged nothing")


def check_error_paths(port, database):
    for _ in range(3):  # more than the bound: a slot that leaked would refuse the third
        status, _, body = request(port, "/work?ms=abc", KEY)
        assert status == 400 and "?ms= must be" in body, (status, body)
    assert leases(database) == 0, "a request that failed in its handler released its lease"
    print("a failed request gave its slot back")


def check_retries(port, database):
    before = used(database, "per-key", digest(KEY))
    first = request(port, "/", KEY, "order-1001")
    retry = request(port, "/", KEY, "order-1001")
    assert first[0] == 200 and first[1].getheader("Idempotent-Replayed") is None, first[2]
    assert retry[0] == 200 and retry[1].getheader("Idempotent-Replayed") == "true", retry[2]
    assert retry[2].startswith('{"hello":"127.0.0.1"}'), retry[2]
    assert used(database, "per-key", digest(KEY)) == before + 1, "the retry charged nothing"
    # The same answer's figures: the retry is decided as the first request was.
    assert remaining(first[1]) == remaining(retry[1]), \
        (first[1].getheader("RateLimit"), retry[1].getheader("RateLimit"))
    assert leases(database) == 0

    # Another route (another cost) with the same key: 422, nothing charged.
    status, _, body = request(port, "/work?ms=0", KEY, "order-1001")
    assert status == 422, (status, body)
    assert "order-1001" in body and "another request" in body, body
    assert used(database, "per-key", digest(KEY)) == before + 1
    assert leases(database) == 0, "a conflicting request released its lease"

    # A key too long: 400, nothing charged; 255 bytes is a key.
    status, _, body = request(port, "/", KEY, "k" * 256)
    assert status == 400, (status, body)
    assert "is 256 bytes long: give 1 to 255 bytes" in body, body
    assert used(database, "per-key", digest(KEY)) == before + 1
    assert leases(database) == 0, "a refused key took no lease"
    for _ in range(2):
        status, response, body = request(port, "/", KEY, "k" * 255)
        assert status == 200, (status, body)
    assert response.getheader("Idempotent-Replayed") == "true"
    assert used(database, "per-key", digest(KEY)) == before + 2
    # An empty field is no field (cpp-httplib drops it): an ordinary request, charged each time.
    for _ in range(2):
        status, response, body = request(port, "/", KEY, "")
        assert status == 200 and response.getheader("Idempotent-Replayed") is None, body
    assert used(database, "per-key", digest(KEY)) == before + 4
    assert leases(database) == 0
    print("retries: replayed once charged, conflicts 422, bad keys 400")


def check_refused_with_key(port, database):
    # A third key, with a per-key limit of 20 units: exhaust it, then a refused request with
    # an Idempotency-Key, and its retry, which replays the refusal.
    third = "sk-lease-third-1c5e"
    for _ in range(10):
        status, _, body = request(port, "/work?ms=0", third)
        assert status == 200, (status, body)
    refused = request(port, "/", third, "late-1")
    again = request(port, "/", third, "late-1")
    assert refused[0] == 429 and '"policy":"per-key"' in refused[2], refused[2]
    assert again[0] == 429 and again[1].getheader("Idempotent-Replayed") == "true", again[2]
    assert leases(database) == 0, "a refused request released its lease"
    print("a refusal with a key is kept under it")


def main():
    gateway, scratch = sys.argv[1:3]
    database = os.path.join(tempfile.mkdtemp(dir=scratch, prefix="gateway-leases-"),
                            "gateway.db")
    process = subprocess.Popen(
        [gateway, "--db", database, "--host", "127.0.0.1", "--port", "0", "--per-ip", "1000",
         "--per-key", "20", "--window", "60", "--inflight", "2", "--inflight-ttl", "30"],
        stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        match = re.match(r"listening on http://127\.0\.0\.1:(\d+)$", line.strip())
        assert match, f"the gateway printed {line!r}"
        port = int(match.group(1))
        check_inflight(port, database)
        check_error_paths(port, database)
        check_retries(port, database)
        check_refused_with_key(port, database)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            out, _ = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode == 0, f"the gateway exited with {process.returncode}"
    assert out.strip() == "stopped", out
    return 0


if __name__ == "__main__":
    sys.exit(main())
