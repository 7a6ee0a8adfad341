"""Capacity admission's account after drops: a train dispatch that admission withheld,
planted at any point of a run, is reported, however many stale episodes were dropped before
it (each drop gives back the one episode it promised, no more).

`test_account_faults.py` plants its capacity fault before any arrival, where the promised
work is the train work in flight; here the point is found by the dispatcher's own
allowance (`core.rules.admission.capacity_left`) once something was dropped, and the
account, which keeps its own count, must report it.
"""

from __future__ import annotations

from hypothesis import given

from rolloutlog.core.dispatcher import gated
from rolloutlog.core.rules.admission import capacity_left
from rolloutlog.events.types import WORLD_KINDS, EpisodeDispatched, EpisodeDropped, Event
from rolloutlog.replay.fold import LogFold
from rolloutlog.testing.strategies import run_configs, world_logs
from tests.core.planted import fed

# Groups of 3 over batches of 2 at bound 1: a horizon that stops groups part-way, and
# per-episode stale drops of members that arrive a step late.
WORLDS = world_logs(
    run_configs(
        admission="capacity",
        staleness="per-episode",
        group_size=3,
        max_inflight=6,
        batch_size=2,
        token_batch_size=None,
        max_off_policy_steps=1,
        target_lag=1,
        weight_update="freeze",
        recycle=False,
        requeue="none",
        straggler_cut=False,
    ),
    max_steps=80,
)


def _withheld(log: list[Event]) -> tuple[int, EpisodeDispatched] | None:
    """The first point after a drop, between reactions, where a train group owes a member,
    permits are free and the gate is open, but capacity admission allows none: the index
    of the world event it precedes and the dispatch admission withheld there."""
    fold = LogFold.from_run_started(log[0])
    dropped = False
    for index, event in enumerate(log):
        state = fold.dispatcher_state
        if dropped and event.kind in WORLD_KINDS and not state.finished:
            owing = next((g for g in state.owing if state.groups[g].train), None)
            free = state.limit - len(state.inflight) > 0
            left = capacity_left(state.config, state.ledger, state.version)
            if owing is not None and free and not gated(fold.rules, state) and left == 0:
                group = state.groups[owing]
                member = group.dispatched
                return index, EpisodeDispatched(
                    t=event.t,
                    seq=index,
                    episode_id=f"{owing}/{member}",
                    group_id=owing,
                    member=member,
                    policy_version=state.version,
                )
        dropped = dropped or isinstance(event, EpisodeDropped)
        fold.apply(event)
    return None


@given(WORLDS)
def test_a_dispatch_capacity_withheld_after_drops_is_reported(log: list[Event]) -> None:
    found = _withheld(log)
    if found is None:  # no drop, or admission never bound after one
        return
    index, dispatch = found
    reports = fed([*log[:index], dispatch]).violations
    assert any(r.startswith(f"seq {index} (episode_dispatched): capacity: ") for r in reports), (
        reports
    )
