"""The shadow account's books of one group, and its own arithmetic on them.

Kept apart from the deciders on purpose (see `core.account`): its own rollout age and GRPO
advantages, not `core.staleness` or `core.scoring`, each written once here.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

# A lag no run reaches: no dispatch gate, or neither gate nor ship hold (`gate_lag = "none"`).
NO_LAG = 1 << 62


def age(version: int, step: int) -> int:
    """Versions between the one batch `step` trains on and the version `version`."""
    return step - 1 - version


def past_bound(ages: bool, version: int, step: int, bound: int) -> bool:
    """An episode at `version` that ages (a live-policy train member) is past the bound
    at `step`."""
    return ages and age(version, step) > bound


def behind(version: int, announced: int) -> int:
    """Versions between the announced version and `version` (the version-age that
    withholding judges at scoring, before any step moves)."""
    return announced - version


def advantages(rewards: Sequence[float]) -> list[float]:
    """GRPO: each reward minus the group's mean (a lone member gets 0)."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    return [reward - mean for reward in rewards]


@attrs.define(slots=True)
class Group:
    """One group from `group_opened` until its `group_scored`."""

    number: int
    size: int
    train: bool
    frozen: bool
    start_version: int
    dispatched: int = 0
    unscheduled: int = 0
    inflight: dict[str, tuple[int, int]] = attrs.Factory(dict)  # id -> (version, member)
    # id -> (member, version, reward, tokens)
    arrived: dict[str, tuple[int, int, float | None, int]] = attrs.Factory(dict)
    dropped: set[str] = attrs.Factory(set)
    cancelled: int = 0
    owes: bool = True  # still owes members in flight or unscheduled
    requeue: bool = False  # discarded whole for requeue (`core.account_requeue`)
    aborted: bool = False  # cancelled as stale: ROLL's budget gives it back (`roll_problem`)

    def stale(self, version: int, step: int, bound: int) -> bool:
        """Past the bound at `step`: only train members from the policy being trained age."""
        return past_bound(self.train and not self.frozen, version, step, bound)

    def at_risk(self, step: int, bound: int) -> bool:
        """A fresh arrival exactly at the bound at `step`, past it after the next batch (what
        a straggler cut needs; only live-policy train members age)."""
        return (
            self.train
            and not self.frozen
            and any(
                reward is not None
                and episode_id not in self.dropped
                and age(version, step) == bound
                for episode_id, (_, version, reward, _) in self.arrived.items()
            )
        )
