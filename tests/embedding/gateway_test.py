#!/usr/bin/env python3
"""example.gateway: starts examples/gateway on 127.0.0.1 (a free port, a fresh database,
5 requests per address and 3 per API key in 60 s), sends it seven requests over loopback,
checks each status and the RateLimit-Policy, RateLimit and Retry-After fields, then stops it
with SIGTERM and expects a clean exit.

    gateway_test.py GATEWAY SCRATCH_DIR
"""
import http.client
import os
import re
import signal
import subprocess
import sys
import tempfile

POLICY_IP = '"per-ip";q=5;w=60'
POLICY_KEY = '"per-key";q=3;w=60'
LIMIT_ITEM = re.compile(r'^"(per-ip|per-key)";r=(\d+);t=(\d+)$')


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
        assert match, f"RateLimit item {item!r} is not \"name\";r=N;t=N"
        # Within the window: the seconds until the quota is restored, rounded up.
        assert 1 <= int(match.group(3)) <= 60, item
        remaining[match.group(1)] = int(match.group(2))
    return remaining


def main():
    gateway, scratch = sys.argv[1:3]
    database = os.path.join(tempfile.mkdtemp(dir=scratch, prefix="gateway-"), "gateway.db")
    process = subprocess.Popen(
        [gateway, "--db", database, "--host", "127.0.0.1", "--port", "0", "--per-ip", "5",
         "--per-key", "3", "--window", "60"], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        match = re.match(r"listening on http://127\.0\.0\.1:(\d+)$", line.strip())
        assert match, f"the gateway printed {line!r}"
        port = int(match.group(1))

        # (API key, status, RateLimit-Policy, {policy: remaining}, refused by)
        script = [
            ("alice", 200, f"{POLICY_IP}, {POLICY_KEY}", {"per-ip": 4, "per-key": 2}, None),
            ("alice", 200, f"{POLICY_IP}, {POLICY_KEY}", {"per-ip": 3, "per-key": 1}, None),
            ("alice", 200, f"{POLICY_IP}, {POLICY_KEY}", {"per-ip": 2, "per-key": 0}, None),
            # The key's limit refuses; the address's unit is spent all the same (two
            # consumes; consume_all will make this atomic).
            ("alice", 429, f"{POLICY_IP}, {POLICY_KEY}", {"per-ip": 1, "per-key": 0}, "per-key"),
            ("bob", 200, f"{POLICY_IP}, {POLICY_KEY}", {"per-ip": 0, "per-key": 2}, None),
            # The address's limit refuses first; bob's key is not charged.
            ("bob", 429, POLICY_IP, {"per-ip": 0}, "per-ip"),
            (None, 429, POLICY_IP, {"per-ip": 0}, "per-ip"),
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
