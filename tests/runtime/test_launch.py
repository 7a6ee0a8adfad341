"""Server processes never outlive whoever started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PARENT = """
import sys
from pathlib import Path
from rolloutlog.runtime.live.twin.launch import ServerProcess
server = ServerProcess(Path(sys.argv[1]))
print(server.process.pid, flush=True)
sys.stdin.read()
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie (exited, not yet reaped) still answers kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_server_exits_when_its_parent_is_killed(checkpoints):
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(checkpoints["a"])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        server_pid = int(parent.stdout.readline())
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while not _gone(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(server_pid), "the server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.stdin.close()
        parent.stdout.close()
