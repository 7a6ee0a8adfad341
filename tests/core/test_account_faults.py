"""Every report of the account, each set off by one planted fault at its own seq.

`test_account_damage.py` plants the faults that need a whole log to set up; the ones here
are each one event changed, or one or two events put in, at the first point of a generated
log where the fault can be planted. The log ends at the damaged event, so the report that
must name it is the one under test (others may follow it, and do not matter).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.account import Account, InvariantViolation
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import DISPATCHER, SINK, Decider
from rolloutlog.events.types import (
    WORLD_KINDS,
    BatchShipped,
    CancelReason,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    RunFinished,
)
from rolloutlog.testing.strategies import run_configs, world_logs
from tests.core.planted import account_for, config_of, fed, valid_restart

UNKNOWN = "g9999"
Planted = tuple[list[Event], str]  # the events put where the matched one was; the problem
Plant = Callable[[Account, Event], Planted | None]


def _first(log: list[Event], plant: Plant) -> tuple[list[Event], int, str] | None:
    """The log up to the first event where `plant` (shown the account before that event)
    plants its fault, then the planted events renumbered from that seq, which is returned;
    the last planted event is the one whose report is checked."""
    account = account_for(log)
    for index, event in enumerate(log):
        planted = plant(account, event)
        if planted is not None:
            events, problem = planted
            renumbered = [attrs.evolve(e, seq=index + i) for i, e in enumerate(events)]
            return [*log[:index], *renumbered], index, problem
        account.feed(event)
    return None


def _batch(t: float, step: int, episode_ids: tuple[str, ...] = ()) -> BatchShipped:
    return BatchShipped(t=t, step=step, episode_ids=episode_ids, trained_ids=(), tokens=0)


def _restart_point(account: Account, event: Event) -> bool:
    """A world event (past `run_started`) that finds episodes in flight."""
    return event.kind in WORLD_KINDS and event.seq > 1 and bool(account.inflight)


# --- group_opened ---------------------------------------------------------------------


def _wrong_group_number(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, GroupOpened):
        return None
    wrong = attrs.evolve(event, group_id="g7777")
    return [wrong], f"expected {event.group_id}, got g7777"


def _group_opened_twice(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, GroupOpened):
        return None
    return [event, event], f"expected g{len(account.registry.members) + 1}, got {event.group_id}"


def _opened_at_a_wrong_version(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, GroupOpened):
        return None
    wrong = attrs.evolve(event, policy_version=account.version + 1)
    return [wrong], f"opened at v{account.version + 1} step {account.step}, not v{account.version}"


def _after_a_dispatch(put: Callable[[Account, EpisodeDispatched], tuple[Event, str]]) -> Plant:
    """The event `put` makes, put right after the first dispatch."""

    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, EpisodeDispatched):
            return None
        after, problem = put(account, event)
        return [event, after], problem

    return plant


# --- episode_dispatched ---------------------------------------------------------------


def _dispatch_into_an_unknown_group(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeDispatched):
        return None
    wrong = attrs.evolve(event, group_id=UNKNOWN, episode_id=f"{UNKNOWN}/0")
    return [wrong], f"dispatch into {UNKNOWN}, which owes no member"


def _dispatch_after_the_end(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeDispatched):
        return None
    return [RunFinished(t=event.t, reason="steps"), event], "dispatch after run_finished"


def _dispatch_above_the_limit(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeDispatched) or not account.inflight:
        return None
    held = len(account.inflight)
    return [LimitSet(t=event.t, max_inflight=held), event], f"admitted above the limit {held}"


def _dispatch_stamped_wrong(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeDispatched):
        return None
    wrong = attrs.evolve(event, policy_version=event.policy_version + 1)
    return [wrong], f"stamped v{event.policy_version + 1}, dispatched when v{event.policy_version}"


def _dispatch_through_the_gate(account: Account, event: Event) -> Planted | None:
    """Empty batches shipped until the trainer lags past `target_lag`, then a train
    dispatch (the batches are reported too, for the ship hold)."""
    if not isinstance(event, EpisodeDispatched) or not account.groups[event.group_id].train:
        return None
    batches = [_batch(event.t, account.step + i) for i in range(account.target_lag + 1)]
    return [*batches, event], "train dispatch while the trainer lags"


# --- episodes_cancelled ---------------------------------------------------------------


def _cancel(
    event: Event, group_id: str, ids: tuple[str, ...], unscheduled: int, reason: CancelReason
) -> EpisodesCancelled:
    return EpisodesCancelled(
        t=event.t, group_id=group_id, episode_ids=ids, unscheduled=unscheduled, reason=reason
    )


def _cancel_in_an_unknown_group(
    account: Account, event: EpisodeDispatched
) -> tuple[EpisodesCancelled, str]:
    return _cancel(event, UNKNOWN, (), 0, "overload"), f"cancellation for {UNKNOWN}, which owes"


def _cancel_more_than_unscheduled(
    account: Account, event: EpisodeDispatched
) -> tuple[EpisodesCancelled, str]:
    left = account.groups[event.group_id].unscheduled  # one more than the dispatch leaves
    cut = _cancel(event, event.group_id, (), left, "overload")
    return cut, f"cancels {left} unscheduled of {event.group_id}"


def _cancel_more_than_the_group(
    account: Account, event: EpisodeDispatched
) -> tuple[EpisodesCancelled, str]:
    """The first member dispatched, and one unscheduled more than its group has left: at
    the sink, one more member than the group holds."""
    left = account.groups[event.group_id].unscheduled
    cut = _cancel(event, event.group_id, (event.episode_id,), left, "overload")
    return cut, f"cancels {left} unscheduled of {event.group_id}"


def _cancel_a_member_not_in_flight(
    account: Account, event: EpisodeDispatched
) -> tuple[EpisodesCancelled, str]:
    other = f"{event.group_id}/{event.member + 1}"
    cut = _cancel(event, event.group_id, (other,), 0, "shutdown")
    return cut, f"{other} cancelled but not in flight"


def _restart_cuts_unscheduled(account: Account, event: Event) -> Planted | None:
    """A valid restart, then a restart cancellation of a member never dispatched."""
    owing = [g for g, group in account.groups.items() if group.owes and group.unscheduled]
    if not _restart_point(account, event) or not owing:
        return None
    resumed = valid_restart(account, event.t, event.seq)
    cut = _cancel(event, owing[0], (), 1, "restart")
    return [resumed, cut], "a restart cancels only what was outstanding"


def _straggler_cut_leaves_a_member(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodesCancelled) or event.reason != "straggler":
        return None
    if event.episode_ids:
        return [attrs.evolve(event, episode_ids=event.episode_ids[1:])], "leaves members owed"
    if event.unscheduled:
        return [attrs.evolve(event, unscheduled=event.unscheduled - 1)], "leaves members owed"
    return None


# --- run_resumed ----------------------------------------------------------------------


def _restart_names_too_few(account: Account, event: Event) -> Planted | None:
    if not _restart_point(account, event):
        return None
    held = tuple(account.inflight)
    resumed = attrs.evolve(valid_restart(account, event.t, event.seq), episode_ids=held[1:])
    return [resumed], f"names {len(held) - 1} outstanding episodes, {len(held)} in flight"


def _restart_past_the_batches(account: Account, event: Event) -> Planted | None:
    if not _restart_point(account, event):
        return None
    ahead = account.step  # one past the last batch shipped
    resumed = attrs.evolve(valid_restart(account, event.t, event.seq), version=ahead)
    return [resumed], f"resumes from v{ahead}, but v{account.version} was announced"


# --- episode_dropped ------------------------------------------------------------------


def _drop_at_a_wrong_age(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeDropped):
        return None
    wrong = attrs.evolve(event, age=event.age + 1)
    return [wrong], f"recorded age {event.age + 1}, actual age {event.age}"


def _drop_a_fresh_episode(account: Account, event: Event) -> Planted | None:
    """Right after a group is admitted, one of its scored (fresh) members dropped."""
    if not isinstance(event, GroupScored) or not (event.admitted and event.episode_ids):
        return None
    fresh = event.episode_ids[0]
    drop = EpisodeDropped(t=event.t, episode_id=fresh, reason="stale", age=0)
    return [event, drop], f"{fresh} is not stale"


MALFORMED = ("g1", "x0/0", "g/0", "g0/", "g0/a", "g0/\u0663", "g 0/0", "g0/0/0")


def _arrival_of(stray: str) -> Plant:
    """Right after a dispatch, a completion naming `stray`, an id rolloutlog never makes."""

    def arrival(account: Account, event: EpisodeDispatched) -> tuple[Event, str]:
        completed = EpisodeCompleted(
            t=event.t, episode_id=stray, reward=1.0, prompt_tokens=1, completion_tokens=1
        )
        return completed, f"{stray} was never dispatched"

    return _after_a_dispatch(arrival)


# --- group_scored ---------------------------------------------------------------------


def _scored_twice(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, GroupScored):
        return None
    return [event, event], f"{event.group_id} finalized twice or never opened"


def _scored_while_owing(account: Account, event: EpisodeDispatched) -> tuple[Event, str]:
    scored = GroupScored(
        t=event.t, group_id=event.group_id, episode_ids=(), advantages=(), admitted=False
    )
    return scored, "cancelled != G"  # G= or, with redundant members, G+r=


def _scored_without_a_member(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, GroupScored) or not event.episode_ids:
        return None
    fewer = event.episode_ids[:-1]
    wrong = attrs.evolve(event, episode_ids=fewer, advantages=event.advantages[:-1])
    return [wrong], f"scored {list(fewer)}, fresh are {list(event.episode_ids)}"


def _advantages_changed(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, GroupScored) or not event.advantages:
        return None
    changed = (event.advantages[0] + 0.5, *event.advantages[1:])
    return [attrs.evolve(event, advantages=changed)], "!= GRPO"


def _advantages_one_short(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, GroupScored) or not (event.admitted and event.advantages):
        return None
    return [attrs.evolve(event, advantages=event.advantages[:-1])], "!= GRPO"


def _eval_group_trained(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, GroupScored) or account.groups[event.group_id].train:
        return None
    return [attrs.evolve(event, admitted=True)], "eval group trained"


def _empty_group_admitted(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, GroupScored) or event.episode_ids:
        return None
    if not account.groups[event.group_id].train:
        return None
    return [attrs.evolve(event, admitted=True)], "admits a group with no scored member"


# --- batch_shipped --------------------------------------------------------------------


def _batch_for_a_wrong_step(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, BatchShipped):
        return None
    wrong = attrs.evolve(event, step=event.step + 1)
    return [wrong], f"batch for step {event.step + 1} at step {event.step}"


def _trained_twice(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, BatchShipped) or not event.trained_ids:
        return None
    twice = attrs.evolve(event, trained_ids=(*event.trained_ids, event.trained_ids[0]))
    return [twice], "trains an episode it did not cut, or one twice"


def _batch_after_the_end(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, BatchShipped):
        return None
    return [RunFinished(t=event.t, reason="steps"), event], "batch shipped after run_finished"


def _batch_of_an_episode_never_queued(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, BatchShipped):
        return None
    stray = f"{UNKNOWN}/0"
    wrong = attrs.evolve(event, episode_ids=(*event.episode_ids, stray))
    return [wrong], f"{stray} shipped but not queued (or twice)"


# Worlds where the rarer faults have a point to be planted (measured on 25 fixed examples:
# a straggler cut in 17, a scored eval group in 20; the default worlds gave 1 of 25 each).
STRAGGLER_WORLDS = world_logs(
    configs=run_configs(
        straggler_cut=True,
        group_size=6,
        max_inflight=4,
        batch_size=2,
        token_batch_size=None,
        max_off_policy_steps=1,
        target_lag=1,
        staleness="per-episode",
        eval_interval=0,
        frozen_fraction=0.0,
        curriculum="all",
        admission="none",
    ),
    max_steps=100,
)
EVAL_WORLDS = world_logs(
    configs=run_configs(eval_interval=1, curriculum="all", frozen_fraction=0.0), max_steps=100
)
WORLDS: dict[str, st.SearchStrategy[list[Event]]] = {
    "straggler cut leaves a member": STRAGGLER_WORLDS,
    "eval group trained": EVAL_WORLDS,
}

FAULTS: dict[str, tuple[str, Plant]] = {
    "group number skipped": ("group_opened", _wrong_group_number),
    "group opened twice": ("group_opened", _group_opened_twice),
    "group opened at a wrong version": ("group_opened", _opened_at_a_wrong_version),
    "dispatch into an unknown group": ("episode_dispatched", _dispatch_into_an_unknown_group),
    "dispatch after the end": ("episode_dispatched", _dispatch_after_the_end),
    "dispatch above the limit": ("episode_dispatched", _dispatch_above_the_limit),
    "dispatch stamped wrong": ("episode_dispatched", _dispatch_stamped_wrong),
    "dispatch through the gate": ("episode_dispatched", _dispatch_through_the_gate),
    "cancel in an unknown group": (
        "episodes_cancelled",
        _after_a_dispatch(_cancel_in_an_unknown_group),
    ),
    "cancel more than unscheduled": (
        "episodes_cancelled",
        _after_a_dispatch(_cancel_more_than_unscheduled),
    ),
    "cancel more than the group": (
        "episodes_cancelled",
        _after_a_dispatch(_cancel_more_than_the_group),
    ),
    "cancel a member not in flight": (
        "episodes_cancelled",
        _after_a_dispatch(_cancel_a_member_not_in_flight),
    ),
    "restart cuts unscheduled": ("episodes_cancelled", _restart_cuts_unscheduled),
    "straggler cut leaves a member": ("episodes_cancelled", _straggler_cut_leaves_a_member),
    "restart names too few": ("run_resumed", _restart_names_too_few),
    "restart past the batches": ("run_resumed", _restart_past_the_batches),
    "drop at a wrong age": ("episode_dropped", _drop_at_a_wrong_age),
    "drop a fresh episode": ("episode_dropped", _drop_a_fresh_episode),
    "group scored twice": ("group_scored", _scored_twice),
    "group scored while owing": ("group_scored", _after_a_dispatch(_scored_while_owing)),
    "group scored without a member": ("group_scored", _scored_without_a_member),
    "advantages changed": ("group_scored", _advantages_changed),
    "advantages one short": ("group_scored", _advantages_one_short),
    "eval group trained": ("group_scored", _eval_group_trained),
    "empty group admitted": ("group_scored", _empty_group_admitted),
    "batch for a wrong step": ("batch_shipped", _batch_for_a_wrong_step),
    "batch trains an episode twice": ("batch_shipped", _trained_twice),
    "batch after the end": ("batch_shipped", _batch_after_the_end),
    "batch of an episode never queued": ("batch_shipped", _batch_of_an_episode_never_queued),
    **{
        f"arrival of malformed id {stray!r}": ("episode_completed", _arrival_of(stray))
        for stray in MALFORMED
    },
}


# What each decider, alone, says when it refuses a fault (`G`: a group or episode id); the
# faults not listed it accepts (only the account checks them).
_ID = r"g\d+(/\d+)?"
REFUSALS: dict[tuple[str, str], str] = {
    ("group number skipped", "dispatcher"): "expected group id G, got G",
    ("group opened twice", "dispatcher"): "group opened twice",
    ("group opened twice", "sink"): "opened twice",
    ("dispatch into an unknown group", "dispatcher"): "G is not open",
    ("dispatch into an unknown group", "sink"): "G is not open at the sink",
    ("cancel in an unknown group", "dispatcher"): "G is not open",
    ("cancel in an unknown group", "sink"): "G is not open at the sink",
    ("cancel more than the group", "dispatcher"): r"cancels (\d+) unscheduled, G has (\d+)",
    ("cancel more than the group", "sink"): r"G would account for more than \d+ members",
    ("cancel a member not in flight", "dispatcher"): "G is not in flight",
    ("cancel a member not in flight", "sink"): "G is not in flight at the sink",
    ("cancel more than unscheduled", "dispatcher"): r"cancels (\d+) unscheduled, G has (\d+)",
    ("restart names too few", "dispatcher"): (
        r"outstanding episodes differ: in flight but not named \['G'\], "
        r"named but not in flight \[\]"
    ),
    ("group scored twice", "sink"): "G is not open",
    ("group scored while owing", "dispatcher"): "G scored while the dispatcher still owes members",
    ("group scored while owing", "sink"): "G is not complete",
    ("advantages one short", "sink"): r"(\d+) members scored with (\d+) advantages",
    ("batch for a wrong step", "sink"): r"expected step \d+",
    ("batch of an episode never queued", "sink"): "G is not queued",
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@given(data=st.data())
def test_each_report_names_its_planted_fault(fault: str, data: st.DataObject) -> None:
    kind, plant = FAULTS[fault]
    log = data.draw(WORLDS.get(fault, world_logs(max_steps=60)), label="log")
    planted = _first(log, plant)
    if planted is None:  # no point in this log where the fault can be planted
        return
    damaged, planted_from, problem = planted
    seq = len(damaged) - 1
    assert damaged[seq].kind == kind
    reports = fed(damaged).violations
    # The problem as whole words: a report with letters glued to its ends is another text.
    before = r"(?<!\w)" if re.match(r"\w", problem) else ""
    after = r"(?!\w)" if re.search(r"\w$", problem) else ""
    named = re.compile(before + re.escape(problem) + after)
    assert any(
        report.startswith(f"seq {seq} ({kind}): ") and named.search(report) for report in reports
    ), (seq, kind, problem, reports)
    with pytest.raises(InvariantViolation) as raised:  # raising, the first report is raised
        fed(damaged, raising=True)
    assert str(raised.value) == reports[0]
    # Each decider on its own accepts the damaged log or refuses a planted event, naming
    # that event's seq and kind (in a fold the sink checks first and hides the dispatcher).
    for decider in (SINK, DISPATCHER):
        refused = _refusal(decider, damaged)
        expected = REFUSALS.get((fault, decider.name))
        if refused is None:
            assert expected is None, (decider.name, expected)
            continue
        assert refused.seq >= planted_from, (decider.name, refused)
        assert refused.kind == damaged[refused.seq].kind, (decider.name, refused)
        assert str(refused).startswith(f"seq {refused.seq} ({damaged[refused.seq].kind}): ")
        assert expected is not None, (decider.name, refused)
        assert re.fullmatch(expected.replace("G", _ID), refused.problem), (decider.name, refused)


def _refusal(decider: Decider[Any], log: list[Event]) -> InconsistentLogError | None:
    state = decider.initial_state(config_of(log))
    for event in log:
        try:
            state = decider.evolve(state, event)
        except InconsistentLogError as error:
            return error
    return None
