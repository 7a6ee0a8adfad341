"""Starting and stopping CPU inference servers: in this process (threads) or as processes.

Processes are what a real run uses: each server then has its own interpreter and GIL and
decodes while the trainer trains. Threads start in milliseconds and are what most tests
use. Either way the server picks a free port itself (`--port 0`) and reports its url, so
there is no race between choosing a port and binding it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from rolloutlog.runtime.live.model import load_checkpoint
from rolloutlog.runtime.live.twin.engine import Engine
from rolloutlog.runtime.live.twin.server import DEFAULT_KEEPALIVE_S, InferenceServer

_READY_PREFIX: Final = "listening on "


class ServerStartError(RuntimeError):
    """A CPU server process exited, or never listened, before the run could use it."""


def serve_in_thread(
    weights_dir: Path,
    *,
    seed: int = 0,
    max_batch: int = 256,
    min_step_s: float = 0.0,
    keepalive_s: float = DEFAULT_KEEPALIVE_S,
    queue_when_paused: bool = False,
) -> InferenceServer:
    """A started in-process server on a free loopback port; call `stop()` when done.
    `queue_when_paused` imitates vLLM 0.32 (see `engine`)."""
    engine = Engine(
        load_checkpoint(weights_dir),
        weights_dir=weights_dir,
        max_batch=max_batch,
        seed=seed,
        min_step_s=min_step_s,
        queue_when_paused=queue_when_paused,
    )
    return InferenceServer(engine, keepalive_s=keepalive_s).start()


class ServerProcess:
    """A CPU server in a child process. `kill()` simulates a crash; `stop()` is orderly."""

    def __init__(
        self,
        weights_dir: Path,
        *,
        seed: int = 0,
        threads: int = 1,
        min_step_s: float = 0.0,
        start_timeout_s: float = 60.0,
        port: int = 0,
    ) -> None:
        command = [
            sys.executable,
            "-m",
            "rolloutlog.runtime.live.twin.server",
            "--weights",
            str(weights_dir),
            "--port",
            str(port),  # 0: a free one; a restarted server takes its predecessor's
            "--seed",
            str(seed),
            "--threads",
            str(threads),
            "--min-step-s",
            str(min_step_s),
            "--exit-with-parent",
        ]
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": str(threads)}
        # stdin stays open as a lifeline: when this process dies (even by SIGKILL), the
        # server sees EOF and exits. Its own session keeps a terminal's Ctrl-C, meant for the
        # driver, from killing it too: the driver records `interrupted`, not lost episodes.
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            text=True,
            env=environment,
            start_new_session=True,
        )
        self.url = self._await_url(start_timeout_s)

    def _await_url(self, timeout_s: float) -> str:
        stdout = self.process.stdout
        if stdout is None:
            raise RuntimeError("server process has no stdout pipe")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            readable, _, _ = select.select([stdout], [], [], 0.1)
            if readable:
                line = stdout.readline()
                if line.startswith(_READY_PREFIX):
                    return line[len(_READY_PREFIX) :].strip()
                if not line and self.process.poll() is not None:
                    self._close_pipe()
                    raise ServerStartError(
                        "CPU inference server exited before it listened "
                        f"(exit code {self.process.returncode}; its stderr is above)"
                    )
        self.stop()
        raise ServerStartError(f"CPU inference server did not start within {timeout_s} s")

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-request, as a crashed replica would."""
        if self.running:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._close_pipe()

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.running:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)
        self._close_pipe()

    def _close_pipe(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@contextlib.contextmanager
def server_processes(
    weights_dir: Path, count: int, *, seed: int = 0, threads: int = 1, min_step_s: float = 0.0
) -> Iterator[list[ServerProcess]]:
    """`count` server processes, stopped on exit even if a test fails."""
    started: list[ServerProcess] = []
    try:
        for index in range(count):
            started.append(
                ServerProcess(
                    weights_dir, seed=seed + index, threads=threads, min_step_s=min_step_s
                )
            )
        yield started
    finally:
        for server in started:
            server.stop()


@contextlib.contextmanager
def server_threads(
    weights_dir: Path, count: int, *, seed: int = 0, min_step_s: float = 0.0
) -> Iterator[list[InferenceServer]]:
    """`count` in-process servers, stopped on exit."""
    started: list[InferenceServer] = []
    try:
        for index in range(count):
            started.append(serve_in_thread(weights_dir, seed=seed + index, min_step_s=min_step_s))
        yield started
    finally:
        for server in started:
            server.stop()
