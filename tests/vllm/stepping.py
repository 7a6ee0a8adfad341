"""Requests frozen mid-generation on a real `vllm serve`, whatever the machine's speed.

vLLM's CPU build writes a completion in a fraction of a second on a quiet machine, faster
than `GET /metrics` can be polled, and on a loaded one a pause may land a hundred decode
steps after the resume before it. So a test steps the server instead: requests are sent
during a keep-mode pause, then the server is resumed and paused again at once, a few decode
steps at a time, until vLLM's own metrics (`vllm:num_requests_running`, as of the last step
before the pause) count them running. They are then frozen mid-generation on a paused
server, and the test acts on them (reloads, aborts, an abort-mode pause).

`requests_running` catches `REQUESTS` long requests for the route tests; `FreezingClient`
freezes whatever a live run has in flight before each abort-mode pause of a weight update,
so that the update always finds work generating (on a quiet machine a run's short
completions all end before the update, on a loaded one they do not: neither is a test).
"""

from __future__ import annotations

import asyncio
import functools
import re
from typing import Final

import attrs
import httpx

from rolloutlog.runtime.live.client import ClientLimits, VLLMClient
from rolloutlog.runtime.live.digits import task_from_id
from rolloutlog.runtime.live.protocol import GenerateRequest, Generation, PauseMode, SamplingParams
from tests.runtime.live.vllm_contract import Recorder, wait_until

PROMPT: Final = tuple(task_from_id("vllm").prompt_ids)
LONG: Final = 100  # output tokens of a request that must be caught running (context: 128)
REQUESTS: Final = 8  # requests caught mid-generation by a pause or an abort
STEPPINGS: Final = 50  # resume-then-pause rounds allowed for them to be counted running
CATCHES: Final = 3  # tries of `requests_running` (a try whose requests all ended is redone)
METRIC: Final = rb"^%s\{[^}]*\} ([0-9.e+]+)$"
RUNNING: Final = re.compile(METRIC % rb"vllm:num_requests_running", re.MULTILINE)
GENERATED: Final = re.compile(METRIC % rb"vllm:generation_tokens_total", re.MULTILINE)


@attrs.frozen
class EngineCounts:
    """What vLLM's `/metrics` say of its last step: requests running then, and tokens
    generated up to it. Both stay frozen while paused, and a server left idle after an
    abort keeps the count of its last step: `running` speaks of requests sent since a
    snapshot only once `generated` has grown past that snapshot's."""

    running: float
    generated: float

    def stepped_since(self, earlier: EngineCounts) -> bool:
        return self.generated > earlier.generated


async def engine_counts(url: str) -> EngineCounts:
    async with httpx.AsyncClient(trust_env=False) as http:
        metrics = (await http.get(f"{url}/metrics")).raise_for_status().content
    running, generated = (sum(float(n) for n in p.findall(metrics)) for p in (RUNNING, GENERATED))
    return EngineCounts(running=running, generated=generated)


def request(request_id: str, max_tokens: int = 4, *, ignore_eos: bool = True) -> GenerateRequest:
    sampling = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos, seed=len(request_id))
    return GenerateRequest(request_id=request_id, token_ids=PROMPT, sampling=sampling)


async def step(client: VLLMClient) -> None:
    """Resume, then pause in keep mode at once: the server takes a few decode steps."""
    await client.resume()
    await client.pause("keep")


def generates_sent(recorder: Recorder) -> int:
    return sum(path == "/inference/v1/generate" for _, path, _ in recorder.sent)


def _sent_all(recorder: Recorder, wanted: int) -> bool:
    return generates_sent(recorder) >= wanted


async def requests_running(
    client: VLLMClient, recorder: Recorder, prefix: str
) -> list[asyncio.Task[Generation]]:
    """`REQUESTS` long requests (ids `prefix` + index), returned frozen mid-generation on a
    server left paused in keep mode.

    A try whose requests end before vLLM counts them all running (a round that ran long on
    a loaded machine) is not a result: they are let finish and sent again, `CATCHES` times.
    """
    for _ in range(CATCHES):
        await client.pause("keep")
        before, wanted = await engine_counts(client.url), generates_sent(recorder) + REQUESTS
        tasks = [
            asyncio.create_task(client.generate(request(f"{prefix}{index}", LONG)))
            for index in range(REQUESTS)
        ]
        await wait_until(functools.partial(_sent_all, recorder, wanted), "the generates")
        # One more round trip after them, so that the first round does not run while they
        # are still being written: that round once took 97 of a request's 100 tokens.
        await client.is_paused()
        if await _step_until_running(client, tasks, before):
            return tasks
        await client.resume()
        await asyncio.gather(*tasks)  # raises if one failed rather than finished
    raise AssertionError(f"{CATCHES} tries: the requests finished before all were caught")


async def _step_until_running(
    client: VLLMClient, tasks: list[asyncio.Task[Generation]], before: EngineCounts
) -> bool:
    """Step until vLLM counts every task's request running: True; False if one finished."""
    for _ in range(STEPPINGS):
        await step(client)
        if any(task.done() for task in tasks):
            return False
        counts = await engine_counts(client.url)
        if counts.stepped_since(before) and counts.running >= len(tasks):
            return True
    raise AssertionError(f"vLLM never counted {len(tasks)} requests running: {tasks}")


class FreezingClient(VLLMClient):
    """A `VLLMClient` whose abort-mode pause first freezes a request it has in flight
    mid-generation (keep-mode pause, then steps until vLLM counts one running), so that a
    weight update in interrupt mode finds work generating on any machine. What the update
    then does (abort, reload, relabel, resume) is the client's own."""

    def __init__(self, url: str, *, limits: ClientLimits | None = None) -> None:
        super().__init__(url, limits=limits)
        self.in_flight = 0  # generate calls sent and not yet answered
        self.frozen = 0  # abort-mode pauses that found a request generating

    async def generate(self, request: GenerateRequest) -> Generation:
        self.in_flight += 1
        try:
            return await super().generate(request)
        finally:
            self.in_flight -= 1

    async def pause(self, mode: PauseMode = "keep", clear_cache: bool = True) -> None:
        if mode == "abort":
            await super().pause("keep")
            self.frozen += await self._freeze_one()
        await super().pause(mode, clear_cache)

    async def _freeze_one(self) -> bool:
        """Step while a generate call is unanswered, until vLLM counts one running."""
        before = await engine_counts(self.url)
        for _ in range(STEPPINGS):
            if self.in_flight == 0:
                return False  # nothing sent here to freeze
            await step(self)
            counts = await engine_counts(self.url)
            if counts.stepped_since(before) and counts.running >= 1:
                return True
        raise AssertionError(f"{self.url}: no request counted running in {STEPPINGS} steps")
