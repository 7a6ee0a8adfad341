"""The requeue mechanism (tinker, slime-lag): a stale group is discarded whole at the sink and
its task opened again as a new group: before any fresh task (slime-lag), or behind the fresh
builders of tinker's queue."""

from __future__ import annotations

from itertools import islice

import attrs
import pytest

from rolloutlog.core import dispatcher
from rolloutlog.core.config import RunConfig
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.presets import rules_for
from rolloutlog.core.rules import requeue_order
from rolloutlog.core.state import initial_dispatcher_state
from rolloutlog.core.tasks import task_for_group
from rolloutlog.events.types import EpisodeCompleted, EpisodeDropped, Event, GroupOpened
from tests.core.planted import fed
from tests.core.requeue_runs import TINKER_REQUEUE, requeue_run, stale_at_completion
from tests.core.test_scenarios import Run


def _opened(run: Run) -> dict[str, GroupOpened]:
    return {e.group_id: e for e in run.of_kind("group_opened") if isinstance(e, GroupOpened)}


def _drops(run: Run) -> dict[str, str]:
    return {e.episode_id: e.reason for e in run.log if isinstance(e, EpisodeDropped)}


def _opened_after_drops(run: Run, group_id: str) -> GroupOpened:
    """The first train group opened after the sink dropped `group_id`'s members."""
    dropped = max(
        e.seq
        for e in run.log
        if isinstance(e, EpisodeDropped) and e.episode_id.startswith(f"{group_id}/")
    )
    return next(
        e for e in run.log if isinstance(e, GroupOpened) and e.seq > dropped and e.work == "train"
    )


def test_tinker_discards_a_group_stale_for_its_batch_and_reopens_its_task_first() -> None:
    run = requeue_run("tinker", **TINKER_REQUEUE)
    stale_at_completion(run)
    assert _drops(run) == {"g2/0": "requeue", "g2/1": "requeue"}
    opened = _opened(run)
    assert (opened["g4"].task_id, opened["g4"].env) == (opened["g2"].task_id, opened["g2"].env)


def test_without_requeue_the_stale_group_is_dropped_and_a_fresh_task_opens() -> None:
    run = requeue_run("per-group")
    stale_at_completion(run)
    assert _drops(run) == {"g2/0": "stale", "g2/1": "stale"}
    assert _opened(run)["g4"].task_id == task_for_group(run.config, 4, "train").task_id


def test_slime_lag_accepts_by_version_so_the_sinks_bound_drops_without_requeue() -> None:
    """At completion g2 lags no version (v0 - v0 = 0 <= 0), so slime would accept it; it is
    past the bound for batch 2 all the same, and the sink drops it as stale."""
    run = requeue_run("slime-lag")
    stale_at_completion(run)
    assert _drops(run) == {"g2/0": "stale", "g2/1": "stale"}
    assert _opened(run)["g4"].task_id == task_for_group(run.config, 4, "train").task_id


def test_slime_lag_requeues_groups_that_complete_behind_the_current_version() -> None:
    run = requeue_run("slime-lag")
    run.complete("g1/0", "g1/1")  # batch 1: step 2, gated until v1
    run.publish(1)  # g2, g3 (v0) are not cancelled: they run on
    assert sorted(run.loop.dispatcher_state.inflight) == ["g2/0", "g2/1", "g3/0", "g3/1"]
    run.complete("g2/0", "g2/1", "g3/0", "g3/1")  # v1 - v0 = 1 > 0: discarded, requeued
    assert set(_drops(run).values()) == {"requeue"} and len(_drops(run)) == 4
    run.complete("g4/0", "g4/1")  # fresh: batch 2, then v2 frees the permits
    run.publish(2)
    opened = _opened(run)
    assert _opened_after_drops(run, "g2").task_id == opened["g2"].task_id
    assert _opened_after_drops(run, "g3").task_id == opened["g3"].task_id


def test_tinker_requeues_a_queued_group_the_step_carried_past_the_bound() -> None:
    """G = 3, batch 2: batch 1 takes g1/0 and g1/1, and g1/2 is left queued at age 1."""
    run = requeue_run("tinker", group_size=3, max_inflight=3, **TINKER_REQUEUE)
    run.complete("g1/0", "g1/1", "g1/2")
    assert _drops(run) == {"g1/2": "requeue"}
    run.publish(1)
    run.complete("g2/0", "g2/1", "g2/2")  # g2 (v0) completes past the bound for batch 2
    opened = _opened(run)
    assert opened["g3"].task_id == opened["g1"].task_id


def test_a_requeue_of_a_requeue_keeps_the_first_task() -> None:
    run = requeue_run("tinker", **TINKER_REQUEUE)
    stale_at_completion(run)  # g4 is g2's task again, at v1
    run.complete("g3/0", "g3/1")  # g3 (v0) is past the bound: requeued (g5 was fresh)
    run.complete("g5/0", "g5/1")  # batch 2: step 3, gated
    run.complete("g4/0", "g4/1")  # g4 (v1) is past the bound for batch 3: requeued
    run.publish(2)
    opened = _opened(run)
    assert _drops(run)["g4/0"] == "requeue"
    assert _opened_after_drops(run, "g3").task_id == opened["g3"].task_id
    assert _opened_after_drops(run, "g4").task_id == opened["g2"].task_id


def test_the_dispatcher_refuses_a_fresh_task_while_a_requeue_is_due() -> None:
    run = requeue_run("tinker", **TINKER_REQUEUE)
    stale_at_completion(run)
    state, rules = dispatcher.initial_state(run.config), rules_for(run.config)
    requeue_at = next(e.seq for e in run.log if e.kind == "group_opened" and e.group_id == "g4")
    fresh = task_for_group(run.config, 4, "train").task_id
    log: list[Event] = [
        attrs.evolve(e, task_id=fresh) if e.seq == requeue_at else e for e in run.log
    ]
    with pytest.raises(InconsistentLogError, match=rf"seq {requeue_at} .*requeue of g2"):
        for event in log:
            dispatcher.evolve(rules, state, event)


def test_the_account_reports_a_requeue_that_keeps_an_arrival() -> None:
    """g2's drop of g2/1 taken out of tinker's log: the group is discarded for requeue with
    an arrival kept, which the account names (a sample's survivor broke the report)."""
    run = requeue_run("tinker", **TINKER_REQUEUE)
    stale_at_completion(run)
    kept = [e for e in run.log if not (isinstance(e, EpisodeDropped) and e.episode_id == "g2/1")]
    renumbered = [attrs.evolve(e, seq=seq) for seq, e in enumerate(kept)]
    assert any("requeue of g2 keeps ['g2/1']" in v for v in fed(renumbered).violations)


def test_tinkers_requeued_builder_waits_behind_the_queue_and_the_dataloaders_put() -> None:
    """groups_per_batch = 2 (G = 1, batch 2): g3 is discarded as g5 opens (the worker took its
    next builder first). Its builder waits behind the two in the queue and the dataloader's
    waiting put, so g9 takes it; g4's, discarded after g5, is g11's (asyncio wakes puts in
    order, tinker_cookbook/rl/train.py:974-976, 1008-1016, 1111-1116 at 9dfcc3a)."""
    state = initial_dispatcher_state(RunConfig.from_mapping({"group_size": 1, "batch_size": 2}))

    def feed(event: Event) -> None:
        if isinstance(event, EpisodeDropped):
            state.requeue[event.episode_id.rpartition("/")[0]] = None  # as the dispatcher does
        requeue_order.follow_builder_queue(state, event)

    def opened(number: int) -> GroupOpened:
        return GroupOpened(
            t=0.0, group_id=f"g{number}", work="train", env="math", task_id=f"t{number}",
            group_size=1, policy_version=0, step=1, frozen=False,
        )  # fmt: skip

    arrival = EpisodeCompleted(t=0.0, episode_id="g0/0", reward=1.0, prompt_tokens=1,
                               completion_tokens=1)  # fmt: skip
    for number in range(1, 6):
        feed(arrival)
        if number == 5:  # the sink's drop comes first in the reaction; the worker took first
            feed(EpisodeDropped(t=0.0, episode_id="g3/0", reason="requeue", age=1))
        feed(opened(number))
    assert list(islice(requeue_order.behind_fresh_line(state), 4)) == [False] * 3 + [True]
    feed(arrival)
    feed(EpisodeDropped(t=0.0, episode_id="g4/0", reason="requeue", age=1))
    line = list(islice(requeue_order.behind_fresh_line(state), 6))
    assert line == [False, False, False, True, False, True]  # g6-g8 fresh, g9 t3, g11 t4
