"""An endpoint whose engine died answers 500 before its server exits: the pool must notice.

vLLM 0.32, asked to reload weights it cannot read, answers 500, and its next forward pass
kills the engine: generate calls then answer 500 until the server exits, and /health
answers 503. A fake backend plays that here, so the test needs no server.
"""

from __future__ import annotations

import logging

import pytest

from rolloutlog.runtime.live.endpoints import EndpointPool
from rolloutlog.runtime.live.protocol import GenerateRequest, InferenceRejected
from tests.runtime.live.vllm_contract import run


class RejectingBackend:
    """Answers every generate with `status`; healthy as told; counts health probes."""

    def __init__(self, status: int, healthy: bool) -> None:
        self.status, self.healthy, self.probes = status, healthy, 0
        self.url = f"http://fake-{status}"

    async def generate(self, request: GenerateRequest) -> None:
        raise InferenceRejected(
            f"POST {self.url}/inference/v1/generate answered {self.status}",
            status=self.status,
            kind="InternalServerError",
            param=None,
        )

    async def health(self) -> bool:
        self.probes += 1
        return self.healthy

    async def aclose(self) -> None:
        pass


REQUEST = GenerateRequest(request_id="r", token_ids=(11, 1, 10))


def _generate_on(backend: RejectingBackend) -> EndpointPool:
    pool = EndpointPool([backend])  # type: ignore[list-item]

    async def scenario() -> None:
        with pytest.raises(InferenceRejected):
            await pool.generate("g", REQUEST)

    run(scenario())
    return pool


def test_a_500_from_a_dead_engine_takes_the_endpoint_out_with_a_warning(caplog):
    backend = RejectingBackend(500, healthy=False)
    with caplog.at_level(logging.WARNING):
        pool = _generate_on(backend)
    assert backend.probes == 1 and not pool.endpoints[0].alive
    assert "answered 500" in (pool.endpoints[0].lost_reason or "")
    assert "taken out of rotation" in caplog.text


def test_a_500_from_a_healthy_server_fails_only_its_request():
    backend = RejectingBackend(500, healthy=True)
    pool = _generate_on(backend)
    assert backend.probes == 1 and pool.endpoints[0].alive


def test_bad_input_never_costs_a_health_probe():
    backend = RejectingBackend(400, healthy=False)
    pool = _generate_on(backend)
    assert backend.probes == 0 and pool.endpoints[0].alive
