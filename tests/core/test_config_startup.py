"""The combinations `RunConfig.startup_problems` refuses, each planted in a generated
startable config: refused by its whole text (what a user reads), yet folded as recorded;
and each limit itself, undone at its boundary, starts.

The refusals' texts and limits are written here again, apart from `core.config`, so a
check that stops refusing, refuses at the wrong boundary, or changes its text fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import MAX_INFLIGHT, ConfigError, RunConfig
from rolloutlog.testing.strategies import run_configs


@attrs.frozen
class Unstartable:
    """A combination that `RunConfig.startup_problems` refuses, made from a startable
    config: `pins` the drawn config so that `change` breaks exactly one rule; `problem` is
    the whole refusal, from the config as changed (the refusal is what a user reads)."""

    pins: Callable[[st.DrawFn], dict[str, Any]]
    change: Callable[[RunConfig, st.DrawFn], dict[str, Any]]
    problem: Callable[[RunConfig], str]


def _pinned(**pins: Any) -> Callable[[st.DrawFn], dict[str, Any]]:
    return lambda draw: pins


def _batches(draw: st.DrawFn, *, past_a_group: bool = False) -> dict[str, Any]:
    """Counted batches (of more episodes than a group, with `past_a_group`), groups of two
    or more, no queue drawn."""
    group = draw(st.integers(2, 8))
    return {
        "group_size": group,
        "batch_size": draw(st.integers(group + 1 if past_a_group else 1, 12)),
        "token_batch_size": None,
        "queue_limit": 0,
    }


def _slime_round(draw: st.DrawFn) -> dict[str, Any]:
    group = draw(st.integers(1, 4))
    return {
        "admission": "slime",
        "group_size": group,
        "token_batch_size": None,
        "batch_size": draw(st.integers(group + 1, 12)),
        "over_sampling_batch_size": None,
    }


def _least(config: RunConfig) -> int:
    """The smallest queue whole-group eviction takes: a batch beside a group, less one."""
    return config.group_size + (config.batch_size or 0) - 1


def _groups(config: RunConfig) -> int:
    return -(-(config.batch_size or 0) // config.group_size)


def _both_batch_keys(c: RunConfig) -> str:
    return (
        "batch_size / token_batch_size: set exactly one "
        f"(got batch_size={c.batch_size}, token_batch_size={c.token_batch_size})"
    )


NOT_OUTSTANDING = ["none", "capacity", "areal", "verl", "max-lag", "slime", "roll"]
NO_BUDGET = ["none", "capacity", "areal", "outstanding", "max-lag", "roll"]


def _parts_of_groups(draw: st.DrawFn, admission: dict[str, Any]) -> dict[str, Any]:
    """A group-counting `admission` on batches that are not whole groups (`k` groups and
    `r` episodes), held startable by the liveness exception."""
    group, groups = draw(st.integers(2, 6)), draw(st.integers(1, 3))
    return {
        **admission,
        "liveness": True,
        "group_size": group,
        "batch_size": groups * group + draw(st.integers(1, group - 1)),
        "token_batch_size": None,
        "queue_limit": 0,
    }


def _whole_groups(draw: st.DrawFn) -> dict[str, Any]:
    """AReaL's, ROLL's or outstanding (at depth 0) admission: a batch's whole groups."""
    admission = draw(st.sampled_from(["areal", "roll", "outstanding"]))
    return _parts_of_groups(draw, {"admission": admission, "outstanding_depth": 0})


def _verl_window(draw: st.DrawFn) -> dict[str, Any]:
    """verl's budget, no staleness slack: a sync window of `k` batches lets out `k`
    batches' whole groups, short of the `k` batches."""
    keys = {
        "admission": "verl",
        "staleness_threshold": 0.0,
        "updates_per_sync": draw(st.integers(1, 3)),
        "batch_order": "fifo",  # ROLL's window counts one update a step
    }
    return _parts_of_groups(draw, keys)


def _short_of_whole_groups(c: RunConfig) -> str:
    """The refusal of either: the whole groups let out, a batch's or a sync window's."""
    batch, size = c.batch_size or 0, c.group_size
    groups = batch // size
    lets, per = groups * size, "where batches"
    if c.admission == "verl":
        k = c.updates_per_sync
        lets, per = groups * k * size, f"a sync window, where its {k} batches"
    return (
        f"liveness: false with admission = {c.admission!r} needs batches of whole groups "
        f"(batch_size {batch}, group_size {size}): its rule counts {groups} group(s) a batch "
        f"and lets {lets} episodes out {per} of {batch} need more: the run would starve "
        "(its source trains whole groups)"
    )


UNSTARTABLE: dict[str, Unstartable] = {
    "both batch keys": Unstartable(
        # without the liveness exception a batch of 4 may not be whole groups: a second problem
        _pinned(liveness=True),
        # a drawn queue_limit fits the drawn batch size, not necessarily 4; the round was
        # drawn for the run's own batches
        lambda c, draw: {
            "batch_size": c.batch_size or 4,
            "token_batch_size": 100,
            "over_sampling_batch_size": None,
        },
        _both_batch_keys,
    ),
    "batches of parts of groups without liveness": Unstartable(
        _whole_groups, lambda c, draw: {"liveness": False}, _short_of_whole_groups
    ),
    "a verl window of parts of groups without liveness": Unstartable(
        _verl_window, lambda c, draw: {"liveness": False}, _short_of_whole_groups
    ),
    "no batch key": Unstartable(
        _pinned(),
        lambda c, draw: {"batch_size": None, "token_batch_size": None},
        _both_batch_keys,
    ),
    "lag past bound": Unstartable(
        _pinned(),
        lambda c, draw: {"target_lag": c.max_off_policy_steps + 1},
        lambda c: (
            f"target_lag: must be <= max_off_policy_steps ({c.max_off_policy_steps}), got "
            f"{c.target_lag}: the gate would let episodes be dispatched already stale"
        ),
    ),
    "too many permits": Unstartable(
        _pinned(),
        lambda c, draw: {"max_inflight": draw(st.integers(MAX_INFLIGHT + 1, 2 * MAX_INFLIGHT))},
        lambda c: (
            f"max_inflight: at most {MAX_INFLIGHT:,}, got {c.max_inflight:,}: one event may "
            "dispatch every free permit, and the loop bounds what one event sets off"
        ),
    ),
    "a queue short of a group or a batch": Unstartable(
        _batches,
        lambda c, draw: {
            "queue_limit": draw(st.integers(1, max(c.group_size, c.batch_size or 0) - 1)),
            "queue_eviction": draw(st.sampled_from(["oldest-episode", "oldest-group"])),
        },
        lambda c: (
            f"queue_limit: must be 0 or >= group_size and batch_size, got {c.queue_limit}: an "
            "admitted group must fit in the queue, and a batch must be able to fill"
        ),
    ),
    "a queue evicting groups short of a batch beside a group": Unstartable(
        lambda draw: _batches(draw, past_a_group=True),
        lambda c, draw: {
            "queue_limit": draw(st.integers(max(c.group_size, c.batch_size or 0), _least(c) - 1)),
            "queue_eviction": "oldest-group",
        },
        lambda c: (
            f"queue_limit: must be >= batch_size + group_size - 1 ({_least(c)}) with "
            f"queue_eviction = 'oldest-group', got {c.queue_limit}: evicting whole groups from "
            "a smaller queue can keep it below a batch for ever"
        ),
    ),
    "a slime round short of a batch": Unstartable(
        _slime_round,
        lambda c, draw: {"over_sampling_batch_size": draw(st.integers(1, _groups(c) - 1))},
        lambda c: (
            f"over_sampling_batch_size: must be >= the {_groups(c)} groups of a batch (got "
            f"{c.over_sampling_batch_size}): slime refuses a round smaller than "
            "rollout_batch_size"
        ),
    ),
    "a last-chance wait without its cap": Unstartable(
        lambda draw: {
            "ship_wait": "none",
            "weight_update": "freeze",
            "admission": draw(st.sampled_from(NOT_OUTSTANDING)),
        },
        lambda c, draw: {"ship_wait": "last-chance"},
        lambda c: (
            f"ship_wait: 'last-chance' needs admission = 'outstanding' (got {c.admission!r}): "
            "PR #822 waits behind its cap on outstanding groups; without it new groups keep "
            "opening at their last chance and a batch may wait for ever"
        ),
    ),
    "a last-chance wait under a drain": Unstartable(
        _pinned(ship_wait="none", admission="outstanding", weight_update="drain", recycle=False),
        lambda c, draw: {"ship_wait": "last-chance"},
        lambda c: (
            "ship_wait: 'last-chance' does not combine with weight_update = 'drain': a drained "
            "update holds the dispatch a waiting batch needs"
        ),
    ),
    "ROLL's window over several updates": Unstartable(
        _pinned(batch_order="roll-window", updates_per_sync=1, recycle=False),
        lambda c, draw: {"updates_per_sync": draw(st.integers(2, 3))},
        lambda c: (
            f"batch_order: 'roll-window' needs updates_per_sync = 1 (got {c.updates_per_sync}): "
            "ROLL's window counts one weight update a step, and with fewer versions it excludes "
            "what waits, so batches never fill"
        ),
    ),
    "a drain behind verl's or slime's budget": Unstartable(
        lambda draw: {
            "weight_update": "freeze",
            "recycle": False,
            "ship_wait": "none",
            "admission": draw(st.sampled_from(["verl", "slime"])),
        },
        lambda c, draw: {"weight_update": "drain"},
        lambda c: (
            f"weight_update: 'drain' does not combine with admission = {c.admission!r}: its "
            "budget reopens only with a new version or step, which a drained update holds "
            "back, and runs stall"
        ),
    ),
    "recycling under a drain": Unstartable(
        lambda draw: {
            "recycle": True,
            "weight_update": "freeze",
            "updates_per_sync": 1,
            "ship_wait": "none",
            "admission": draw(st.sampled_from(NO_BUDGET)),
        },
        lambda c, draw: {"weight_update": "drain"},
        lambda c: (
            "recycle: does not combine with weight_update = 'drain': a drained update waits "
            "for the work in flight, and recycled work waits for the update"
        ),
    ),
    "recycling over several updates": Unstartable(
        lambda draw: {
            "recycle": True,
            "weight_update": "freeze",
            "updates_per_sync": 1,
            "batch_order": draw(st.sampled_from(["fifo", "oldest-first"])),
        },
        lambda c, draw: {"updates_per_sync": draw(st.integers(2, 3))},
        lambda c: (
            f"recycle: needs updates_per_sync = 1 (got {c.updates_per_sync}): recycled work "
            "holds train dispatch until the next version goes live, and the batches of a sync "
            "would wait for it"
        ),
    ),
    "redundant members under slime": Unstartable(
        _pinned(admission="slime", group_redundancy=0),
        lambda c, draw: {"group_redundancy": draw(st.integers(1, 2))},
        lambda c: (
            f"group_redundancy: must be 0 under admission = 'slime' (got {c.group_redundancy}): "
            "slime's rounds count whole groups of group_size"
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(UNSTARTABLE))
@given(data=st.data())
def test_a_config_that_cannot_start_is_refused_yet_folds_as_recorded(
    name: str, data: st.DataObject
) -> None:
    fault = UNSTARTABLE[name]
    config = data.draw(run_configs(**fault.pins(data.draw)), label="startable")
    change = fault.change(config, data.draw)
    values = config.to_dict() | change
    with pytest.raises(ConfigError) as refused:
        RunConfig.from_mapping(values)
    recorded = RunConfig.from_mapping(values, startable=False)
    assert attrs.asdict(recorded) == attrs.asdict(config) | change
    assert recorded.startup_problems() == [fault.problem(recorded)]
    assert str(refused.value) == fault.problem(recorded)


# Each refused combination undone at its boundary starts (the strategy's own draws reach the
# others: a queue of exactly its least, a round of a batch's groups, a lag at the bound).
ON_THE_LIMIT: dict[str, Callable[[RunConfig], dict[str, Any]]] = {
    "the most permits": lambda c: {"max_inflight": MAX_INFLIGHT},
    "no queue, whatever its eviction": lambda c: {
        "queue_limit": 0,
        "queue_eviction": "oldest-group",
    },
    "a queue of a group and a batch, whole-group eviction": lambda c: {
        "queue_limit": _least(c),
        "queue_eviction": "oldest-group",
    },
    "a queue of a group or a batch, episode eviction": lambda c: {
        "queue_limit": max(c.group_size, c.batch_size or 0),
        "queue_eviction": "oldest-episode",
    },
}


COUNTED = st.integers(1, 12).flatmap(lambda b: run_configs(token_batch_size=None, batch_size=b))


@pytest.mark.parametrize("name", sorted(ON_THE_LIMIT))
@given(config=COUNTED)
def test_a_config_on_a_startup_limit_starts(name: str, config: RunConfig) -> None:
    values = config.to_dict() | ON_THE_LIMIT[name](config)
    assert RunConfig.from_mapping(values).startup_problems() == []
