"""The shadow account's books of one group, and its own arithmetic on them.

Kept apart from the deciders on purpose (see `core.account`): its own rollout age and GRPO
advantages, not `core.staleness` or `core.scoring`, each written once here.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs


def age(version: int, step: int) -> int:
    """Versions between the one batch `step` trains on and the version `version`."""
    return step - 1 - version


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
        return self.train and not self.frozen and age(version, step) > bound
