"""Fixtures for the live runtime: checkpoints, CPU servers, and contract-checked clients."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from rolloutlog.runtime.live.client import ClientLimits, VLLMClient
from rolloutlog.runtime.live.model import build_model, save_checkpoint
from rolloutlog.runtime.live.transport import StreamTransport
from rolloutlog.runtime.live.twin.launch import serve_in_thread
from rolloutlog.runtime.live.twin.server import InferenceServer
from tests.runtime.live.vllm_contract import Recorder, recorder_fixture


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    # Two cores: the server threads and the test share them; more threads only contend.
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two different checkpoints of the default model: `a` (seed 0) and `b` (seed 1)."""
    root = tmp_path_factory.mktemp("checkpoints")
    paths = {}
    for name, seed in (("a", 0), ("b", 1)):
        paths[name] = root / name
        save_checkpoint(build_model(seed=seed), paths[name])
    return paths


@pytest.fixture
def server(checkpoints: dict[str, Path]) -> Iterator[InferenceServer]:
    started = serve_in_thread(checkpoints["a"])
    yield started
    started.stop()


@pytest.fixture
def slow_server(checkpoints: dict[str, Path]) -> Iterator[InferenceServer]:
    """Steps take at least 20 ms, so a test can act while a request is mid-generation."""
    started = serve_in_thread(checkpoints["a"], min_step_s=0.02)
    yield started
    started.stop()


recorder = recorder_fixture  # every exchange of a test's clients is checked at its end


@pytest.fixture
def contract_client(recorder: Recorder) -> Any:
    """A factory: `contract_client(url, **limits)` -> a `VLLMClient` whose traffic is checked."""

    def make(url: str, **limits: Any) -> VLLMClient:
        # the client's own transport, so the contract covers what production sends
        http = recorder.client(transport=StreamTransport(), trust_env=False)
        return VLLMClient(url, limits=ClientLimits(**limits), http=http)

    return make
