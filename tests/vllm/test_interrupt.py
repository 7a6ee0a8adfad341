"""Interrupt and resubmit against real `vllm serve` (CPU build 0.32), contract-checked.

The scenario of tests/runtime/live/interrupt_scenario.py, which the twin runs too: requests
caught mid-generation end with their tokens so far at `pause(mode=abort)`; resubmitted as
prompt token ids during the pause (0.32 queues them), they run after the reload and resume
under the new weights, and each joined completion has its full length, its first tokens
from v0 and the rest from v1, every logprob that of the weights that sampled it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rolloutlog.runtime.live.client import VLLMClient
from rolloutlog.runtime.live.protocol import GenerateRequest, Generation
from tests.runtime.live.interrupt_scenario import Interrupted, check, interrupt_and_resubmit
from tests.runtime.live.vllm_contract import run
from tests.vllm.stepping import LONG, REQUESTS, request, requests_running

PREFIX = "interrupt-"


def test_an_interrupted_request_is_resubmitted_with_its_tokens_and_joined(
    vllm_client, vllm_checkpoint, other_weights, recorder
):
    requests = [request(f"{PREFIX}{index}", LONG) for index in range(REQUESTS)]

    async def freeze(
        client: VLLMClient, sent: Sequence[GenerateRequest]
    ) -> list[asyncio.Task[Generation]]:
        return await requests_running(client, recorder, PREFIX)  # sends `requests`

    async def main() -> Interrupted:
        async with vllm_client() as client:
            return await interrupt_and_resubmit(
                client, recorder, requests, freeze, before=vllm_checkpoint, after=other_weights
            )

    result = run(main())
    check(result, length=LONG, before=vllm_checkpoint, after=other_weights)
