"""Partial generations: what an abort answer becomes, the resubmission, the join, the mask."""

from __future__ import annotations

import pytest

from rolloutlog.runtime.live.partial import (
    JoinedGeneration,
    PartialGeneration,
    Segment,
    extend,
    gradient_mask,
    outcome,
    policy_version,
    resubmission,
    resume,
)
from rolloutlog.runtime.live.protocol import (
    GenerateRequest,
    Generation,
    InferenceProtocolError,
    SamplingParams,
    WeightVersionSpan,
)
from tests.runtime.live.vllm_contract import run

REQUEST = GenerateRequest(
    request_id="ep-1",
    token_ids=(1, 2, 3),
    sampling=SamplingParams(max_tokens=6, temperature=1.0, seed=7),
    cache_salt="v0",
)


def answer(
    tokens: tuple[int, ...],
    spans: tuple[tuple[str, int, int], ...],
    reason: str = "abort",
    logprobs: bool = True,
) -> Generation:
    return Generation(
        request_id="ep-1",
        engine_request_id="generate-tokens-ep-1",
        token_ids=tokens,
        logprobs=tuple(-0.1 * t for t in tokens) if logprobs else None,
        finish_reason=reason,  # type: ignore[arg-type]
        stop_reason=None,
        weight_versions=tuple(WeightVersionSpan(version=v, start=s, end=e) for v, s, e in spans),
        prompt_tokens=3,
        completion_tokens=len(tokens),
    )


def test_an_abort_answer_is_a_partial_with_its_tokens_logprobs_and_versions():
    partial = outcome(REQUEST, answer((10, 11), (("v0", 0, 2),)))
    assert isinstance(partial, PartialGeneration)
    assert partial.token_ids == (10, 11) and partial.logprobs == pytest.approx((-1.0, -1.1))
    assert partial.token_versions == ("v0", "v0") and partial.remaining_tokens == 4
    assert partial.interruptions == 1


def test_a_finished_answer_is_joined_at_once():
    joined = outcome(REQUEST, answer((10, 11, 12), (("v0", 0, 3),), reason="stop"))
    assert isinstance(joined, JoinedGeneration)
    assert joined.finish_reason == "stop" and joined.interruptions == 0
    assert joined.versions == ("v0",)


def test_the_resubmission_sends_the_tokens_so_far_as_prompt_with_the_budget_left():
    partial = outcome(REQUEST, answer((10, 11), (("v0", 0, 2),)))
    assert isinstance(partial, PartialGeneration)
    again = resubmission(partial, cache_salt="v1")
    assert again.token_ids == (1, 2, 3, 10, 11) and again.request_id == "ep-1"
    assert again.sampling.max_tokens == 4 and again.sampling.seed == 7
    assert again.cache_salt == "v1"


def test_segments_join_across_interruptions_one_per_version():
    """Two interruptions, the second without a weight change: the v1 tokens of both calls
    form one segment, and every token keeps the logprob of the call that sampled it."""
    first = outcome(REQUEST, answer((10,), (("v0", 0, 1),)))
    assert isinstance(first, PartialGeneration)
    second = extend(first, answer((11, 12), (("v0", 0, 1), ("v1", 1, 2))))
    assert isinstance(second, PartialGeneration) and second.interruptions == 2
    joined = extend(second, answer((13, 14, 15), (("v1", 0, 3),), reason="length"))
    assert isinstance(joined, JoinedGeneration)
    assert joined.token_ids == (10, 11, 12, 13, 14, 15)
    assert [s.version for s in joined.segments] == ["v0", "v1"]
    assert joined.segments[0] == Segment(version="v0", token_ids=(10, 11), logprobs=(-1.0, -1.1))
    assert joined.token_versions == ("v0", "v0", "v1", "v1", "v1", "v1")
    assert joined.logprobs == pytest.approx(tuple(-0.1 * t for t in joined.token_ids))


def test_an_abort_that_spent_the_whole_budget_ends_as_length():
    partial = outcome(REQUEST, answer((10, 11), (("v0", 0, 2),)))
    assert isinstance(partial, PartialGeneration)
    done = extend(partial, answer((12, 13, 14, 15), (("v1", 0, 4),)))
    assert isinstance(done, JoinedGeneration) and done.finish_reason == "length"
    assert done.interruptions == 2 and len(done.token_ids) == 6


def test_resume_sends_the_resubmission_and_joins_its_answer():
    partial = outcome(REQUEST, answer((10, 11), (("v0", 0, 2),)))
    assert isinstance(partial, PartialGeneration)
    sent: list[GenerateRequest] = []

    async def generate(request: GenerateRequest) -> Generation:
        sent.append(request)
        return answer((12,), (("v1", 0, 1),), reason="stop")

    joined = run(resume(generate, partial, cache_salt="v1"))
    assert sent == [resubmission(partial, cache_salt="v1")]
    assert isinstance(joined, JoinedGeneration) and joined.token_ids == (10, 11, 12)


@pytest.mark.parametrize(
    ("generation", "message"),
    [
        (answer((10,), (("v0", 0, 1),), logprobs=False), "needs its logprobs"),
        (answer((10,), ()), "no weight_versions"),
    ],
)
def test_an_answer_that_cannot_be_joined_is_a_protocol_error(generation, message):
    with pytest.raises(InferenceProtocolError, match=message):
        outcome(REQUEST, generation)


def test_the_mask_keeps_gradient_on_tokens_within_the_age_bound():
    versions = ("v3", "v4", "v5")
    assert gradient_mask(versions, trained_at=5, max_age=1) == (False, True, True)
    assert gradient_mask(versions, trained_at=5, max_age=2) == (True, True, True)
    with pytest.raises(ValueError, match="max_age"):
        gradient_mask(versions, trained_at=5, max_age=-1)


@pytest.mark.parametrize("label", ["default", "v", "3", "v-1"])
def test_a_label_that_names_no_policy_version_is_refused(label):
    with pytest.raises(ValueError, match="is not v<k>"):
        policy_version(label)
    assert policy_version("v12") == 12
