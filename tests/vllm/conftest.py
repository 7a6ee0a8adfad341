"""Real `vllm serve` (the CPU build) for the tests in this folder.

Two servers start once per test session from the project's v0 checkpoint, with the
recipe of docs/runtime.md (`rolloutlog.runtime.live.vllm_launch`), in the environment
that scripts/vllm-cpu-env makes (`.venv-vllm`, or `ROLLOUTLOG_VLLM_VENV`). Where no
server can be started these tests are skipped, unless `ROLLOUTLOG_REQUIRE_VLLM=1` (set by
.ci/run, which installs vLLM): then a server that does not start fails them. .ci/run
installs vLLM in the background while the rest of the suite runs (this folder is collected
last) and names the install's status file in `ROLLOUTLOG_VLLM_INSTALL`: the first test here
waits for that install to end.
Both servers are stopped (their whole process groups) when the session ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import NoReturn

import pytest

from rolloutlog.runtime.live.client import ClientLimits, VLLMClient
from rolloutlog.runtime.live.model import build_model, save_checkpoint
from rolloutlog.runtime.live.session import save_initial
from rolloutlog.runtime.live.settings import build_settings
from rolloutlog.runtime.live.transport import StreamTransport
from rolloutlog.runtime.live.vllm_launch import (
    VLLMProcess,
    VLLMStartError,
    VLLMUnavailable,
    cpu_command,
    vllm_servers,
)

REPO = Path(__file__).resolve().parents[2]
# The contract validators live beside the CPU-server tests; these tests check vLLM's
# traffic against the same schemas.
sys.path.insert(0, str(REPO / "tests" / "runtime"))
from tests.runtime.live.vllm_contract import Recorder, recorder_fixture, run  # noqa: E402

REQUIRED = os.environ.get("ROLLOUTLOG_REQUIRE_VLLM") == "1"
SERVERS = 2  # ~3.3 GB of memory each
START_TIMEOUT_S = 600.0  # healthy after 30-55 s on a quiet machine; CI may share it
INSTALL = os.environ.get("ROLLOUTLOG_VLLM_INSTALL")  # a background install's status file
INSTALL_TIMEOUT_S = 600.0  # a whole install takes 3-8 min; the suite before it, longer


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail where vLLM is required (CI)."""
    if REQUIRED:
        pytest.fail(f"ROLLOUTLOG_REQUIRE_VLLM=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def wait_for_install(status: Path) -> None:
    """Wait for a background scripts/vllm-cpu-env: it writes its exit status to `status`,
    its output to `status` + ".log"."""
    deadline = time.monotonic() + INSTALL_TIMEOUT_S
    while not status.exists():
        if time.monotonic() > deadline:
            unavailable(f"the vLLM install ({status}) did not end in {INSTALL_TIMEOUT_S:.0f} s")
        time.sleep(1.0)
    code = status.read_text().strip()
    if code != "0":
        log = Path(f"{status}.log")
        tail = log.read_text()[-2000:] if log.exists() else "(no log)"
        unavailable(f"the vLLM install failed (exit status {code}):\n{tail}")


def vllm_command() -> list[str]:
    if INSTALL:
        wait_for_install(Path(INSTALL))
    try:
        return cpu_command()  # ROLLOUTLOG_VLLM_VENV, else .venv-vllm
    except VLLMUnavailable as error:
        unavailable(str(error))


@pytest.fixture(scope="session")
def vllm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The v0 checkpoint of `rolloutlog train --seed 0` (what `--save-initial` writes)."""
    _, settings = build_settings({}, seed=0)
    return save_initial(settings, 0, tmp_path_factory.mktemp("vllm") / "initial")


@pytest.fixture(scope="session")
def other_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint with other weights than the servers started from (seed 1, not 0)."""
    path = tmp_path_factory.mktemp("other") / "b"
    save_checkpoint(build_model(seed=1), path)
    return path


@pytest.fixture(scope="session")
def vllm(vllm_checkpoint: Path) -> Iterator[list[VLLMProcess]]:
    """Two healthy `vllm serve` processes on loopback; a test may kill the second one."""
    command = vllm_command()
    stack = contextlib.ExitStack()
    try:
        servers = stack.enter_context(
            vllm_servers(
                command,
                vllm_checkpoint,
                SERVERS,
                log_dir=vllm_checkpoint.parent,
                start_timeout_s=START_TIMEOUT_S,
            )
        )
    except VLLMStartError as error:
        unavailable(f"vllm serve did not start: {error}")
    with stack:
        yield servers


recorder = recorder_fixture  # every exchange of a test's clients is checked at its end


@pytest.fixture
def vllm_client(
    vllm: list[VLLMProcess], recorder: Recorder
) -> Iterator[Callable[[], AbstractAsyncContextManager[VLLMClient]]]:
    """`async with vllm_client() as client:` a contract-checked client of the first server,
    made on the test's event loop; the server is resumed after the test."""

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[VLLMClient]:
        http = recorder.client(transport=StreamTransport(), trust_env=False)
        client = VLLMClient(vllm[0].url, limits=ClientLimits(backoff_s=0.05), http=http)
        try:
            yield client
        finally:
            await client.aclose()

    yield connect
    run(_resume(vllm[0].url))


async def _resume(url: str) -> None:
    client = VLLMClient(url)
    try:
        await client.resume()
    finally:
        await client.aclose()
