"""The `areal` preset's admission against AReaL's own `StalenessManager` (areal 1.0.4).

AReaL's module is loaded by path from its wheel, with a stand-in for the one record it
imports (`tests.core.areal_wheel`): the logic under test is AReaL's own. Random sequences
of submits, accepts, rejects and version bumps go to both sides: to AReaL's manager as its
callbacks, to rolloutlog's train ledger as the events that mean the same (a train group
opened, scored admitted, scored not admitted; the version the dispatcher reads). After
every step AReaL's `get_capacity` equals `admission_field.areal_groups` on the ledger.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import RunConfig
from rolloutlog.core.rules.admission_field import areal_groups, evolve_group_ledger
from rolloutlog.core.state import TrainLedger
from rolloutlog.events.types import GroupScored
from tests.core.areal_wheel import areal_wheel, load_staleness_manager
from tests.core.core_events import opened

OPS = st.lists(st.sampled_from(["submit", "accept", "reject", "bump"]), max_size=80)


@pytest.fixture(scope="module")
def areal_module() -> types.ModuleType:
    return load_staleness_manager(areal_wheel())


class Version:
    """AReaL's VersionProvider: the version the manager reads at each `get_capacity`."""

    def __init__(self) -> None:
        self.version = 0

    def get_version(self) -> int:
        return self.version


def test_the_loaded_module_is_areals_own(areal_module: types.ModuleType) -> None:
    assert areal_module.__file__.endswith(
        "areal-1.0.4-py3-none-any.whl/areal/infra/staleness_manager.py"
    )
    assert areal_module.StalenessManager.get_capacity.__module__ == "areal.infra.staleness_manager"


@given(
    max_concurrent=st.integers(1, 8),
    group_size=st.integers(1, 4),
    batch_groups=st.integers(1, 4),
    spare=st.data(),
    bound=st.integers(0, 3),
    ops=OPS,
)
def test_areal_admission_is_areals_get_capacity(
    areal_module: types.ModuleType,
    max_concurrent: int,
    group_size: int,
    batch_groups: int,
    spare: st.DataObject,
    bound: int,
    ops: list[str],
) -> None:
    # B groups a batch: batch_size is B×G plus fewer than G spare episodes (floored away)
    batch_size = batch_groups * group_size + spare.draw(st.integers(0, group_size - 1))
    config = RunConfig.from_mapping(
        {
            "max_inflight": max_concurrent,
            "group_size": group_size,
            "batch_size": batch_size,
            "max_off_policy_steps": bound,
            "target_lag": 0,
        }
    )
    provider = Version()
    manager: Any = areal_module.StalenessManager(
        version_provider=provider,
        max_concurrent_rollouts=max_concurrent,
        consumer_batch_size=batch_groups,
        max_staleness=bound,
    )
    ledger = TrainLedger()
    running: list[str] = []  # open train groups, oldest first
    groups = 0
    assert areal_groups(config, ledger, provider.version) == manager.get_capacity()
    for op in ops:
        if op in ("accept", "reject") and not running:
            op = "submit"  # nothing is running to finish: valid by construction
        if op == "submit":
            groups += 1
            running.append(f"g{groups}")
            manager.on_rollout_enqueued()
            manager.on_rollout_submitted()
            evolve_group_ledger(ledger, opened(running[-1], provider.version, 1, group_size))
        elif op == "bump":
            provider.version += 1
        else:
            admitted = op == "accept"
            (manager.on_rollout_accepted if admitted else manager.on_rollout_rejected)()
            evolve_group_ledger(ledger, _scored(running.pop(0), admitted, group_size))
        assert areal_groups(config, ledger, provider.version) == manager.get_capacity(), op


def _scored(group_id: str, admitted: bool, size: int) -> GroupScored:
    """The group scored whole: the preset counts accepted rollouts as admitted episodes in
    whole groups of G."""
    ids = tuple(f"{group_id}/{member}" for member in range(size))
    return GroupScored(
        t=0.0, group_id=group_id, episode_ids=ids, advantages=(0.0,) * size, admitted=admitted
    )
