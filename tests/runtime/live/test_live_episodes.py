"""The driver's bookkeeping: what it sends, what it records, and that it forgets in time."""

from __future__ import annotations

import attrs
import pytest

from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeFailed,
    GroupOpened,
    GroupScored,
)
from rolloutlog.runtime.live.digits import EOS_ID, task_from_id
from rolloutlog.runtime.live.episodes import BookError, EpisodeBook, episode_seed
from rolloutlog.runtime.live.protocol import Generation, WeightVersionSpan


def _book() -> EpisodeBook:
    return EpisodeBook(run_seed=7, temperature=1.0, request_prefix="rl1234-")


def _opened(group_id: str = "g1", version: int = 3, size: int = 2) -> GroupOpened:
    return GroupOpened(
        t=0.0,
        group_id=group_id,
        work="train",
        env="main",
        task_id="t5",
        group_size=size,
        policy_version=version,
        step=1,
        frozen=False,
    )


def _dispatched(member: int, version: int = 4, group_id: str = "g1") -> EpisodeDispatched:
    return EpisodeDispatched(
        t=0.0,
        episode_id=f"{group_id}/{member}",
        group_id=group_id,
        member=member,
        policy_version=version,
    )


def _generation(tokens: list[int], finish: str = "stop") -> Generation:
    return Generation(
        request_id="x",
        engine_request_id="generate-tokens-x",
        token_ids=tuple(tokens),
        logprobs=tuple(-0.5 for _ in tokens),
        finish_reason=finish,  # type: ignore[arg-type]
        stop_reason=None,
        weight_versions=(WeightVersionSpan(version="v4", start=0, end=len(tokens)),),
        prompt_tokens=7,
        completion_tokens=len(tokens),
    )


def test_a_request_carries_the_group_salt_a_stable_seed_and_a_safe_id():
    book = _book()
    book.group_opened(_opened(version=3))
    request = book.request(_dispatched(1, version=5))
    assert request.cache_salt == "v3"  # the group's start version, not the episode's
    assert request.request_id == "rl1234-g1-1"
    assert "/" not in request.request_id
    assert request.token_ids == tuple(task_from_id("t5").prompt_ids)
    assert request.sampling.seed == episode_seed(7, "g1/1") == episode_seed(7, "g1/1")
    assert request.sampling.seed != episode_seed(8, "g1/1")
    assert request.sampling.max_tokens == task_from_id("t5").max_tokens
    assert request.sampling.logprobs == 0


def test_a_completion_is_scored_and_kept_until_its_batch_ships():
    book = _book()
    book.group_opened(_opened())
    target = task_from_id("t5").target_ids
    done = book.arrived(_dispatched(0), _generation(target), t=1.0)
    assert isinstance(done, EpisodeCompleted) and done.reward == 1.0
    wrong = book.arrived(_dispatched(1), _generation([EOS_ID]), t=1.1)
    assert isinstance(wrong, EpisodeCompleted) and wrong.reward < 1.0
    book.scored(
        GroupScored(t=1.1, group_id="g1", episode_ids=("g1/0", "g1/1"),
                    advantages=(0.4, -0.4), admitted=True)
    )  # fmt: skip
    assert book.rollouts_kept == 2 and book.groups_open == 0
    batch = book.shipped(
        BatchShipped(t=2.0, step=6, episode_ids=("g1/0", "g1/1"), trained_ids=("g1/0",),
                     tokens=len(target))
    )  # fmt: skip
    assert [s.advantage for s in batch.samples] == [0.4]
    assert batch.samples[0].completion_ids == tuple(target)
    assert batch.versions == (4,)
    assert batch.mean_reward == pytest.approx((1.0 + wrong.reward) / 2)
    assert book.rollouts_kept == 0  # pruned and trained alike are forgotten


def test_a_group_left_out_of_training_is_forgotten_at_scoring():
    book = _book()
    book.group_opened(_opened())
    book.arrived(_dispatched(0), _generation([1, 2]), t=1.0)
    book.arrived(_dispatched(1), _generation([1, 2]), t=1.0)
    book.scored(GroupScored(t=1.0, group_id="g1", episode_ids=(), advantages=(), admitted=False))
    assert book.rollouts_kept == 0


def test_a_cancelled_episode_abort_is_not_recorded_but_a_race_won_is_a_late_completion():
    book = _book()
    book.group_opened(_opened())
    book.cancelled("g1", ["g1/0", "g1/1"])
    book.scored(GroupScored(t=1.0, group_id="g1", episode_ids=(), advantages=(), admitted=False))
    assert book.arrived(_dispatched(0), _generation([3], finish="abort"), t=1.2) is None
    late = book.arrived(_dispatched(1), _generation(task_from_id("t5").target_ids), t=1.3)
    # the group finalized meanwhile, yet the late completion is scored with its own task
    assert isinstance(late, EpisodeCompleted) and late.reward == 1.0
    assert book.rollouts_kept == 0  # a late episode never trains: nothing kept


def test_an_abort_nobody_asked_for_is_a_failure():
    book = _book()
    book.group_opened(_opened())
    failed = book.arrived(_dispatched(0), _generation([], finish="abort"), t=1.0)
    assert isinstance(failed, EpisodeFailed) and "aborted by inference" in failed.error


def test_an_episode_cancelled_before_it_was_sent_is_simply_forgotten():
    book = _book()
    book.group_opened(_opened())
    book.cancelled("g1", ["g1/0"])
    assert book.forget_if_cancelled("g1/0")
    assert not book.forget_if_cancelled("g1/0")


def test_a_batch_naming_an_unknown_rollout_is_a_clear_bug_report():
    book = _book()
    with pytest.raises(BookError, match="ships g9/0, which has no rollout"):
        book.shipped(BatchShipped(t=0, step=1, episode_ids=("g9/0",), trained_ids=(), tokens=0))
    with pytest.raises(BookError, match="group g9 is not open"):
        book.request(_dispatched(0, group_id="g9"))


def test_the_book_asks_for_the_hard_tail_its_share_names():
    hard_id = next(f"t{i}" for i in range(100) if task_from_id(f"t{i}", 0.5).difficulty == "hard")
    book = EpisodeBook(run_seed=7, temperature=1.0, request_prefix="p-", hard_task_share=0.5)
    book.group_opened(attrs.evolve(_opened(), task_id=hard_id))
    request = book.request(_dispatched(0))
    assert request.token_ids == tuple(task_from_id(hard_id, 0.5).prompt_ids)
    assert request.sampling.max_tokens == task_from_id(hard_id, 0.5).max_tokens > 7
