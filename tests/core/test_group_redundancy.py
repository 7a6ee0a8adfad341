"""Redundant members (ROLL's `group_size_redundancy`): a group dispatches G + r members,
is finalized at its first G arrivals, and the rest are cancelled as `redundant`."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from rolloutlog.core import dispatcher
from rolloutlog.core.account import InvariantViolation
from rolloutlog.core.rules import group_shape
from rolloutlog.events.types import EpisodeFailed, EpisodesCancelled, GroupScored
from tests.core.planted import fed
from tests.core.test_scenarios import Run

# G = 2, r = 1: each group dispatches three members, room for one group at a time.
SMALL: dict[str, Any] = {"group_size": 2, "group_redundancy": 1, "max_inflight": 3}


def _cancels(run: Run) -> list[EpisodesCancelled]:
    return [e for e in run.log if isinstance(e, EpisodesCancelled)]


def test_a_group_dispatches_g_plus_r_and_the_gth_arrival_cancels_the_rest() -> None:
    run = Run(**SMALL)
    assert run.inflight() == ["g1/0", "g1/1", "g1/2"]
    run.complete("g1/2")
    assert not _cancels(run)
    out = run.complete("g1/0")
    cancel, scored = out[1], out[2]
    assert isinstance(cancel, EpisodesCancelled)
    assert (cancel.episode_ids, cancel.unscheduled, cancel.reason) == (("g1/1",), 0, "redundant")
    assert isinstance(scored, GroupScored)
    assert scored.episode_ids == ("g1/0", "g1/2")  # the first G, in member order
    assert run.inflight() == ["g2/0", "g2/1", "g2/2"]  # the freed permits refill


def test_a_failed_arrival_counts_toward_g_as_roll_counts_a_none_rollout() -> None:
    run = Run(**SMALL)
    run.t += 1
    run.feed(EpisodeFailed(t=run.t, episode_id="g1/0", error="boom"))
    out = run.complete("g1/1")
    assert [e.kind for e in out][:3] == ["episode_completed", "episodes_cancelled", "group_scored"]
    assert isinstance(out[2], GroupScored) and out[2].episode_ids == ("g1/1",)


def test_unscheduled_extras_are_cancelled_with_the_in_flight_ones() -> None:
    run = Run(**{**SMALL, "group_redundancy": 3, "max_inflight": 3})
    run.complete("g1/0", "g1/1")
    cancel = _cancels(run)[0]
    # g1/0's permit went to g1/3 before g1/1 arrived; g1/4 never went out
    assert (cancel.episode_ids, cancel.unscheduled) == (("g1/2", "g1/3"), 1)


def test_without_redundancy_nothing_is_cancelled_as_redundant() -> None:
    run = Run(**{**SMALL, "group_redundancy": 0})
    run.complete("g1/0", "g1/1")
    assert run.inflight() == ["g2/0", "g2/1", "g3/0"] and not _cancels(run)


def _early(state: Any, event: Any) -> list[Any]:
    """Planted: cancels the extras one arrival before G."""
    group = state.groups.get(event.episode_id.rpartition("/")[0])
    if group is None or group.arrived != 1:
        return []
    ids = tuple(group.inflight)[1:]
    return [
        EpisodesCancelled(
            t=event.t,
            group_id=group.group_id,
            episode_ids=ids,
            unscheduled=group.unscheduled,
            reason="redundant",
        )
    ]


def _in_flight_only(state: Any, event: Any) -> list[Any]:
    """Planted: leaves the unscheduled extras owed."""
    cancels = group_shape.redundant_members(state, event)
    return [attrs.evolve(c, unscheduled=0) for c in cancels if c.episode_ids]


def _never(state: Any, event: Any) -> list[Any]:
    """Planted: never cancels the extras."""
    return []


@pytest.mark.parametrize(
    ("planted", "config", "problem"),
    [
        (_early, SMALL, "redundant cancel of g1 at 1 of G arrived"),
        (_in_flight_only, {**SMALL, "group_redundancy": 3}, "leaves members owed"),
        (_never, SMALL, "G arrived but members still owed"),
    ],
)
def test_the_account_catches_a_dispatcher_that_cancels_extras_wrongly(
    monkeypatch: pytest.MonkeyPatch, planted: Any, config: dict[str, Any], problem: str
) -> None:
    monkeypatch.setattr(dispatcher, "redundant_members", planted)
    run = Run(**config)
    with pytest.raises(InvariantViolation, match=problem):
        run.complete("g1/0", "g1/1")


def test_the_account_counts_members_from_the_recorded_redundancy() -> None:
    run = Run(**SMALL)
    run.complete("g1/0", "g1/1")
    assert fed(run.log).violations == []
    started = attrs.evolve(run.log[0], config={**run.log[0].config, "group_redundancy": 0})
    violations = fed([started, *run.log[1:]]).violations
    assert violations[0] == "seq 4 (episode_dispatched): dispatch into g1, which owes no member"
