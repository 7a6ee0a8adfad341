"""`redecide` on generated logs: the pairs line up seq for seq, and the first that differs
is exactly where a log was cut or tampered with."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.redecide import Redecision, redecide
from rolloutlog.events.types import WORLD_KINDS, Event, GroupScored
from rolloutlog.testing.strategies import world_logs


@given(world_logs(max_steps=40))
def test_a_log_is_its_own_expectation_and_world_only_gives_it_back(log: list[Event]) -> None:
    redecision = redecide(log)
    assert [(recorded, expected) for recorded, expected in redecision] == [(e, e) for e in log]
    assert redecision.loop is not None and redecision.loop.next_seq == len(log)
    assert list(Redecision(log)) == [(e, e) for e in log]  # recorded decisions by default
    world = [attrs.evolve(e, seq=-1) for e in log if e.kind in WORLD_KINDS]
    again = [expected for _, expected in redecide(world, recorded_decisions=False)]
    assert again == log


@given(world_logs(max_steps=40), st.data())
def test_a_log_cut_inside_a_reaction_owes_the_rest_of_it(
    log: list[Event], data: st.DataObject
) -> None:
    decided = [e.seq for e in log if e.kind not in WORLD_KINDS]
    cut = data.draw(st.sampled_from(decided))
    reaction_end = next((e.seq for e in log[cut:] if e.kind in WORLD_KINDS), len(log))
    pairs = list(redecide(log[:cut]))
    assert pairs[:cut] == [(e, e) for e in log[:cut]]
    assert pairs[cut:] == [(None, e) for e in log[cut:reaction_end]]


@given(world_logs(max_steps=40), st.data())
def test_a_tampered_decision_is_the_first_pair_that_differs(
    log: list[Event], data: st.DataObject
) -> None:
    scored = [e for e in log if isinstance(e, GroupScored)]
    victim = data.draw(st.sampled_from(scored))
    tampered = [attrs.evolve(victim, group_id="g0") if e is victim else e for e in log]
    first = next(i for i, (r, x) in enumerate(redecide(tampered)) if r != x)
    assert first == victim.seq


@given(world_logs(max_steps=20))
def test_a_log_must_start_with_one_run_started(log: list[Event]) -> None:
    with pytest.raises(InconsistentLogError) as refused:
        list(redecide(log[1:]))
    first = next(e for e in log[1:] if e.kind in WORLD_KINDS)  # decisions before it: unowed
    assert (
        str(refused.value) == f"seq {first.seq} ({first.kind}): a log must start with run_started"
    )
    twice = [*log, attrs.evolve(log[0], seq=len(log))]
    with pytest.raises(InconsistentLogError) as refused:
        list(redecide(twice))
    assert str(refused.value) == f"seq {len(log)} (run_started): a second run_started"
