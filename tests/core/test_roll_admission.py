"""ROLL's generation budget (`admission = "roll"`, `async_generation_ratio` α): train groups
begun and not aborted stay under `⌈α·B⌉ + (v + 1)·B`, B prompts (groups) a batch."""

from __future__ import annotations

from typing import Any

import pytest

from rolloutlog.core import presets
from rolloutlog.core.account import InvariantViolation
from rolloutlog.core.config import RunConfig
from rolloutlog.core.rules import admission_field
from rolloutlog.core.rules.composition import roll_window, take
from rolloutlog.core.state import Queued
from rolloutlog.events.types import GroupOpened
from tests.core.test_scenarios import Run

# G = 2, B = 2 groups a batch, α = 0.5: a budget of ⌈1⌉ + 2 = 3 groups at version 0.
ROLL: dict[str, Any] = {
    "group_size": 2,
    "batch_size": 4,
    "max_inflight": 20,
    "admission": "roll",
    "async_generation_ratio": 0.5,
}


def _opened(run: Run) -> list[str]:
    return [e.group_id for e in run.log if isinstance(e, GroupOpened)]


@pytest.mark.parametrize(("ratio", "groups"), [(0.0, 2), (0.5, 3), (1.0, 4), (1.5, 5)])
def test_the_budget_is_the_head_start_and_one_batch_per_version(ratio: float, groups: int) -> None:
    run = Run(**{**ROLL, "async_generation_ratio": ratio})
    assert _opened(run) == [f"g{n}" for n in range(1, groups + 1)]


def test_a_version_adds_one_batch_of_groups() -> None:
    run = Run(**ROLL)
    run.complete(*(f"g{n}/{m}" for n in (1, 2) for m in (0, 1)))  # batch 1 ships
    assert _opened(run) == ["g1", "g2", "g3"]
    run.publish(1)
    assert _opened(run) == ["g1", "g2", "g3", "g4", "g5"]


def test_a_stale_abort_gives_its_group_back() -> None:
    run = Run(**{**ROLL, "max_off_policy_steps": 0, "target_lag": 0, "staleness": "per-group"})
    run.complete("g1/0", "g1/1", "g2/0", "g2/1")  # batch 1 ships; g3 runs at v0
    run.publish(1)  # g3 is stale and aborted: its place and version 1's batch open g4-g6
    assert _opened(run) == ["g1", "g2", "g3", "g4", "g5", "g6"]


def test_the_account_catches_a_dispatcher_past_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    def generous(config: Any, ledger: Any, version: int) -> int | None:
        left = admission_field.roll_left(config, ledger, version)
        return None if left is None else left + config.group_size  # one group too many

    monkeypatch.setitem(presets.CHOICES["admission"]["roll"], "allowance", generous)
    with pytest.raises(InvariantViolation, match="roll admission: 3 groups begun"):
        Run(**ROLL)


def test_the_account_counts_a_stale_abort_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past version 0, a planted dispatcher opens groups past the budget, up to the 4 that
    8 permits hold: after g3's abort the account counts 2 begun, so g7 is the one it
    reports (counting the abort twice, it would report none)."""

    def generous_later(config: Any, ledger: Any, version: int) -> int | None:
        left = admission_field.roll_left(config, ledger, version)
        return left if left is None or version == 0 else left + config.group_size

    monkeypatch.setitem(presets.CHOICES["admission"]["roll"], "allowance", generous_later)
    stale = {"max_off_policy_steps": 0, "target_lag": 0, "staleness": "per-group"}
    run = Run(**{**ROLL, **stale, "max_inflight": 8})
    run.complete("g1/0", "g1/1", "g2/0", "g2/1")
    with pytest.raises(InvariantViolation, match="5 groups begun and not aborted, budget 5"):
        run.publish(1)


def _queued(*entries: tuple[str, int]) -> dict[str, Queued]:
    return {episode_id: Queued(version, 0.5, 10, False) for episode_id, version in entries}


def test_roll_window_takes_whole_groups_oldest_first_with_the_oldest_capped() -> None:
    # batch 4 at step 4, α = 1.5: versions >= 4 - 1 - 2 = 1; version 1 gives at most
    # int(4 × 0.5) = 2 episodes, in whole groups; version 0 is outside the window.
    config = RunConfig.from_mapping({"batch_size": 4, "async_generation_ratio": 1.5})
    queue = _queued(
        ("g1/0", 0), ("g2/0", 1), ("g2/1", 1), ("g3/0", 1), ("g4/0", 2), ("g4/1", 2), ("g5/0", 3)
    )
    assert roll_window(queue, config, 4) == ["g2/0", "g2/1", "g4/0", "g4/1", "g5/0"]
    assert take(roll_window, config, queue, 4) == ["g2/0", "g2/1", "g4/0", "g4/1"]
    whole = RunConfig.from_mapping({"batch_size": 4, "async_generation_ratio": 2.0})
    assert roll_window(queue, whole, 4)[:3] == ["g2/0", "g2/1", "g3/0"]  # no cap when whole


def test_a_batch_the_window_cannot_fill_is_not_cut() -> None:
    config = RunConfig.from_mapping({"batch_size": 2, "async_generation_ratio": 0.0})
    queue = _queued(("g1/0", 0), ("g1/1", 0), ("g2/0", 1))
    assert take(roll_window, config, queue, 2) == []  # only version 1 is in the window
