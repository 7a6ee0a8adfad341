"""The account's planted faults, shared by `test_account_faults.py` (the dispatcher's
events and restarts) and `test_account_faults_sink.py` (arrivals and the sink's events).

A plant is shown the account before each event of a generated log and, at the first point
where its fault can be planted, returns the events put there and the problem the account
must report; `check_reported` checks that report, the raised one, and what each decider
alone says of the damaged log.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pytest

from rolloutlog.core.account import Account, InvariantViolation
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import DISPATCHER, SINK, Decider
from rolloutlog.core.presets import rules_for
from rolloutlog.events.types import WORLD_KINDS, BatchShipped, EpisodeDispatched, Event
from tests.core.planted import account_for, config_of, fed

UNKNOWN = "g9999"
Planted = tuple[list[Event], str]  # the events put where the matched one was; the problem
Plant = Callable[[Account, Event], Planted | None]


def first_plant(log: list[Event], plant: Plant) -> tuple[list[Event], int, str] | None:
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


def batch(t: float, step: int, episode_ids: tuple[str, ...] = ()) -> BatchShipped:
    return BatchShipped(t=t, step=step, episode_ids=episode_ids, trained_ids=(), tokens=0)


def restart_point(account: Account, event: Event) -> bool:
    """A world event (past `run_started`) that finds episodes in flight."""
    return event.kind in WORLD_KINDS and event.seq > 1 and bool(account.inflight)


def after_a_dispatch(put: Callable[[Account, EpisodeDispatched], tuple[Event, str]]) -> Plant:
    """The event `put` makes, put right after the first dispatch."""

    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, EpisodeDispatched):
            return None
        after, problem = put(account, event)
        return [event, after], problem

    return plant


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
    ("restart names none of many", "dispatcher"): (
        r"outstanding episodes differ: in flight but not named \['G', 'G', 'G'(, 'G')*\], "
        r"named but not in flight \[\]"
    ),
    ("group scored twice", "sink"): "G is not open",
    ("group scored while owing", "dispatcher"): "G scored while the dispatcher still owes members",
    ("group scored while owing", "sink"): "G is not complete",
    ("advantages one short", "sink"): r"(\d+) members scored with (\d+) advantages",
    ("batch for a wrong step", "sink"): r"expected step \d+",
    ("batch of an episode never queued", "sink"): "G is not queued",
}


def check_reported(
    fault: str,
    kind: str,
    plant: Plant,
    log: list[Event],
    refusals: Mapping[tuple[str, str], str] = REFUSALS,
) -> None:
    """The fault planted at its first point in `log` is reported at its seq, by name;
    `refusals` says what each decider alone says of it (a suite's own table)."""
    planted = first_plant(log, plant)
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
        expected = refusals.get((fault, decider.name))
        if refused is None:
            assert expected is None, (decider.name, expected)
            continue
        assert refused.seq >= planted_from, (decider.name, refused)
        assert refused.kind == damaged[refused.seq].kind, (decider.name, refused)
        assert str(refused).startswith(f"seq {refused.seq} ({damaged[refused.seq].kind}): ")
        assert expected is not None, (decider.name, refused)
        assert re.fullmatch(expected.replace("G", _ID), refused.problem), (decider.name, refused)


def _refusal(decider: Decider[Any], log: list[Event]) -> InconsistentLogError | None:
    config = config_of(log)
    state, rules = decider.initial_state(config), rules_for(config)
    for event in log:
        try:
            state = decider.evolve(rules, state, event)
        except InconsistentLogError as error:
            return error
    return None
