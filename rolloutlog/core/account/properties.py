"""Which of the contract's properties a run's policy keeps, and what replaces the others.

Not every stack bounds staleness hard: AReaL's admission keeps rollouts fresh only as far
as it lets them out, and trains what it accepted however old it is by then. The account
checks each run against its own policy's list (docs/contract.md, "Properties per preset"),
so that such a run is held to its own admission inequality instead of a bound it never
promised; what trains past the bound is counted either way (`episodes_trained_past_bound`).
Every property not named here holds for every policy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from rolloutlog.core.account.groups import Group
from rolloutlog.core.config import RunConfig

HARD_BOUND: Final = "hard-bound"  # nothing trains past max_off_policy_steps
GRADIENT_BOUND: Final = "gradient-bound"  # under mask: no gradient-bearing token past it
NO_STALE_IN_FLIGHT: Final = "no-stale-in-flight"  # a version update leaves no stale in flight
CAPACITY: Final = "capacity"  # capacity admission's horizon, in episodes
AREAL_ADMISSION: Final = "areal-admission"  # AReaL's get_capacity, in groups
VERL_BUDGET: Final = "verl-budget"  # verl's sample budget per weight sync, in episodes
OUTSTANDING: Final = "outstanding"  # PR #822's cap on groups not yet trained on
SHIP_WAIT: Final = "ship-wait"  # no batch ships while work at its last chance is open
MAX_LAG_ADMISSION: Final = "max-lag-admission"  # PipelineRL's max_lag, in groups submitted
ROLL_ADMISSION: Final = "roll-admission"  # ROLL's generation budget, in groups


def kept_properties(config: RunConfig) -> frozenset[str]:
    """The policy-dependent properties a run with `config` keeps (pure: keys only).

    The admission inequalities are checked with episode batches only: with token batches
    the episodes a batch takes are an estimate the account does not redo.
    """
    kept = set()
    if config.staleness != "soft":  # `stale_tokens = mask` reads the bound per token
        kept.add(GRADIENT_BOUND if config.stale_tokens == "mask" else HARD_BOUND)
    run_on = config.requeue != "none" or config.stale_member != "cancel"
    if config.staleness == "per-episode" and not run_on:  # requeue, withhold, run-on: runs on
        kept.add(NO_STALE_IN_FLIGHT)
    if config.batch_size is not None and config.admission == "capacity":
        kept.add(CAPACITY)
    if config.batch_size is not None and config.admission == "areal":
        kept.add(AREAL_ADMISSION)
    if config.batch_size is not None and config.admission == "verl":
        kept.add(VERL_BUDGET)
    if config.batch_size is not None and config.admission == "outstanding":
        kept.add(OUTSTANDING)
    if config.ship_wait == "last-chance":
        kept.add(SHIP_WAIT)
    if config.batch_size is not None and config.admission == "max-lag":
        kept.add(MAX_LAG_ADMISSION)
    if config.batch_size is not None and config.admission == "roll":
        kept.add(ROLL_ADMISSION)
    return frozenset(kept)


def areal_problem(
    config: RunConfig, version: int, open_groups: Iterable[Group], accepted: int
) -> str | None:
    """Why a train group may not open under AReaL admission now, or None: its capacity in
    groups, `min(max_inflight − running, (η + v + 1) × B − (accepted + running))`, must be
    at least one, unless none is running and the run keeps the liveness exception. Its own
    arithmetic: `running` the open train groups, `accepted` the episodes the curriculum
    admitted so far in whole groups of G (a failed member leaves its group part of one),
    `B = max(1, batch_size // G)`."""
    running = sum(group.train for group in open_groups)
    groups_per_batch = max(1, (config.batch_size or 0) // config.group_size)
    horizon = (config.max_off_policy_steps + version + 1) * groups_per_batch
    if (running or not config.liveness) and (
        running >= config.max_inflight or accepted + running >= horizon
    ):
        return f"areal admission: {accepted} accepted + {running} running groups of {horizon}"
    return None


def max_lag_problem(
    config: RunConfig, opened: int, updates: int, open_groups: Iterable[Group]
) -> str | None:
    """Why a train group may not open under max-lag admission now, or None: PipelineRL's
    actor submits at most `⌈max_lag / G⌉ + ⌈batch_size / G⌉ × (updates + 1)` groups, unless
    no train group is open under the liveness exception. The account's own arithmetic: `opened`
    the train groups it saw open before this one, `updates` the versions announced."""
    size = config.group_size
    allowed = (config.max_lag + size - 1) // size + (
        (config.batch_size or 0) + size - 1
    ) // size * (updates + 1)
    running = any(group.train for group in open_groups)
    if (running or not config.liveness) and opened >= allowed:
        return f"max-lag admission: train group {opened + 1} opened, {allowed} allowed"
    return None


def roll_problem(config: RunConfig, version: int, used: int, running: int) -> str | None:
    """Why a train group may not open under ROLL admission now, or None: the groups begun
    and not aborted (`used`) must stay under `⌈α·B⌉ + (v + 1)·B`, `B = max(1, batch_size //
    G)`, unless no train group is open under the liveness exception. Its own count."""
    per_batch = max(1, (config.batch_size or 0) // config.group_size)
    budget = math.ceil(config.async_generation_ratio * per_batch) + (version + 1) * per_batch
    if (running or not config.liveness) and used >= budget:
        return f"roll admission: {used} groups begun and not aborted, budget {budget}"
    return None
