"""The straggler cut's rule on its own: what an at-risk group owes beside what a stale
cancellation of the same answer already covers.

A sample's survivor (`straggler_cut`'s "nothing left" test inverted) lived because no
generated world set it up: a group whose in-flight members all go stale in the answer that
puts its arrival at risk. Under per-episode stamping that is a member dispatched at v0 still
running when one dispatched at v1 has arrived, at the step where v1's age is the bound.
"""

from __future__ import annotations

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.rules.cancellation import straggler_cut
from rolloutlog.core.state import DispatcherState, OpenGroup, initial_dispatcher_state

CONFIG = RunConfig(group_size=3, max_inflight=2, batch_size=3, max_off_policy_steps=1)


def _at_risk(unscheduled: int) -> tuple[DispatcherState, OpenGroup]:
    """Step 3, bound 1: g2/1 arrived from v1 (age 1, at risk), g2/0 from v0 in flight."""
    state = attrs.evolve(initial_dispatcher_state(CONFIG), step=3, version=2)
    group = OpenGroup(
        group_id="g2",
        number=2,
        train=True,
        frozen=False,
        size=3,
        start_version=0,
        dispatched=3 - unscheduled,
        unscheduled=unscheduled,
        arrived=1,
        inflight={"g2/0": 0},
        arrived_versions=[1],
    )
    return state, group


def test_the_cut_takes_the_unscheduled_members_when_the_stale_cut_took_the_rest() -> None:
    state, group = _at_risk(unscheduled=1)
    cut = straggler_cut(state, group, exclude=("g2/0",), t=5.0)
    assert cut is not None
    assert (cut.group_id, cut.episode_ids, cut.unscheduled, cut.reason, cut.t) == (
        "g2",
        (),
        1,
        "straggler",
        5.0,
    )


def test_nothing_is_cut_when_the_stale_cut_took_everything_owed() -> None:
    state, group = _at_risk(unscheduled=0)
    assert straggler_cut(state, group, exclude=("g2/0",), t=5.0) is None


def test_the_cut_takes_the_running_members_not_already_stale() -> None:
    state, group = _at_risk(unscheduled=0)
    cut = straggler_cut(state, group, exclude=(), t=5.0)
    assert cut is not None and (cut.episode_ids, cut.unscheduled) == (("g2/0",), 0)
