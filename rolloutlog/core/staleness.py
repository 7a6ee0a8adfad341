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
    # `rollout_age`, inline: this runs for every arrival and queued episode of a run.
    return train and not frozen and (step - 1) - start_version > max_off_policy_steps


def is_stale_against_version(
    start_version: int, version: int, max_off_policy_steps: int, *, train: bool, frozen: bool
) -> bool:
    """`is_stale`, counted against the current (published) `version` instead of the batch a
    step trains: past the bound when `version − start_version` exceeds it (slime's lag at
    completion, prime-rl's withhold), as the step after `version`'s batch would count it."""
    return is_stale(start_version, version + 1, max_off_policy_steps, train=train, frozen=frozen)


def trainer_lags(version: int, step: int, lag: int) -> bool:
    """The trainer, at `version`, lags batch `step` by more than `lag` versions: the one
    inequality of the dispatch gate (no train dispatch) and the ship hold (no batch ships)."""
    return (step - 1) - version > lag  # `rollout_age`, inline: read at every fill


def at_last_chance(start_version: int, step: int, max_off_policy_steps: int) -> bool:
    """Batch `step` is the last an episode of `start_version` may join: its age there is
    exactly the bound, so it is stale once that batch ships."""
    return rollout_age(start_version, step) == max_off_policy_steps
