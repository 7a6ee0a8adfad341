"""Server processes never outlive whoever started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rolloutlog.runtime.live.twin.launch import ServerProcess

PARENT = """
import signal
import sys
from pathlib import Path
from rolloutlog.runtime.live.twin.launch import ServerProcess
server = ServerProcess(Path(sys.argv[1]))
if sys.argv[2:] == ["ignore-int"]:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
        _await_gone(server_pid)
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.stdin.close()
        parent.stdout.close()


def test_a_terminal_ctrl_c_does_not_reach_the_server(checkpoints):
    """Ctrl-C goes to the foreground process group; the server must not be in it, or it
    dies before the driver records `interrupted` (spurious `episode_failed`s)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(checkpoints["a"]), "ignore-int"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a shell gives a foreground job
    )
    try:
        server_pid = int(parent.stdout.readline())
        assert os.getpgid(server_pid) != os.getpgid(parent.pid), "Ctrl-C would reach it"
        os.killpg(parent.pid, signal.SIGINT)  # the parent ignores it
        parent.stdin.close()  # the parent exits; the server follows it
        parent.wait(10)
        _await_gone(server_pid)
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.stdout.close()


def test_a_server_that_exits_at_start_is_reported_as_exited(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"exited before it listened \(exit code 1"):
        ServerProcess(tmp_path / "no-weights", start_timeout_s=60)


def _await_gone(pid: int) -> None:
    """The server exits once its parent has: within 10 s, checked as it happens."""
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid), "the server outlived its parent"
