"""verify --policy: a foreign log conforms under its preset, whatever its task source,
its order across groups and its clock (within the tolerance); a log that breaks one rule
of the contract is named at the seq that breaks it, with that rule."""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import RunConfig
from rolloutlog.core.presets import BASES, FIELD, preset_overrides
from rolloutlog.events.types import EpisodeDropped, Event, GroupOpened, GroupScored
from rolloutlog.replay.conformance import RULES, check_conformance
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.verify import verify_log
from rolloutlog.testing.strategies import run_configs, world_logs
from tests.replay.foreign_logs import foreign
from tests.replay.replay_helpers import small_log, small_run

# Every preset a foreign orchestrator may claim: rolloutlog's own, `all`, the field's.
PRESETS = [*BASES, "all", *FIELD]


@pytest.mark.parametrize("preset", PRESETS)
@given(data=st.data())
def test_a_foreign_log_conforms_to_its_preset(preset: str, data: st.DataObject) -> None:
    log = data.draw(world_logs(run_configs(**preset_overrides(preset))))
    delay = data.draw(st.sampled_from([0.0, 0.05, 1.5]))
    theirs = foreign(log, random.Random(data.draw(st.integers(0, 2**32))), delay=delay)
    verdict = check_conformance(MemoryLog(theirs), preset, t_tolerance=delay)
    assert verdict.ok, verdict.nonconformity and verdict.nonconformity.describe()
    assert verdict.events == len(theirs)


def test_the_task_source_is_the_logs() -> None:
    """Foreign tasks fail `verify` at the first group, and conform."""
    theirs = [_task(e, "gsm8k") for e in small_log()]
    assert not verify_log(MemoryLog(theirs)).ok
    assert check_conformance(MemoryLog(theirs), "per-episode").ok


def test_decisions_on_different_groups_conform_in_any_order() -> None:
    log = small_log()  # seq 15-18: shutdown cancels g2 and g3, then scores both
    assert [e.kind for e in log[15:]] == ["episodes_cancelled"] * 2 + ["group_scored"] * 2
    reordered = _renumbered([*log[:15], log[16], log[18], log[15], log[17]])
    assert check_conformance(MemoryLog(reordered), "per-episode").ok


def _task(event: Event, env: str) -> Event:
    if not isinstance(event, GroupOpened):
        return event
    return attrs.evolve(event, env=env, task_id=f"{env}/{event.task_id}")


def _renumbered(events: list[Event]) -> list[Event]:
    return [attrs.evolve(e, seq=seq) for seq, e in enumerate(events)]


def _inserted(log: list[Event], seq: int, event: Event) -> list[Event]:
    return _renumbered([*log[:seq], event, *log[seq:]])


def _removed(log: list[Event], seq: int) -> list[Event]:
    return _renumbered([*log[:seq], *log[seq + 1 :]])


def _swapped(log: list[Event], a: int, b: int) -> list[Event]:
    swapped = list(log)
    swapped[a], swapped[b] = log[b], log[a]
    return _renumbered(swapped)


def _changed(log: list[Event], seq: int, **fields: object) -> list[Event]:
    return [attrs.evolve(e, **fields) if e.seq == seq else e for e in log]


def _later(log: list[Event], seqs: range, t: float) -> list[Event]:
    return [attrs.evolve(e, t=t) if e.seq in seqs else e for e in log]


def _g2_first() -> list[Event]:
    """A run that opens g1 and g2 at once (seq 1-3, 4-6), recorded g2 first."""
    log = small_run(RunConfig.from_mapping({"group_size": 2, "max_inflight": 4, "batch_size": 2}))
    assert [e.kind for e in log[1:7:3]] == ["group_opened"] * 2
    return _renumbered([log[0], *log[4:7], *log[1:4], *log[7:]])


def _dropped(seq: int) -> EpisodeDropped:
    return EpisodeDropped(t=1.0, seq=seq, episode_id="g1/0", reason="stale", age=0)


# small_log (per-episode): seq 4 g1/0 arrives, 5-6 open g2 and dispatch g2/0; seq 7 g1/1
# arrives, 8 scores g1, 9 dispatches g2/1, 10 ships g1; seq 11 g2/0 arrives; seq 14 the
# run finishes, 15-18 cancel and score g2 and g3.
Break = Callable[[list[Event]], list[Event]]
# case: (the rule, how the log breaks it, the seq named, the world event it reacts to,
# the tolerance); every rule of the contract has a case.
BROKEN: dict[str, tuple[str, Break, int, int, float]] = {
    "an extra drop": ("unexpected-decision", lambda log: _inserted(log, 5, _dropped(5)), 5, 4, 0),
    "no refill": ("missing-decision", lambda log: _removed(log, 9), 10, 7, 0),
    "no last score": ("missing-decision", lambda log: log[:-1], 18, 14, 0),
    "not admitted": ("different-fields", lambda log: _changed(log, 17, admitted=False), 17, 14, 0),
    "shipped before scored": ("group-order", lambda log: _swapped(log, 8, 10), 8, 7, 0),
    "g3 opened before g2": ("different-fields", lambda log: _swapped(log, 5, 12), 5, 4, 0),
    "g2 opened before g1": ("group-order", lambda log: _g2_first(), 1, 0, 0),
    "late": ("t-tolerance", lambda log: _later(log, range(9, 11), 2.5), 9, 7, 0.25),
}


def test_every_rule_has_a_broken_log() -> None:
    assert {case[0] for case in BROKEN.values()} == set(RULES)


@pytest.mark.parametrize("case", BROKEN)
def test_a_log_that_breaks_one_rule_is_named_with_it(case: str) -> None:
    rule, breaks, seq, cause, tolerance = BROKEN[case]
    log = breaks(small_log())
    verdict = check_conformance(MemoryLog(log), "per-episode", t_tolerance=tolerance)
    broken = verdict.nonconformity
    assert verdict.error is None and broken is not None
    assert (broken.rule, broken.seq, broken.cause) == (rule, seq, cause), broken.describe()
    assert verdict.events == seq
    assert broken.describe().startswith(f"seq {seq}: {rule} ({RULES[rule]})")


def test_a_late_decision_conforms_within_the_tolerance() -> None:
    late = _later(small_log(), range(9, 11), 2.5)
    assert check_conformance(MemoryLog(late), "per-episode", t_tolerance=0.5).ok


def test_the_differing_fields_are_named() -> None:
    broken = _changed(small_log(), 17, admitted=False)
    found = check_conformance(MemoryLog(broken), "per-episode").nonconformity
    assert found is not None and found.differing() == ["admitted"]
    assert isinstance(found.expected, GroupScored) and found.expected.admitted
