"""GRPO scoring: advantages over the fresh, successful members of a group."""

from __future__ import annotations

import math
from collections.abc import Sequence

# Below this, an advantage carries no gradient worth a slot in the batch; exact zeros come
# from groups whose rewards are all equal, tiny ones from float rounding of the mean.
ZERO_ADVANTAGE_TOLERANCE = 1e-9


def grpo_advantages(rewards: Sequence[float]) -> tuple[float, ...]:
    """reward − mean(rewards) for each scored member; a lone member, or equal rewards, give 0."""
    if len(set(rewards)) <= 1:
        return (0.0,) * len(rewards)
    mean = math.fsum(rewards) / len(rewards)
    return tuple(reward - mean for reward in rewards)


def is_zero_advantage(advantage: float) -> bool:
    """True when an episode would teach the trainer nothing (pruned from `trained_ids`)."""
    return abs(advantage) <= ZERO_ADVANTAGE_TOLERANCE
