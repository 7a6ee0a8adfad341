"""The stall reason (`core.stall`, `ReactionLoop.stall_reason`): a driver asks it at any
state where its run stops making progress, so it is defined at every state the deciders
reach, names the batch the queue is filling, and the rule it names holds there."""

from __future__ import annotations

import re

from hypothesis import given

from rolloutlog.core.dispatcher_fill import gated
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.staleness import trainer_lags
from rolloutlog.events.types import WORLD_KINDS, Event, RunStarted
from rolloutlog.testing.strategies import world_logs

QUEUED = re.compile(r"the queue holds (\d+) episodes for batch (\d+)")


@given(world_logs(max_steps=60))
def test_the_stall_reason_is_defined_everywhere_and_its_rule_holds(log: list[Event]) -> None:
    started = log[0]
    assert isinstance(started, RunStarted)
    loop = ReactionLoop.from_run_started(started, digest=False)
    for event in log:
        if event.kind not in WORLD_KINDS:
            continue
        loop.feed(event)
        reason = loop.stall_reason()
        state, rules = loop.state, loop.state.rules
        sink, dispatcher = state.sink, state.dispatcher
        found = QUEUED.match(reason)
        assert found is not None, reason
        assert (int(found[1]), int(found[2])) == (len(sink.queue), sink.step)
        if "(gate_lag)" in reason:  # the ship hold
            assert trainer_lags(sink.version, sink.step, rules.hold_lag)
        if "every permit is held" in reason:
            assert dispatcher.limit <= len(dispatcher.inflight)
        if "(gate_lag, updates)" in reason:
            assert gated(rules, dispatcher)
        if "lets no train episode out" in reason:
            assert rules.allowance is not None
            left = rules.allowance(sink.config, dispatcher.ledger, dispatcher.version)
            assert left is not None
            floor = rules.idle_floor(sink.config, dispatcher.ledger, dispatcher.version)
            assert rules.live(left, floor) <= 0
            unexcepted = ", and the run has no liveness exception (liveness)"
            assert reason.endswith(unexcepted) != sink.config.liveness, reason
            assert f"admission = {sink.config.admission!r} lets no" in reason
