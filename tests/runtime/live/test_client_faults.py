"""Faults seen from the client: every one is a clear error or a bounded retry."""

from __future__ import annotations

import socket

import pytest

from rolloutlog.runtime.live.protocol import (
    GenerateRequest,
    InferenceRejected,
    InferenceUnavailable,
    SamplingParams,
)
from tests.runtime.live.vllm_contract import run, wait_until

REQUEST = GenerateRequest(
    request_id="x", token_ids=(11, 1, 2, 3, 4, 10), sampling=SamplingParams(max_tokens=3)
)


def _closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_refused_connection_is_retried_a_bounded_number_of_times(contract_client, recorder):
    url = _closed_port_url()

    async def scenario():
        client = contract_client(url, attempts=3, backoff_s=0.01)
        try:
            with pytest.raises(InferenceUnavailable, match=r"POST .*/pause: no answer after 3"):
                await client.pause("keep")
            with pytest.raises(InferenceUnavailable, match="after 3 attempt"):
                await client.generate(REQUEST)  # never sent, so safe to retry
            return await client.health()
        finally:
            await client.aclose()

    assert run(scenario()) is False
    assert [path for _, path, _ in recorder.sent].count("/pause") == 3


def test_a_generate_that_times_out_is_not_sent_twice(server, contract_client, recorder):
    async def scenario():
        client = contract_client(server.url, generate_timeout_s=0.2, attempts=3)
        try:
            await client.pause("keep")
            with pytest.raises(InferenceUnavailable, match="ReadTimeout"):
                await client.generate(REQUEST)
            await client.resume()
        finally:
            await client.aclose()

    run(scenario())
    assert [path for _, path, _ in recorder.sent].count("/inference/v1/generate") == 1


def test_a_request_the_client_gave_up_on_is_aborted_by_the_server(server, contract_client):
    """vLLM aborts a request whose client disconnected; so does the CPU server."""

    async def scenario():
        client = contract_client(server.url, generate_timeout_s=0.2)
        try:
            await client.pause("keep")
            with pytest.raises(InferenceUnavailable):
                await client.generate(REQUEST)
            # the server notices the disconnect at its next poll of the socket
            await wait_until(lambda: server.engine.unfinished == 0, "the server to abort it")
            await client.resume()
        finally:
            await client.aclose()

    run(scenario())
    assert server.engine.unfinished == 0 and server.engine.tokens_total == 0


def test_an_error_status_names_route_status_type_and_message(server, contract_client):
    async def scenario():
        client = contract_client(server.url)
        try:
            with pytest.raises(InferenceRejected) as caught:
                await client.generate(
                    GenerateRequest(
                        request_id="big", token_ids=(1,) * 200, sampling=SamplingParams()
                    )
                )
            return caught.value
        finally:
            await client.aclose()

    error = run(scenario())
    assert error.status == 400 and error.kind == "BadRequestError" and error.param == "token_ids"
    assert "/inference/v1/generate answered 400 BadRequestError" in str(error)
    assert "maximum model length" in str(error)
