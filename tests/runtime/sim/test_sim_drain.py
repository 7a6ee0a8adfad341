"""The simulated world under `weight_update = drain`: an update waits for the train work in
flight, no train episode goes out while it waits, and it never waits for ever, whatever
the gate, the ship hold, admission or requeue rules do (docs/contract.md, property 13).
The runs keep the liveness exception: without it an admission rule may starve a run on its
own (core/stall.py names the rule; tests/field/test_liveness_and_gates.py): not the
drain's wait."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import Event
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.verify import verify_log
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.testing.reference import reference_log
from rolloutlog.testing.strategies import run_configs
from tests.runtime.sim.sim_helpers import run_collect

STEPS = 6


def _drained(config: RunConfig, seed: int) -> tuple[list[Event], str]:
    scenario = load_scenario("smoke", {"world.weight_update_s": 3.0})
    scenario = attrs.evolve(scenario, steps=STEPS, run=config).with_seed(seed)
    events, result = run_collect(scenario)  # the account raises at a broken property
    return events, result.finished_reason


def _waits(events: list[Event]) -> list[tuple[int, int]]:
    """Each update's (pending seq, live seq), in order; a pending with no live ends at -1."""
    pending: dict[int, int] = {}
    spans = []
    for event in events:
        if event.kind == "version_pending":
            pending[event.version] = event.seq  # type: ignore[attr-defined]
        elif event.kind == "version_live":
            spans.append((pending.pop(event.version), event.seq))  # type: ignore[attr-defined]
    return spans + [(seq, -1) for seq in pending.values()]


@given(run_configs(weight_update="drain", liveness=True), st.integers(0, 2**16))
def test_a_drained_update_never_waits_for_ever_and_holds_train_dispatch(
    config: RunConfig, seed: int
) -> None:
    events, reason = _drained(config, seed)
    assert reason in ("steps", "zero_output"), reason
    train = {e.group_id for e in events if e.kind == "group_opened" and e.work == "train"}  # type: ignore[attr-defined]
    waits = _waits(events)
    # Only the last update may still wait when the run ends (its steps shipped): a stall
    # would end the run as `stalled` or raise `SimulationBoundError` instead.
    assert all(live != -1 for _, live in waits[:-1]), waits
    for pending, live in waits:
        waited = events[pending:live] if live != -1 else events[pending:]
        dispatched = [e for e in waited if e.kind == "episode_dispatched"]
        assert not [e for e in dispatched if e.group_id in train]  # type: ignore[attr-defined]


def test_a_drained_run_is_a_log_every_checker_accepts() -> None:
    events, reason = _drained(attrs.evolve(load_scenario("smoke").run, weight_update="drain"), 1)
    assert reason == "steps"
    assert all(live > pending for pending, live in _waits(events)[:-1])
    replay = replay_log(MemoryLog(events))
    assert replay.error is None and replay.summary["invariant_violations"] == []
    assert verify_log(MemoryLog(events)).divergence is None
    assert reference_log(events) == events
