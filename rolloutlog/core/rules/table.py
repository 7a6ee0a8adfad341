"""The shape of a rule table: the functions one run's deciders call, one per policy choice.

The table is chosen once per run from the config (`core.presets.rules_for`) and passed
beside the deciders' states, which are plain data (`core.state`): a rule reads the state it
is handed, and a rule that defers to another rule of the run (a stale cancellation to the
straggler cut) is handed the table too. A rule the run does not use costs nothing per event:
its entry is None (or no event class, or no pass) where the deciders would otherwise call
a function that does nothing, and what the config fixes for the whole run (the gate's and
the ship hold's lags) is read once, into the table (`DERIVED`), as is a rule composed of
two (the queue's staleness through the run's view of an episode).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Final, Literal

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.rules.composition import BatchOrder
from rolloutlog.core.state import (
    Arrival,
    DispatcherState,
    OpenGroup,
    Queued,
    SinkGroup,
    SinkState,
    TrainLedger,
)
from rolloutlog.events.types import DropReason, EpisodesCancelled, Event, Work

# What a queue check sweeps of stale episodes: the queue, the scored group's members, none.
Sweep = Literal["queue", "scored", "nothing"]


@attrs.frozen
class Rules:
    """The functions one run's deciders call, one per choice its policy makes."""

    stamp: Callable[[int, int], int]  # (group start version, current version) -> carried
    # train episodes, or None (unlimited); None: no admission rule beyond the permits
    allowance: Callable[[RunConfig, TrainLedger, int], int | None] | None
    # the train episodes the liveness exception lets out now (0 where it does not fire)
    idle_floor: Callable[[RunConfig, TrainLedger, int], int]
    live: Callable[[int, int], int]  # (allowance, idle floor) -> allowed: the exception or not
    # the ledger admission reads, after each event; None where no admission rule reads one
    follow_ledger: Callable[[TrainLedger, Event], None] | None
    # (free, config, window growth) -> usable; None: every free permit (no smoothing)
    permits: Callable[[int, RunConfig, int], int] | None
    cancel_stale: Callable[
        [Rules, DispatcherState, OpenGroup, tuple[str, ...], float], list[Event]
    ]  # stale in-flight members of one group -> its cancellations (stragglers after)
    cut_stragglers: Callable[
        [DispatcherState, OpenGroup, Collection[str], float], EpisodesCancelled | None
    ]
    drop_on_arrival: Callable[[SinkGroup, Arrival, int, int], bool]  # (group, arrival, step, bound)
    drop_from_queue: Callable[[Queued, int, int], bool]  # (queued, step, bound)
    requeue_group: Callable[[SinkGroup, int, int, int], bool]  # (group, step, version, bound)
    requeue_line: Callable[[DispatcherState], Iterator[bool]]  # next train openings: requeue?
    follow_requeue: Callable[[DispatcherState, Event], None] | None  # the line's books
    # the event classes whose arrival cancels a group's redundant members (ROLL's redundancy)
    cancels_redundant: frozenset[type[Event]]
    swept_reason: Callable[[], DropReason]
    stale_in_flight: Callable[[Rules, DispatcherState, OpenGroup], tuple[str, ...]]  # to cancel
    batch_order: BatchOrder
    lag: Callable[[RunConfig], int]  # the lag the ship hold (and a gate) allows
    gate: Callable[[int], int]  # (the hold's lag) -> the gate's: the same, or no gate
    # the version the gate reads: the field of the dispatcher's state it is in (data, so
    # that the gate's one read per fill calls nothing)
    gate_reads: Literal["version", "gate_version"]
    stale_step: Callable[[DispatcherState], int]  # the step version_pending's cancellation reads
    stale_unscheduled: Callable[[Rules, DispatcherState, OpenGroup], int]  # to cancel as stale
    arrival_bound: Callable[[int], int]  # the bound an arrival is held to at finalize
    checks_queue: Callable[[Rules, SinkState, Event], Sweep | None]  # a queue check, its sweep
    overload: Callable[[DispatcherState, int, float], list[Event]]
    # smoothing's window at `t`, and when the next one opens; None: no smoothing (`SERVES`)
    advance_window: Callable[[DispatcherState, float], None] | None
    window_after: Callable[[DispatcherState, float], float] | None
    refund: Callable[[int], int] | None  # window growth after a natural completion
    fill_passes: tuple[Work | None, ...]  # the work of each pass of a fill (None: any)
    ship_waits: Callable[[SinkState], bool]  # a full batch waits for last-chance work
    # (group, arrival, version, bound) -> withheld; None: nothing is withheld
    withholds: Callable[[SinkGroup, Arrival, int, int], bool] | None
    cancels_stale_work: Callable[[], bool]  # whether stale work is cancelled in flight at all
    evict: Callable[[Mapping[str, Queued], int], list[str]]  # (queue, excess) -> to drop
    abort_leftovers: Callable[[DispatcherState, float], list[Event]]  # when a batch ships
    queue_leftovers: Callable[[dict[str, Queued], Collection[str]], list[str]]  # (queue, cut)
    leftover_group: Callable[[SinkGroup, int], bool]  # (group, step): its arrivals dropped
    # an arrival or queued episode as a staleness drop reads it; None: as it is
    stale_view: Callable[[Any], Any] | None
    # (queued, step, bound) -> its tokens masked; None: nothing is masked
    masked: Callable[[Queued, int, int], int] | None
    keeps_segments: bool  # an episode's segments are kept for its arrival (`stale_tokens`)
    # (rules, state, id, stamp) -> the version a stale cancellation reads; None: its stamp
    goes_on_under: Callable[[Rules, DispatcherState, str, int], int] | None
    # (live, version, interrupted not resumed) -> train work and the ship wait for the update;
    # None: nothing waits for an update to finish
    update_pause: Callable[[int, int, int], bool] | None
    # train dispatch waits while an update waits for the train work in flight (`drain`)
    drain_pause: Callable[[DispatcherState], bool] | None
    interrupts: bool  # an update interrupts the work in flight (`weight_update = "interrupt"`)
    recycles: bool  # a shipped batch recycles the train work in flight (slime's `recycle`)
    checks_at_live: bool  # the sink checks its queue at `version_live` (a batch the pause held)
    dispatcher_first: frozenset[type[Event]]  # the events the dispatcher answers before the sink
    # --- read from the config once, from the rules above (`DERIVED`) ---
    hold_lag: int  # the ship hold's lag, `lag(config)`
    gate_lag: int  # the dispatch gate's, `gate(lag(config))`
    # (queued, step, bound) -> dropped from the queue: `drop_from_queue` through `stale_view`
    # (the sweep, the owed-sweep check and the idle count read it), composed once
    queued_stale: Callable[[Queued, int, int], bool]


# The fields of `Rules` that are not chosen by a policy key's row but read once from the rows
# chosen and the config (`core.presets.rules_for`).
DERIVED: Final = ("hold_lag", "gate_lag", "queued_stale")
