"""diff (digest chains and bisection), show (state at a seq, timelines) and the chain."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.replay.chain import DigestChain, first_difference
from rolloutlog.replay.diff import diff_logs, event_at
from rolloutlog.replay.fold import fold_events
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.state_view import state_at
from rolloutlog.replay.timeline import episode_timeline, group_timeline
from rolloutlog.testing.strategies import Tampered, tampered_logs
from tests.replay.replay_helpers import small_log


def _chain(prefix: list[int]) -> DigestChain:
    chain = DigestChain()
    for value in prefix:
        chain.append(value.to_bytes(16, "big"))
    return chain


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40))
def test_bisection_finds_the_first_difference_of_two_chains(a: list[int], b: list[int]) -> None:
    # Chains (like digest chains) that agree up to a point and then differ everywhere after.
    common = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if common is not None:
        a, b = a[:common] + [9] * (len(a) - common), b[:common] + [8] * (len(b) - common)
    linear = next(
        (i for i in range(max(len(a), len(b))) if i >= min(len(a), len(b)) or a[i] != b[i]), None
    )
    assert first_difference(_chain(a), _chain(b)) == linear


def test_identical_logs_have_no_difference() -> None:
    result = diff_logs(MemoryLog(small_log()), MemoryLog(small_log()))
    assert result.seq is None and result.error is None
    assert result.to_json()["identical"] is True


@given(tampered_logs(decided_only=False))
def test_diff_names_the_first_changed_event(tampered: Tampered) -> None:
    result = diff_logs(MemoryLog(tampered.original), MemoryLog(tampered.log))
    assert result.seq == tampered.seq, tampered.how
    assert result.a == event_at(MemoryLog(tampered.original), tampered.seq)  # None: it ended
    assert result.b == event_at(MemoryLog(tampered.log), tampered.seq)


def test_a_log_going_on_with_an_event_the_fold_refuses_differs_there() -> None:
    # Hypothesis found it: the last group_scored duplicated. Both chains are 19 long and
    # equal (the fold of the longer log refuses its seq 19), yet only one log has seq 19.
    log = small_log()
    assert log[-1].kind == "group_scored"
    longer = [*log, attrs.evolve(log[-1], seq=len(log))]
    result = diff_logs(MemoryLog(log), MemoryLog(longer))
    assert (result.seq, result.a, result.b) == (len(log), None, longer[-1])
    assert result.error is not None and result.error[0] == "b"
    assert "g3 is not open" in str(result.error[1])


def test_a_log_and_its_prefix_differ_where_the_prefix_ends() -> None:
    log = small_log()
    result = diff_logs(MemoryLog(log), MemoryLog(log[:9]))
    assert (result.seq, result.a, result.b) == (9, log[9], None)


def test_state_at_a_seq_shows_groups_members_and_queue() -> None:
    fold = fold_events(small_log(), stop_before=10).fold  # after seq 9: g1 scored, g2 in flight
    assert fold is not None
    state = state_at(fold)
    assert (state["seq"], state["step"], state["permits_held"]) == (9, 1, 2)
    assert [g["group_id"] for g in state["open_groups"]] == ["g2"]
    members = state["open_groups"][0]["members"]
    assert [(m["episode_id"], m["state"], m["age"]) for m in members] == [
        ("g2/0", "in_flight", 0),
        ("g2/1", "in_flight", 0),
    ]
    assert state["queue"]["episodes"] == 2 and state["queue"]["age_histogram"] == {"0": 2}


def test_group_and_episode_timelines() -> None:
    log = small_log()
    group = group_timeline(MemoryLog(log), "g1")
    assert [m.event.seq for m in group] == [1, 2, 3, 4, 7, 8, 10]
    episode = episode_timeline(MemoryLog(log), "g2/1")
    assert [(m.event.kind, m.step, m.age) for m in episode] == [
        ("group_opened", 1, None),
        ("episode_dispatched", 1, 0),
        ("episodes_cancelled", 2, 1),
        ("group_scored", 2, 1),
    ]
    assert group_timeline(MemoryLog(log), "g99") == []


def test_an_episode_no_event_names_has_no_timeline() -> None:
    """g1 opened and scored, but it has two members: nothing is about g1/7."""
    log = small_log()
    assert episode_timeline(MemoryLog(log), "g1/7") == []
    assert episode_timeline(MemoryLog(log), "g99/0") == []


def test_a_group_timeline_gives_the_age_of_the_members_each_event_names() -> None:
    group = group_timeline(MemoryLog(small_log()), "g2")
    assert [(m.event.kind, m.step, m.age) for m in group] == [
        ("group_opened", 1, None),
        ("episode_dispatched", 1, 0),
        ("episode_dispatched", 1, 0),
        ("episode_completed", 2, 1),
        ("episodes_cancelled", 2, 1),
        ("group_scored", 2, 1),
    ]
