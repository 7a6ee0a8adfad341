"""Admission rules: how many episodes may go out now, and which version each carries.

Every function here reads plain values or the train ledger; the dispatcher calls the ones
its run's preset table chose (`core.presets.rules_for`).

**Capacity** (`admission = "capacity"`, in the spirit of AReaL's staleness manager)
dispatches a new train episode only while

    trained + queued + arrived-unfinalized + in-flight < (max_off_policy_steps + v + 1) × B

with `B = batch_size`. Every train episode that was dispatched and not thrown away is in
exactly one of those four places, so the left side is the work already promised to the
trainer; the right side is what versions `0 … v + max_off_policy_steps` can consume.
Episodes produced beyond it could only train past the bound (or be dropped), so they are
not produced.

Since every batch cuts exactly `B` episodes, `trained = batches shipped × B`, and the rule
reads: the work beyond the trainer must fit in the `max_off_policy_steps + v + 1 − batches`
batches still to come. With token batches, a batch is taken as `ceil(token_batch_size /
mean tokens per completed episode)` episodes (no limit before the first completion).

Liveness: with no train episode in flight, one may always be dispatched. Without this, a
group larger than the room left (`G > (max_off_policy_steps − target_lag + 1) × B`), or a
token batch the estimate undercounts, would wait forever for members the rule holds back.
Each admission rule names its own exception (`one_episode_when_none_in_flight`, ...: its
idle floor) and the `liveness` key whether a run applies it (`with_exception`): off for
the field presets whose source waits instead.

The field's admission rules (AReaL, PR #822's outstanding cap, PipelineRL's max lag,
ROLL's budget) are in `core.rules.admission_field`, on the same ledger.

**Smoothing** (`admission_smoothing`): in each window of `SMOOTHING_WINDOW_S` seconds of
event time, the in-flight count may grow by at most a burst (a group, or a tenth of
`max_inflight`); a natural completion refunds one admission, a cancellation none.

**Stamping** (`staleness`): an episode carries the version current at its own dispatch
(per-episode), or its group's start version (per-group, as the reference system did).
"""

from __future__ import annotations

import math
from typing import Final

from rolloutlog.core.config import RunConfig
from rolloutlog.core.state import DispatcherState, TrainLedger
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    Work,
)


def episodes_per_batch(config: RunConfig, ledger: TrainLedger) -> int | None:
    """The episodes one batch takes: `batch_size`, or with token batches the estimate from
    the arrivals so far; None before the first completion of a token-batch run."""
    if config.batch_size is not None:
        return config.batch_size
    if ledger.arrivals == 0:
        return None
    tokens = (config.token_batch_size or 0) * ledger.arrivals  # ceil(tokens / mean), in ints
    return max(1, -(-tokens // max(1, ledger.arrival_tokens)))


def capacity_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """How many more train episodes capacity admission allows now; None when unlimited."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None:
        return None
    batches_to_come = config.max_off_policy_steps + version + 1 - ledger.batches
    return batches_to_come * per_batch - ledger.beyond_trainer()


# --- the liveness exception ---------------------------------------------------------------


def one_episode_when_none_in_flight(config: RunConfig, ledger: TrainLedger, version: int) -> int:
    """Capacity admission's exception: one train episode while none is in flight."""
    return 0 if ledger.inflight else 1


def one_group_when_none_open(config: RunConfig, ledger: TrainLedger, version: int) -> int:
    """AReaL and ROLL admission, in groups: one group (`G + r` members) while no train
    group is open (nothing is owed then)."""
    return 0 if ledger.unscored else config.group_size + config.group_redundancy


def group_size_when_none_open(config: RunConfig, ledger: TrainLedger, version: int) -> int:
    """Outstanding and max-lag admission: `G` episodes while no train group is open."""
    return 0 if ledger.unscored else config.group_size


def no_floor(config: RunConfig, ledger: TrainLedger, version: int) -> int:
    """No admission rule, no exception."""
    return 0


def with_exception(allowed: int, floor: int) -> int:
    """rolloutlog's liveness exception: at least the admission rule's idle floor."""
    return max(allowed, floor)


def without_exception(allowed: int, floor: int) -> int:
    """The source has no such exception: what its admission rule allows, and no more."""
    return allowed


def evolve_ledger(ledger: TrainLedger, event: Event) -> None:
    """Follow one event the dispatcher accepted; only train groups (work = train) count."""
    match event:
        case GroupOpened(work="train"):
            ledger.unscored[event.group_id] = 0
        case EpisodeDispatched() if event.group_id in ledger.unscored:
            ledger.inflight.add(event.episode_id)
        case EpisodeCompleted() | EpisodeFailed() if event.episode_id in ledger.inflight:
            _arrived(ledger, event)
        case EpisodesCancelled():
            ledger.inflight.difference_update(event.episode_ids)
        case EpisodeDropped():
            _dropped(ledger, event.episode_id)
        case GroupScored():
            ledger.arrived -= ledger.unscored.pop(event.group_id, 0)
            if event.admitted:
                ledger.queued += len(event.episode_ids)
        case BatchShipped():
            ledger.queued -= len(event.episode_ids)
            ledger.batches += 1
        case _:
            pass  # eval and late arrivals, and what the ledger does not count


def group_of(episode_id: str) -> str:
    """The group an episode id names (`<group>/<member>`)."""
    return episode_id.rpartition("/")[0]


def _arrived(ledger: TrainLedger, event: EpisodeCompleted | EpisodeFailed) -> None:
    ledger.inflight.discard(event.episode_id)
    ledger.unscored[group_of(event.episode_id)] += 1
    ledger.arrived += 1
    if isinstance(event, EpisodeCompleted):
        ledger.arrivals += 1
        ledger.arrival_tokens += event.prompt_tokens + event.completion_tokens


def _dropped(ledger: TrainLedger, episode_id: str) -> None:
    group_id = group_of(episode_id)
    if group_id in ledger.unscored:  # dropped on arrival, before its group was scored
        ledger.unscored[group_id] -= 1
        ledger.arrived -= 1
    else:  # swept from the queue
        ledger.queued -= 1


# --- smoothing ----------------------------------------------------------------------------

SMOOTHING_WINDOW_S = 5.0


def window_of(t: float) -> int:
    """The smoothing window that event time `t` falls in."""
    return int(t // SMOOTHING_WINDOW_S)


def next_window_start(now: float) -> float:
    """When the window after the one holding `now` opens."""
    return (math.floor(now / SMOOTHING_WINDOW_S) + 1) * SMOOTHING_WINDOW_S


def smoothed(free: int, config: RunConfig, window_growth: int) -> int:
    """Free permits, capped by what is left of this window's burst."""
    burst = max(config.group_size, config.max_inflight // 10)
    return min(free, burst - window_growth)


def fixed_window(state: DispatcherState, t: float) -> None:
    """Windows are fixed slots of event time: growth restarts when `t` enters a new one."""
    window = window_of(t)
    if window != state.window:
        state.window = window
        state.window_growth = 0


def restarting_window(state: DispatcherState, t: float) -> None:
    """prime-rl's window: it restarts at the first event at least `SMOOTHING_WINDOW_S` after
    the one that opened it (its dispatcher checks the clock when it next tries to admit).
    Compared as `restarting_window_after` computes the restart, `start + 5`: `t - start`
    can fall an ulp short of 5 at that very time, and the tick would open nothing."""
    if state.window_start is None or t >= state.window_start + SMOOTHING_WINDOW_S:
        state.window_start = t
        state.window_growth = 0


def fixed_window_after(state: DispatcherState, now: float) -> float:
    """When the fixed window after the one holding `now` opens."""
    return next_window_start(now)


def restarting_window_after(state: DispatcherState, now: float) -> float:
    """When an event would restart the current window (now, if it is already due)."""
    start = now if state.window_start is None else state.window_start
    return max(now, start + SMOOTHING_WINDOW_S)


def net_refund(growth: int) -> int:
    """A natural completion refunds one admission; the window's net growth may go below 0."""
    return growth - 1


def floored_refund(growth: int) -> int:
    """prime-rl counts admissions in the window, and a refund never takes it below zero."""
    return max(0, growth - 1)


# --- the order permits are filled in ------------------------------------------------------


# One pass over the work: the oldest owing group first, then new groups (eval first).
ONE_PASS: Final[tuple[Work | None, ...]] = (None,)
# prime-rl's eval mode: owed eval work (open eval groups' members, then the owed eval groups,
# opened whole) takes permits before any train group is continued or opened.
EVALS_FIRST: Final[tuple[Work | None, ...]] = ("eval", "train")


# --- the lag the gate and the ship hold allow ---------------------------------------------


def lag_of_zero(config: RunConfig) -> int:
    """slime's `train.py`: a step generates, trains and updates the weights before the next
    one generates, so train work waits for the weights of the batch before it (and the
    sync interval, as `configured_lag`)."""
    return config.updates_per_sync - 1


def configured_lag(config: RunConfig) -> int:
    """The run's `target_lag` (at most `max_off_policy_steps`, `RunConfig.startup_problems`),
    and the sync interval: with `updates_per_sync = K` a version comes every K batches."""
    return config.target_lag + config.updates_per_sync - 1


# A lag no run reaches: the gate never closes and the ship hold never holds.
NO_LAG = 1 << 62


def no_lag(config: RunConfig) -> int:
    """PipelineRL's actor and trainer: neither a gate nor a ship hold; work goes out and
    batches are cut however far the trainer lags."""
    return NO_LAG


def gate_at_the_lag(lag: int) -> int:
    """rolloutlog's gate: train dispatch pauses past the ship hold's lag."""
    return lag


def no_gate(lag: int) -> int:
    """The source has no dispatch gate (AReaL): only its admission rule paces dispatch."""
    return NO_LAG


def lag_of_one(config: RunConfig) -> int:
    """prime-rl's `TARGET_LAG = 1`, whatever the bound: with `max_off_policy_steps = 0` it
    dispatches episodes that are stale already, and the sink drops them (and the sync
    interval, as `configured_lag`)."""
    return 1 + config.updates_per_sync - 1


# The version the gate reads: the field of `DispatcherState` it is read from, at every fill.
# The gate is read at every event, against the version announced last.
GATE_READS_VERSION: Final = "version"
# prime-rl re-evaluates its gate only when a batch ships and in `on_new_version`
# (orchestrator.py:690-691, 1002-1007 at 559b447): between, it holds what it read then, so a
# `version_pending` opens nothing (the version as of the last ship or `version_live`).
GATE_READS_LAST_CHECK: Final = "gate_version"


# --- stamping -----------------------------------------------------------------------------


def own_dispatch_version(start_version: int, version: int) -> int:
    """Per-episode: the version current when the member itself is dispatched."""
    return version


def group_start_version(start_version: int, version: int) -> int:
    """Per-group: the version its group opened at, for every member."""
    return start_version
