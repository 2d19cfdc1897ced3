#!/usr/bin/env python3
"""example.gateway_slow_clients: examples/gateway is not stalled by clients that send their
headers slowly. 16 connections each send a request line and then one header byte a second,
never finishing (as a slow or hostile client would), while an ordinary request is made: it
must be answered at once (within 3 s), which cpp-httplib's default pool of 8 threads (each
held by a slow connection) cannot do. Then a connection that sends half a request line and
nothing more must be closed by the gateway's read timeout (2 s), well before cpp-httplib's
default 5 s.

    gateway_slow_clients_test.py GATEWAY SCRATCH_DIR
"""
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SLOW_CLIENTS = 16


def trickle(port, stop, opened):
    """A client that never finishes its headers: a byte a second, within the read timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        opened.release()
        while not stop.wait(1.0):
            try:
                connection.sendall(b"a")
            except OSError:
                return  # closed by the gateway: it holds nothing any more


def main():
    gateway, scratch = sys.argv[1:3]
    database = os.path.join(tempfile.mkdtemp(dir=scratch, prefix="gateway-slow-"), "gateway.db")
    process = subprocess.Popen([gateway, "--db", database, "--host", "127.0.0.1", "--port", "0"],
                               stdout=subprocess.PIPE, text=True)
    stop = threading.Event()
    threads = []
    try:
        line = process.stdout.readline()
        match = re.match(r"listening on http://127\.0\.0\.1:(\d+)$", line.strip())
        assert match, f"the gateway printed {line!r}"
        port = int(match.group(1))

        opened = threading.Semaphore(0)
        for _ in range(SLOW_CLIENTS):
            thread = threading.Thread(target=trickle, args=(port, stop, opened), daemon=True)
            thread.start()
            threads.append(thread)
        for _ in range(SLOW_CLIENTS):
            assert opened.acquire(timeout=10), "a slow client could not connect"
        time.sleep(1.5)  # each slow connection is in a worker by now, mid-headers

        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/")
        response = connection.getresponse()
        response.read()
        connection.close()
        took = time.monotonic() - started
        assert response.status == 200, response.status
        # Stalled, it would wait as long as the slow clients trickle (past the 10 s timeout).
        assert took < 3.0, \
            f"an ordinary request waited {took:.1f} s beside {SLOW_CLIENTS} slow clients"
        print(f"answered in {took * 1000:.0f} ms beside {SLOW_CLIENTS} slow clients")

        # A client that stops mid-request is dropped after the read timeout.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
            silent.sendall(b"GET / HT")
            started = time.monotonic()
            closed = silent.recv(1024)
            took = time.monotonic() - started
        assert closed == b"", closed
        assert took < 4.0, f"a silent client was dropped after {took:.1f} s, not the read timeout"
        print(f"a silent client was dropped after {took:.1f} s")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
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
