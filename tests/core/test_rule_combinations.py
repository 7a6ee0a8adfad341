"""Field rules that do not combine are refused at start, by name: each pair below made a
simulated run stall or wait for ever when the generators drew it (docs/contract.md)."""

from __future__ import annotations

import pytest

from rolloutlog.core.config import ConfigError, RunConfig

BASE = {"group_size": 2, "batch_size": 4, "max_inflight": 4}


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"ship_wait": "last-chance"}, "ship_wait: 'last-chance' needs admission = 'outstanding'"),
        (
            {"ship_wait": "last-chance", "admission": "outstanding", "weight_update": "drain"},
            "ship_wait: 'last-chance' does not combine with weight_update = 'drain'",
        ),
        (
            {"weight_update": "drain", "admission": "verl"},
            "weight_update: 'drain' does not combine with admission = 'verl'",
        ),
        (
            {"weight_update": "drain", "admission": "slime"},
            "weight_update: 'drain' does not combine with admission = 'slime'",
        ),
        (
            {"batch_order": "roll-window", "updates_per_sync": 2},
            "batch_order: 'roll-window' needs updates_per_sync = 1",
        ),
        (
            {"recycle": True, "weight_update": "drain"},
            "recycle: does not combine with weight_update = 'drain'",
        ),
        ({"recycle": True, "updates_per_sync": 2}, "recycle: needs updates_per_sync = 1"),
        (
            {"admission": "slime", "group_redundancy": 1},
            "group_redundancy: must be 0 under admission = 'slime'",
        ),
    ],
)
def test_a_combination_that_stalls_is_refused_by_name(keys: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        RunConfig.from_mapping({**BASE, **keys})
    assert RunConfig.from_mapping({**BASE, **keys}, startable=False)  # a recorded log reads


def test_each_rule_alone_starts() -> None:
    for keys in (
        {"ship_wait": "last-chance", "admission": "outstanding"},
        {"weight_update": "drain"},
        {"batch_order": "roll-window"},
        {"admission": "slime"},
        {"recycle": True},
    ):
        RunConfig.from_mapping({**BASE, **keys})
