#!/usr/bin/env python3
"""example.live: starts examples/live watching user u1 for 4 s on a fresh database, sends two
messages as u1 from two other processes, and checks the lines the watcher printed: the full
bucket first, then one line per message sent (4 left, then 3), each saying when the next
message comes back, then the message that came back 2 s after the first send (4 left again).

    live_test.py LIVE SCRATCH_DIR
"""
import os
import re
import subprocess
import sys
import tempfile
import time

LINE = re.compile(r"^u1: (\d) left(?:, refills in (\d+\.\d) s| \(full\))$")


def main():
    live, scratch = sys.argv[1], sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        database = os.path.join(folder, "live.db")
        # Creates the database and the limit first, so that the watcher starts at once.
        subprocess.run([live, database, "setup", "0.01"], check=True, capture_output=True)
        watcher = subprocess.Popen([live, database, "u1", "4"], stdout=subprocess.PIPE, text=True)
        # Sends once it has printed the full bucket: a watcher slow to start would else begin
        # with a message already sent.
        first = watcher.stdout.readline()
        for _ in range(2):
            sent = subprocess.run([live, database, "u1", "--send"], capture_output=True, text=True)
            assert sent.returncode == 0 and sent.stdout == "sent\n", sent
            time.sleep(0.3)
        out, _ = watcher.communicate(timeout=30)
        assert watcher.returncode == 0, watcher.returncode
        lines = (first + out).splitlines()
        print("\n".join(lines))
        left = []
        for line in lines:
            match = LINE.match(line)
            assert match, f"unexpected line: {line!r}"
            left.append(int(match.group(1)))
            if match.group(2) is not None:
                assert 0 < float(match.group(2)) <= 2.0, line
        # ... and the second comes back 2 s after it, near the end: shown if it was in time.
        assert left in ([5, 4, 3, 4], [5, 4, 3, 4, 5]), left
        assert lines[0] == "u1: 5 left (full)", lines[0]
    print("example.live: ok")


if __name__ == "__main__":
    main()
