"""Interrupt and resubmit against the CPU twin, as vLLM 0.33 (503 while paused) and 0.32
(queued while paused) behave; tests/vllm/test_interrupt.py runs the same scenario on vLLM."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from rolloutlog.runtime.live.client import VLLMClient
from rolloutlog.runtime.live.digits import task_from_id
from rolloutlog.runtime.live.protocol import GenerateRequest, Generation, SamplingParams
from rolloutlog.runtime.live.twin.launch import serve_in_thread
from rolloutlog.runtime.live.twin.server import InferenceServer
from tests.runtime.live.interrupt_scenario import check, interrupt_and_resubmit
from tests.runtime.live.vllm_contract import run, wait_for_engine_requests

PROMPT = tuple(task_from_id("interrupt").prompt_ids)
LONG = 60
REQUESTS = 4
STEPPINGS = 200


def requests() -> list[GenerateRequest]:
    return [
        GenerateRequest(
            request_id=f"interrupt-{index}",
            token_ids=PROMPT,
            sampling=SamplingParams(max_tokens=LONG, ignore_eos=True, seed=index),
            cache_salt="v0",
        )
        for index in range(REQUESTS)
    ]


def twin_freeze(server: InferenceServer):
    """Send the requests during a keep pause, then resume-and-pause until a step has run:
    every step advances every request by one token, so each has one token or more."""

    async def freeze(
        client: VLLMClient, sent: Sequence[GenerateRequest]
    ) -> list[asyncio.Task[Generation]]:
        await client.pause("keep")
        tasks = [asyncio.create_task(client.generate(r)) for r in sent]
        await wait_for_engine_requests(client.url, len(sent))
        for _ in range(STEPPINGS):
            if server.engine.tokens_total >= len(sent):
                return tasks
            await client.resume()
            await client.pause("keep")
        raise AssertionError(f"the twin took no step in {STEPPINGS} resumes")

    return freeze


@pytest.mark.parametrize("queue_when_paused", [False, True], ids=["vllm-0.33", "vllm-0.32"])
def test_an_interrupted_request_is_resubmitted_with_its_tokens_and_joined(
    checkpoints, contract_client, recorder, queue_when_paused
):
    server = serve_in_thread(checkpoints["a"], queue_when_paused=queue_when_paused)
    try:

        async def scenario():
            client = contract_client(server.url, backoff_s=0.01)
            try:
                return await interrupt_and_resubmit(
                    client,
                    recorder,
                    requests(),
                    twin_freeze(server),
                    before=checkpoints["a"],
                    after=checkpoints["b"],
                )
            finally:
                await client.aclose()

        result = run(scenario())
    finally:
        server.stop()
    check(result, length=LONG, before=checkpoints["a"], after=checkpoints["b"])
    statuses = {e.status for e in recorder.exchanges if e.path == "/inference/v1/generate"}
    assert statuses == ({200} if queue_when_paused else {200, 503})
