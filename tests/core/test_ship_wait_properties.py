"""The ship wait never deadlocks: whenever a full batch whose hold has lifted waits for
work at its last chance, something is still in flight, so an arrival (or a cancellation)
will come; the dispatch gate and the ship hold read the same lag, so a batch held only by
the wait never finds the gate shut on the members it waits for."""

from __future__ import annotations

import random

from hypothesis import example, given
from hypothesis import strategies as st

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.dispatcher import gated
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.rules.composition import take
from rolloutlog.core.rules.shipping import waits_for_last_chance
from rolloutlog.events.types import Event
from rolloutlog.testing.scripted_world import scripted_log
from rolloutlog.testing.strategies import run_configs


class WaitWatch:
    """After each world event's reaction: a waiting batch leaves work in flight."""

    def __init__(self) -> None:
        self.waits = 0

    def observe(self, event: Event, loop: ReactionLoop) -> None:
        return None

    def settled(self, world_event: Event, loop: ReactionLoop) -> None:
        sink, dispatcher = loop.sink_state, loop.dispatcher_state
        rules = loop.rules
        lag = rules.hold_lag
        if sink.finished or sink.version < sink.step - 1 - lag:
            return
        paused = rules.update_pause  # None: the run has no update pause
        if paused is not None and paused(sink.live, sink.version, 0):
            return  # the update pause holds the batch (and the gate) until the update is live
        if not take(rules.batch_order, sink.config, sink.queue, sink.step):
            return
        if not waits_for_last_chance(sink):
            return
        self.waits += 1
        assert dispatcher.inflight, (
            f"seq {world_event.seq}: batch {sink.step} waits, none in flight"
        )
        assert not gated(rules, dispatcher), f"seq {world_event.seq}: the gate is shut on a wait"


@example(  # the account read the gate's lag for the cap (gate_lag = "one", target_lag 2)
    RunConfig.from_mapping(
        {
            "max_inflight": 3,
            "max_off_policy_steps": 2,
            "group_size": 1,
            "batch_size": 1,
            "target_lag": 2,
            "staleness": "soft",
            "admission": "outstanding",
            "gate_lag": "one",
            "ship_wait": "last-chance",
        }
    ),
    0,
    0,
)
@given(
    run_configs(ship_wait="last-chance", staleness="soft"),
    st.integers(0, 2**32 - 1),
    st.integers(0, 200),
)
def test_a_waiting_batch_always_leaves_work_in_flight(config, seed, steps) -> None:
    watch = WaitWatch()
    loop = ReactionLoop(config, observers=(Account(config), watch))
    scripted_log(config, random.Random(seed).randrange, steps, loop=loop)
