"""Rollout age: the one definition of staleness that every check and every metric reads."""

from __future__ import annotations


def rollout_age(start_version: int, step: int) -> int:
    """Versions between the one batch `step` trains on (`step - 1`) and the dispatch version.

    Queue time counts: an episode dispatched at version 3 is age 0 in batch 4, age 2 in
    batch 6, however long it sat in inference or in the queue.
    """
    return (step - 1) - start_version


def is_stale(
    start_version: int, step: int, max_off_policy_steps: int, *, train: bool, frozen: bool
) -> bool:
    """True iff a train episode from the policy being trained is past the bound at `step`.

    Eval episodes and episodes of a frozen generation source never go stale: their data
    does not depend on the policy being trained.
    """
    return train and not frozen and rollout_age(start_version, step) > max_off_policy_steps
