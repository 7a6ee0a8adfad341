"""Interrupted generations and their resubmission under new weights (interrupt mode).

A weight update in interrupt mode pauses inference with `mode=abort`: every generate in
flight answers 200 with `finish_reason="abort"` and the tokens it had so far, their
logprobs and the `weight_versions` that generated them. That answer is not a failure:
`outcome` turns it into a `PartialGeneration`, and `resume` sends the prompt plus those
tokens (as prompt token ids) with the rest of the token budget, under whatever weights
inference serves by then, and joins what comes back. The result, a `JoinedGeneration`
(or, if the resubmission is interrupted in turn, a longer `PartialGeneration`), keeps the
tokens in `Segment`s, one per weight version, so each token carries the version that
sampled it and the behaviour logprob that version gave it: what the trainer's importance
ratio needs, and what `gradient_mask` reads when tokens from old versions are masked.

Why the resubmission keeps the caller's request id and seed: one id per episode is what
the driver aborts by, and vLLM accepts an id again once its earlier request has finished
(the abort answer comes after that). The seed only fixes the sampler's noise; reusing it
for the continuation keeps a rerun reproducible and the samples correctly distributed.
The prefix-cache salt is the caller's to choose (`cache_salt`): the resubmitted prompt
starts with the episode's prompt, whose cached KV under the old weights must not be reused.

A generate sent while the engine is paused in abort mode is refused with 503 by vLLM 0.33
(the client retries until `/resume`) and queued by vLLM 0.32: either way it runs after the
resume, and the `weight_versions` of its answer say which weights generated its tokens.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import attrs

from rolloutlog.runtime.live.protocol import (
    GenerateRequest,
    Generation,
    InferenceProtocolError,
)

Generate = Callable[[GenerateRequest], Awaitable[Generation]]
EndReason = Literal["stop", "length", "repetition"]


@attrs.frozen(kw_only=True)
class Segment:
    """Consecutive output tokens that the weights labelled `version` sampled."""

    version: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]

    def __attrs_post_init__(self) -> None:
        if len(self.logprobs) != len(self.token_ids):
            raise ValueError(
                f"segment {self.version!r}: {len(self.logprobs)} logprobs for "
                f"{len(self.token_ids)} tokens"
            )


@attrs.frozen(kw_only=True)
class _Segmented:
    """The tokens of an episode so far, kept in segments; `request` is the first one sent."""

    request: GenerateRequest
    segments: tuple[Segment, ...]
    interruptions: int

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(t for segment in self.segments for t in segment.token_ids)

    @property
    def logprobs(self) -> tuple[float, ...]:
        """The behaviour logprob of each token, from the segment that sampled it."""
        return tuple(lp for segment in self.segments for lp in segment.logprobs)

    @property
    def token_versions(self) -> tuple[str, ...]:
        """The weight-version label of each token."""
        return tuple(s.version for s in self.segments for _ in s.token_ids)


@attrs.frozen(kw_only=True)
class PartialGeneration(_Segmented):
    """An interrupted episode: its tokens so far, waiting to be resubmitted."""

    @property
    def remaining_tokens(self) -> int | None:
        """The rest of the token budget (None: the server's default, the context left)."""
        budget = self.request.sampling.max_tokens
        return None if budget is None else budget - len(self.token_ids)


@attrs.frozen(kw_only=True)
class JoinedGeneration(_Segmented):
    """A finished episode, however many times it was interrupted on the way."""

    finish_reason: EndReason
    stop_reason: int | str | None

    @property
    def versions(self) -> tuple[str, ...]:
        """The labels that generated its tokens, oldest first."""
        return tuple(segment.version for segment in self.segments)


def segments_of(where: str, generation: Generation) -> tuple[Segment, ...]:
    """A generation's tokens cut at its `weight_versions` spans."""
    tokens, logprobs = generation.token_ids, generation.logprobs
    if not tokens:
        return ()
    if logprobs is None:
        raise InferenceProtocolError(f"{where}: a generation to join needs its logprobs")
    if not generation.weight_versions:
        raise InferenceProtocolError(f"{where}: {len(tokens)} tokens but no weight_versions")
    return tuple(
        Segment(
            version=span.version,
            token_ids=tokens[span.start : span.end],
            logprobs=logprobs[span.start : span.end],
        )
        for span in generation.weight_versions
    )


def _joined(earlier: tuple[Segment, ...], later: tuple[Segment, ...]) -> tuple[Segment, ...]:
    """Concatenate, merging two segments of one version where they meet (an interruption
    with no weight change in between)."""
    if earlier and later and earlier[-1].version == later[0].version:
        first, second = earlier[-1], later[0]
        merged = Segment(
            version=first.version,
            token_ids=first.token_ids + second.token_ids,
            logprobs=first.logprobs + second.logprobs,
        )
        return (*earlier[:-1], merged, *later[1:])
    return earlier + later


def extend(
    partial: PartialGeneration, generation: Generation
) -> PartialGeneration | JoinedGeneration:
    """Add one generate answer (for `partial`'s resubmission, or its first request when
    `partial` has no tokens yet) to what the episode has so far.

    An abort gives a longer partial, unless it spent the whole budget: then the episode
    ends as `length`, as it would have uninterrupted.
    """
    where = f"request {partial.request.request_id!r}"
    segments = _joined(partial.segments, segments_of(where, generation))
    if generation.finish_reason != "abort":
        return JoinedGeneration(
            request=partial.request,
            segments=segments,
            interruptions=partial.interruptions,
            finish_reason=generation.finish_reason,
            stop_reason=generation.stop_reason,
        )
    longer = PartialGeneration(
        request=partial.request, segments=segments, interruptions=partial.interruptions + 1
    )
    if longer.remaining_tokens is not None and longer.remaining_tokens <= 0:
        return JoinedGeneration(
            request=partial.request,
            segments=segments,
            interruptions=longer.interruptions,
            finish_reason="length",
            stop_reason=None,
        )
    return longer


def outcome(
    request: GenerateRequest, generation: Generation
) -> PartialGeneration | JoinedGeneration:
    """What the first generate call of an episode amounts to: joined when it finished,
    partial when inference aborted it."""
    return extend(PartialGeneration(request=request, segments=(), interruptions=0), generation)


def resubmission(partial: PartialGeneration, *, cache_salt: str | None) -> GenerateRequest:
    """The generate call that continues `partial`: the prompt plus its tokens so far as
    prompt token ids, the rest of the budget, the same id, seed and sampling."""
    first = partial.request
    remaining = partial.remaining_tokens
    if remaining is not None and remaining < 1:
        raise ValueError(f"request {first.request_id!r} has no token budget left to resubmit")
    return GenerateRequest(
        request_id=first.request_id,
        token_ids=first.token_ids + partial.token_ids,
        sampling=attrs.evolve(first.sampling, max_tokens=remaining),
        cache_salt=cache_salt,
    )


async def resume(
    generate: Generate, partial: PartialGeneration, *, cache_salt: str | None
) -> PartialGeneration | JoinedGeneration:
    """Resubmit `partial` through `generate` (a client's, or the pool's for its group) and
    join the answer: joined when it finished, a longer partial if it was interrupted again."""
    return extend(partial, await generate(resubmission(partial, cache_salt=cache_salt)))


def policy_version(label: str) -> int:
    """The policy version a weight label names: the driver labels version k `v<k>`."""
    digits = label[1:]
    if not label.startswith("v") or not digits.isdigit():
        raise ValueError(f"weight version label {label!r} is not v<k>")
    return int(digits)


def gradient_mask(
    token_versions: Sequence[str], *, trained_at: int, max_age: int
) -> tuple[bool, ...]:
    """Which tokens carry gradient when tokens from old versions are masked: those sampled
    at most `max_age` versions before the step that trains them (`trained_at`, the
    version the trainer holds). The masked ones stay in the sequence as context."""
    if max_age < 0:
        raise ValueError(f"max_age must be >= 0, got {max_age}")
    return tuple(trained_at - policy_version(label) <= max_age for label in token_versions)
