"""Every route the client uses, against real `vllm serve` (CPU build 0.32), contract-checked.

Each test drives the first server through `VLLMClient`; every request and response is
validated against the contract's schemas (tests/contract/vllm). Where vLLM 0.32 and the
0.33 contract differ (tests/contract/vllm/ROUTES.md, section 9), the test accepts both.

Requests that must be caught mid-generation are frozen on a paused server by stepping it
(tests/vllm/stepping.py: sent during a keep-mode pause, resumed and paused again a few decode
steps at a time until vLLM counts them all running), whatever the machine's speed; the test
then acts (reloads, aborts) on a paused server.

A request sent to a paused server is shown held by what it carries, not by how long it
waited: the test waits until the client has sent it, changes the weight label while the
server stays paused, and the answer must carry only the label set after it was sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import torch

from rolloutlog.runtime.live.client import VLLMClient
from rolloutlog.runtime.live.digits import EOS_ID
from rolloutlog.runtime.live.model import load_checkpoint
from rolloutlog.runtime.live.protocol import Generation, InferenceRejected
from tests.runtime.live.vllm_contract import Recorder, run, validate, wait_until
from tests.vllm.stepping import LONG, PROMPT, REQUESTS, request, requests_running

T = TypeVar("T")


def torch_logprobs(weights: Path, generation: Generation) -> list[float]:
    """The logprobs the project's own model gives the generated tokens."""
    model = load_checkpoint(weights)
    tokens = list(PROMPT) + list(generation.token_ids)
    with torch.no_grad():
        logits = model(torch.tensor([tokens[:-1]]))[0, len(PROMPT) - 1 :]
    picked = torch.log_softmax(logits.float(), -1).gather(
        -1, torch.tensor(generation.token_ids).unsqueeze(-1)
    )
    return picked.squeeze(-1).tolist()


def with_client(connect: Any, scenario: Callable[[VLLMClient], Awaitable[T]]) -> T:
    """Run `scenario` on a fresh event loop with a client made on that loop."""

    async def main() -> T:
        async with connect() as client:
            return await scenario(client)

    return run(main())


async def sent(recorder: Recorder, request_id: str) -> None:
    """Wait until the client has sent the generate named `request_id` (a hang's guard only)."""

    def seen() -> bool:
        return any(
            path == "/inference/v1/generate" and json.loads(body)["request_id"] == request_id
            for _, path, body in recorder.sent
        )

    await wait_until(seen, f"generate {request_id!r} to be sent")


def test_generate_health_pause_resume_and_labels_answer_as_the_contract_says(
    vllm_client, vllm_checkpoint, recorder
):
    async def scenario(client: VLLMClient):
        assert await client.health()
        await client.reload_weights(str(vllm_checkpoint))
        await client.update_weight_version("v0")
        assert await client.weight_version() == "v0"
        assert await client.is_paused() is False
        generation = await client.generate(request("routes-1", 6))
        await client.pause("keep")
        assert await client.is_paused() is True
        await client.resume()
        assert await client.is_paused() is False
        await client.abort(["never-sent"])  # unknown ids are ignored
        return generation

    generation = with_client(vllm_client, scenario)
    assert generation.engine_request_id == "generate-tokens-routes-1"
    assert generation.finish_reason == "length" and len(generation.token_ids) == 6
    assert [(s.version, s.start, s.end) for s in generation.weight_versions] == [("v0", 0, 6)]
    assert generation.prompt_tokens == len(PROMPT) and generation.completion_tokens == 6
    expected = torch_logprobs(vllm_checkpoint, generation)
    assert generation.logprobs == pytest.approx(expected, abs=1e-4)
    routes = {path for _, path in recorder.routes()}
    assert {"/health", "/collective_rpc", "/update_weight_version", "/weight_info"} <= routes
    assert {"/is_paused", "/inference/v1/generate", "/pause", "/resume"} <= routes
    assert "/inference/v1/abort_requests" in routes


def test_reload_and_relabel_change_the_weights_and_the_label(
    vllm_client, vllm_checkpoint, other_weights
):
    async def generate_on(client: VLLMClient, weights: Path, label: str) -> Generation:
        await client.pause("keep")
        await client.reload_weights(str(weights))
        await client.update_weight_version(label)
        await client.resume()
        assert await client.weight_version() == label
        return await client.generate(request(f"relabel-{label}", 8))

    async def scenario(client: VLLMClient):
        on_b = await generate_on(client, other_weights, "vb")
        return on_b, await generate_on(client, vllm_checkpoint, "va")

    on_b, on_a = with_client(vllm_client, scenario)
    assert [s.version for s in on_b.weight_versions] == ["vb"]
    assert [s.version for s in on_a.weight_versions] == ["va"]
    assert on_b.logprobs == pytest.approx(torch_logprobs(other_weights, on_b), abs=1e-4)
    assert on_a.logprobs == pytest.approx(torch_logprobs(vllm_checkpoint, on_a), abs=1e-4)
    assert on_b.logprobs != pytest.approx(torch_logprobs(vllm_checkpoint, on_b), abs=1e-3)


def test_a_keep_mode_pause_holds_requests_across_a_reload(
    vllm_client, vllm_checkpoint, other_weights, recorder
):
    """Requests sent while paused wait, then run wholly on the new weights and label; those
    caught mid-generation straddle the reload: their tokens come from both versions."""

    async def scenario(client: VLLMClient):
        await client.reload_weights(str(vllm_checkpoint))
        await client.update_weight_version("old")
        running = await requests_running(client, recorder, "straddle-")  # the server is paused
        queued = asyncio.create_task(client.generate(request("queued", 8)))
        await sent(recorder, "queued")
        await client.reload_weights(str(other_weights))
        await client.update_weight_version("new")
        held = not queued.done()
        await client.resume()
        return held, await queued, await asyncio.gather(*running)

    held, queued, running = with_client(vllm_client, scenario)
    assert held, "a generate sent during a keep-mode pause must wait for /resume"
    assert [(s.version, s.start, s.end) for s in queued.weight_versions] == [("new", 0, 8)]
    assert queued.logprobs == pytest.approx(torch_logprobs(other_weights, queued), abs=1e-4)
    spans = [[s.version for s in g.weight_versions] for g in running]
    assert spans == [["old", "new"]] * REQUESTS, spans
    for generation in running:
        assert generation.finish_reason == "length" and len(generation.token_ids) == LONG


def test_aborting_requests_in_flight_ends_them_with_their_partial_tokens(vllm_client, recorder):
    async def scenario(client: VLLMClient):
        running = await requests_running(client, recorder, "abort-")  # the server is paused
        await client.abort([f"abort-{index}" for index in range(REQUESTS)])
        await client.resume()
        return await asyncio.gather(*running)

    generations = with_client(vllm_client, scenario)
    assert [g.finish_reason for g in generations] == ["abort"] * REQUESTS
    assert all(0 < len(g.token_ids) < LONG for g in generations)
    for generation in generations:  # the spans still cover exactly the tokens produced
        assert sum(s.end - s.start for s in generation.weight_versions) == len(generation.token_ids)


def test_a_generate_sent_during_an_abort_mode_pause_is_answered_after_resume(vllm_client, recorder):
    """0.33 answers 503 (the client retries until resume); 0.32 queues it. Either way the
    caller gets its generation once the server resumes, under the label set after it was
    sent."""

    async def scenario(client: VLLMClient):
        await client.update_weight_version("before-abort-pause")
        await client.pause("abort")
        waiting = asyncio.create_task(client.generate(request("after-abort-pause", 4)))
        await sent(recorder, "after-abort-pause")
        await client.update_weight_version("set-while-paused")
        held = not waiting.done()
        await client.resume()
        return held, await waiting

    held, generation = with_client(vllm_client, scenario)
    assert held and generation.finish_reason == "length" and len(generation.token_ids) == 4
    assert [(s.version, s.start, s.end) for s in generation.weight_versions] == [
        ("set-while-paused", 0, 4)
    ]


def test_stop_reason_at_eos_is_the_token_id_or_null(vllm_client):
    """0.32 reports the EOS token id as `stop_reason`; the 0.33 contract says null."""

    async def scenario(client: VLLMClient):
        return await asyncio.gather(
            *(client.generate(request(f"eos-{i}", LONG, ignore_eos=False)) for i in range(8))
        )

    stopped = [g for g in with_client(vllm_client, scenario) if g.finish_reason == "stop"]
    assert stopped, "an untrained policy emits EOS well within 100 tokens"
    assert all(g.token_ids[-1] == EOS_ID and g.stop_reason in (EOS_ID, None) for g in stopped)


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/inference/v1/generate", {"token_ids": [], "sampling_params": {}}, "body.token_ids"),
        ("/inference/v1/generate", {"token_ids": [1, -2], "sampling_params": {}}, None),
        ("/inference/v1/generate", {"token_ids": [1, 2]}, "body.sampling_params"),
        ("/update_weight_version", {"version": "x"}, "body.new_version"),
        ("/collective_rpc", {"kwargs": {}}, None),
    ],
)
def test_bad_input_is_answered_400(vllm, path, body, param):
    """Sent around the recorder (these requests break the request schemas on purpose); the
    answers must still match the contract's error schema."""

    async def scenario() -> httpx.Response:
        async with httpx.AsyncClient(trust_env=False) as http:
            return await http.post(f"{vllm[0].url}{path}", json=body)

    response = run(scenario())
    assert response.status_code == 400, response.text
    validate("error_response", response.json())
    error = response.json()["error"]
    assert error["code"] == 400 and (param is None or error["param"] == param), error


def test_a_bad_pause_mode_is_a_400_the_client_reports(vllm):
    async def scenario() -> InferenceRejected:
        client = VLLMClient(vllm[0].url)
        try:
            with pytest.raises(InferenceRejected, match="400") as caught:
                await client.pause("sideways")  # type: ignore[arg-type]
        finally:
            await client.aclose()
        return caught.value

    rejected = run(scenario())
    assert rejected.status == 400 and rejected.param == "query.mode"
