"""slime's over-sampling and its abort of the leftovers (the slime-oversample preset): a
step sends out rounds of `over_sampling_batch_size` groups, and the batch that fills
aborts everything of its step still out; nothing of it trains later."""

from __future__ import annotations

from typing import Any

import pytest

from rolloutlog.core.account import InvariantViolation
from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.presets import CHOICES, preset_overrides
from rolloutlog.core.rules import oversampling
from rolloutlog.events.types import EpisodeDropped, EpisodesCancelled, GroupOpened, VersionLive
from tests.core.test_scenarios import Run

# G = 2, a batch of two groups, permits for four: rounds of three groups leave one spare.
SMALL: dict[str, Any] = {"group_size": 2, "max_inflight": 8, "batch_size": 4}


def _run(**config: Any) -> Run:
    return Run(**{**SMALL, **preset_overrides("slime-oversample"), **config})


def _train_opened(run: Run) -> list[str]:
    return [e.group_id for e in run.log if isinstance(e, GroupOpened) and e.work == "train"]


def _leftovers(run: Run) -> tuple[list[tuple[str, tuple[str, ...], int]], dict[str, str]]:
    cancelled = [
        (e.group_id, e.episode_ids, e.unscheduled)
        for e in run.log
        if isinstance(e, EpisodesCancelled) and e.reason == "leftover"
    ]
    drops = {e.episode_id: e.reason for e in run.log if isinstance(e, EpisodeDropped)}
    return cancelled, drops


def test_a_step_sends_one_round_and_the_full_batch_aborts_the_rest() -> None:
    run = _run(over_sampling_batch_size=3)
    assert _train_opened(run) == ["g1", "g2", "g3"]  # 6 of 8 permits: the round, not more
    run.complete("g1/0", "g1/1", "g2/0", "g3/0")
    run.complete("g2/1")  # g1 and g2 fill batch 1: g3 is a leftover
    cancelled, drops = _leftovers(run)
    assert cancelled == [("g3", ("g3/1",), 0)]
    assert drops == {"g3/0": "leftover"}  # its finished member is lost with it
    assert _train_opened(run) == ["g1", "g2", "g3"]  # synchronous: waits for v1
    run.publish(1)
    assert _train_opened(run) == ["g1", "g2", "g3"]  # and for the update to be live
    run.feed(VersionLive(t=run.t, version=1))  # train.py: the next step after update_weights
    assert _train_opened(run) == ["g1", "g2", "g3", "g4", "g5", "g6"]


def test_by_default_a_round_is_a_batch_and_a_rejected_group_tops_it_up() -> None:
    run = _run(curriculum="informative")  # slime's opt-in DAPO filter
    assert _train_opened(run) == ["g1", "g2"]
    run.complete("g1/0", "g1/1")  # equal rewards: rejected, its two episodes lost
    assert _train_opened(run) == ["g1", "g2", "g3", "g4"]  # one more round of two groups


def test_a_finished_episode_the_batch_did_not_take_is_dropped_with_it() -> None:
    run = _run(batch_size=3)  # two groups a round, four episodes for a batch of three
    run.complete("g1/0", "g1/1", "g2/0", "g2/1")
    assert run.of_kind("batch_shipped")[0].episode_ids == ("g1/0", "g1/1", "g2/0")
    assert _leftovers(run) == ([], {"g2/1": "leftover"})  # slime keeps no group past it


def test_a_round_smaller_than_a_batch_is_refused_as_slime_refuses_it() -> None:
    with pytest.raises(ConfigError, match="over_sampling_batch_size: must be >= the 2 groups"):
        RunConfig.from_mapping({**SMALL, "admission": "slime", "over_sampling_batch_size": 1})


def test_the_grant_is_whole_rounds_until_what_is_not_lost_fills_a_batch() -> None:
    config = RunConfig.from_mapping({**SMALL, "over_sampling_batch_size": 3})
    assert [oversampling.granted(config, 4, lost) for lost in (0, 2, 3)] == [6, 6, 12]


def _planted(monkeypatch: pytest.MonkeyPatch, rule: str, planted: object) -> Run:
    """A run whose abort rule has `planted` in place of its `rule` (a bug in a decider)."""
    monkeypatch.setitem(CHOICES["leftovers"]["abort"], rule, planted)
    return _run(over_sampling_batch_size=3)


def test_the_account_catches_a_dispatcher_that_keeps_the_leftovers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = _planted(monkeypatch, "abort_leftovers", oversampling.leftovers_run_on)
    with pytest.raises(InvariantViolation, match="leftovers not aborted at the ship: \\['g3'\\]"):
        run.complete("g1/0", "g1/1", "g2/0", "g2/1")


def test_the_account_catches_a_sink_that_trains_a_leftover(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = _planted(monkeypatch, "leftover_group", oversampling.never_leftover)
    run.complete("g1/0", "g1/1", "g2/0", "g3/0")
    with pytest.raises(InvariantViolation, match="g3 is a leftover, and scores 1"):
        run.complete("g2/1")
