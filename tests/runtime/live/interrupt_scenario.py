"""Interrupt and resubmit, one scenario for the CPU twin and for real `vllm serve`.

Requests are frozen mid-generation on a server paused in keep mode (how, each suite says:
`freeze`), then a weight update in interrupt mode: `pause(mode=abort)` ends them with
their tokens so far; their resubmissions are sent while the server is still paused (vLLM
0.33 answers 503 and the client retries, 0.32 queues them), the other weights are loaded
and labelled `v1`, and the server resumes. `check` says what must hold of the result.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import attrs
import pytest
import torch

from rolloutlog.runtime.live.client import VLLMClient
from rolloutlog.runtime.live.episodes import TrainSample
from rolloutlog.runtime.live.model import load_checkpoint
from rolloutlog.runtime.live.partial import (
    JoinedGeneration,
    PartialGeneration,
    gradient_mask,
    outcome,
    resume,
)
from rolloutlog.runtime.live.protocol import GenerateRequest, Generation
from rolloutlog.runtime.live.trainer import GRPOTrainer, StepReport
from tests.runtime.live.vllm_contract import Recorder, wait_until

Freeze = Callable[
    [VLLMClient, Sequence[GenerateRequest]], Awaitable[list[asyncio.Task[Generation]]]
]


@attrs.frozen
class Interrupted:
    partials: list[PartialGeneration]
    joined: list[JoinedGeneration]
    held: bool  # no resubmission was answered before the server resumed


def resubmissions_sent(recorder: Recorder, prompt_length: int) -> int:
    """Generate calls sent with more than the prompt: resubmissions (retries included)."""
    return sum(
        path == "/inference/v1/generate" and len(json.loads(body)["token_ids"]) > prompt_length
        for _, path, body in recorder.sent
    )


async def interrupt_and_resubmit(
    client: VLLMClient,
    recorder: Recorder,
    requests: Sequence[GenerateRequest],
    freeze: Freeze,
    *,
    before: Path,
    after: Path,
) -> Interrupted:
    await client.reload_weights(str(before))
    await client.update_weight_version("v0")
    running = await freeze(client, requests)  # the server is paused in keep mode
    await client.pause("abort")
    first = [outcome(r, g) for r, g in zip(requests, await asyncio.gather(*running), strict=True)]
    partials = [p for p in first if isinstance(p, PartialGeneration)]
    if len(partials) != len(first):
        raise AssertionError(f"pause(mode=abort) did not interrupt them all: {first}")
    resumed = [asyncio.create_task(resume(client.generate, p, cache_salt="v1")) for p in partials]
    prompt = len(requests[0].token_ids)
    await wait_until(
        lambda: resubmissions_sent(recorder, prompt) >= len(partials), "the resubmissions"
    )
    await client.reload_weights(str(after))
    await client.update_weight_version("v1")
    held = not any(task.done() for task in resumed)
    await client.resume()
    joined = await asyncio.gather(*resumed)
    if not all(isinstance(j, JoinedGeneration) for j in joined):
        raise AssertionError(f"a resubmission was interrupted: {joined}")
    return Interrupted(partials, [j for j in joined if isinstance(j, JoinedGeneration)], held)


def model_logprobs(weights: Path, prompt: Sequence[int], tokens: Sequence[int]) -> list[float]:
    """The logprob the checkpoint at `weights` gives each of `tokens` after `prompt`."""
    model = load_checkpoint(weights)
    sequence = list(prompt) + list(tokens)
    with torch.no_grad():
        logits = model(torch.tensor([sequence[:-1]]))[0, len(prompt) - 1 :]
    picked = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(tokens).unsqueeze(-1))
    return list(picked.squeeze(-1).tolist())


def check(result: Interrupted, *, length: int, before: Path, after: Path) -> None:
    """Each partial holds v0's tokens so far; each joined completion continues it under v1
    to the full budget, every token's logprob that of the weights its segment names."""
    assert result.held, "a resubmission sent during the abort pause ran before /resume"
    for partial, joined in zip(result.partials, result.joined, strict=True):
        so_far = len(partial.token_ids)
        assert partial.interruptions == 1 and 0 < so_far < length, partial
        assert set(partial.token_versions) == {"v0"}
        assert joined.finish_reason == "length" and len(joined.token_ids) == length
        assert joined.versions == ("v0", "v1") and joined.interruptions == 1
        assert joined.token_ids[:so_far] == partial.token_ids
        assert joined.logprobs[:so_far] == partial.logprobs
        prompt, tokens = joined.request.token_ids, joined.token_ids
        on_before = model_logprobs(before, prompt, tokens)[:so_far]
        on_after = model_logprobs(after, prompt, tokens)[so_far:]
        assert list(joined.logprobs) == pytest.approx(on_before + on_after, abs=1e-4)
        mask = gradient_mask(joined.token_versions, trained_at=1, max_age=0)
        assert mask == (False,) * so_far + (True,) * (length - so_far)


def recording(trained: list[TrainSample]) -> Callable[[GRPOTrainer], None]:
    """A `run_driver(prepare=...)` that keeps every sample the trainer is given, and every
    checkpoint (so that `check_trained` can recompute their logprobs)."""

    def prepare(trainer: GRPOTrainer) -> None:
        trainer.broadcast.keep = 1000
        step = trainer.train_step

        def recorded(samples: Sequence[TrainSample], *, version: int) -> StepReport:
            trained.extend(samples)
            return step(samples, version=version)

        trainer.train_step = recorded  # type: ignore[method-assign]

    return prepare


def check_trained(trained: Sequence[TrainSample], weights: Path, *, checked: int = 3) -> None:
    """Every trained sample names the version of each token, oldest first; some span two
    versions, and (for the first `checked` of those) each behaviour logprob is the one the
    checkpoint of its token's version gives it."""
    for sample in trained:
        versions = sample.token_versions
        assert versions is not None and len(versions) == len(sample.completion_ids)
        assert list(versions) == sorted(versions)
    spanning = [s for s in trained if len(set(s.token_versions or ())) > 1]
    assert spanning, "a resumed episode trains with tokens of two versions"
    for sample in spanning[:checked]:
        expected = [
            model_logprobs(weights / f"v{version}", sample.prompt_ids, sample.completion_ids)[i]
            for i, version in enumerate(sample.token_versions or ())
        ]
        assert list(sample.inference_logprobs) == pytest.approx(expected, abs=1e-4)
