"""What the timeline and the trace draw: episode fates, markers, trainer spans, lanes."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from rolloutlog.replay.spans import (
    MARKERS,
    OUTCOMES,
    TRAINER_SPANS,
    pack_lanes,
    read_spans,
    trainer_spans,
)

BUSY, UPDATE, IDLE = (TRAINER_SPANS.index(name) for name in ("busy", "weight_update", "idle"))


def test_the_worked_example_gives_each_episode_its_fate(worked_log: Path) -> None:
    spans = read_spans(open_log(worked_log))
    fate = {
        episode_id: (OUTCOMES[outcome], age, step)
        for episode_id, outcome, age, step in zip(
            spans.episode_ids, spans.outcome, spans.age.tolist(), spans.step.tolist(), strict=True
        )
    }
    # g1 ships whole in batch 1; g2/1 and g3/0 are scored and queued, but nothing ships
    # after run_finished, so they are still waiting when the log ends.
    assert fate["g1/0"] == ("trained", 0, 1)
    assert fate["g1/1"] == ("trained", 0, 1)
    assert fate["g2/0"] == ("failed", -1, -1)
    assert fate["g2/1"] == ("waiting", -1, -1)
    assert fate["g3/0"] == ("waiting", -1, -1)
    cancelled = {e for e, (outcome, _, _) in fate.items() if outcome == "cancelled"}
    assert len(cancelled) == 3  # the shutdown cancellations
    markers = Counter(MARKERS[kind] for kind in spans.marker_kind)
    assert markers == {"failed": 1, "cancelled_shutdown": 3}
    i = spans.episode_ids.index("g2/0")
    assert (spans.start[i], spans.end[i]) == (0.0, 2.5)
    assert all(spans.end[spans.episode_ids.index(e)] == 6.0 for e in cancelled)
    assert spans.pending == [(3.0, 1)] and spans.live == [(3.5, 1)]
    assert [(t, step) for t, step, _, _ in spans.ships] == [(2.0, 1)]
    # idle until batch 1 ships, trains until v1 is published, updates weights until v1 is
    # live, idle until the end
    assert spans.trainer == [
        (0.0, 2.0, IDLE),
        (2.0, 3.0, BUSY),
        (3.0, 3.5, UPDATE),
        (3.5, 6.0, IDLE),
    ]


def test_a_batch_shipped_at_the_very_end_adds_no_empty_span() -> None:
    spans = trainer_spans(0.0, 6.0, [(2.0, 1, 2, 2), (6.0, 2, 2, 2)], [(3.0, 1)], [(3.5, 1)])
    assert spans == [(0.0, 2.0, IDLE), (2.0, 3.0, BUSY), (3.0, 3.5, UPDATE), (3.5, 6.0, IDLE)]


def test_a_skipped_version_keeps_the_trainer_busy_until_the_next_publication() -> None:
    ships = [(1.0, 1, 4, 4), (2.0, 2, 4, 4)]
    spans = trainer_spans(0.0, 8.0, ships, [(5.0, 2)], [(6.0, 2)])
    assert spans == [(0.0, 1.0, IDLE), (1.0, 5.0, BUSY), (5.0, 6.0, UPDATE), (6.0, 8.0, IDLE)]


def test_a_batch_shipped_during_a_weight_update_waits_for_it() -> None:
    ships = [(0.0, 1, 4, 4), (2.5, 2, 4, 4)]
    spans = trainer_spans(0.0, 5.0, ships, [(2.0, 1), (4.0, 2)], [(3.0, 1), (4.5, 2)])
    assert spans == [
        (0.0, 2.0, BUSY),
        (2.0, 3.0, UPDATE),
        (3.0, 4.0, BUSY),
        (4.0, 4.5, UPDATE),
        (4.5, 5.0, IDLE),
    ]


def test_markers_and_fates_agree_with_the_replay_summary(chaos_log: Path) -> None:
    spans = read_spans(open_log(chaos_log))
    summary = replay_log(open_log(chaos_log)).summary
    markers = Counter(MARKERS[kind] for kind in spans.marker_kind)
    fates = Counter(OUTCOMES[outcome] for outcome in spans.outcome)
    assert spans.episodes == summary["episodes_dispatched"]
    for reason, count in summary["episodes_cancelled"].items():
        assert markers[f"cancelled_{reason}"] == count
        assert sum(spans.reason == list(summary["episodes_cancelled"]).index(reason)) == count
    assert markers["dropped"] == summary["episodes_dropped_stale"] == fates["dropped"]
    assert markers["late"] == summary["episodes_late"] == int(spans.late.sum()) > 0
    assert fates["trained"] == summary["episodes_trained"]
    assert fates["pruned"] == summary["episodes_pruned_zero_adv"]
    assert (spans.end >= spans.start).all()
    trained = spans.outcome == OUTCOMES.index("trained")
    assert (spans.age[trained] == spans.step[trained] - 1 - spans.version[trained]).all()


intervals = st.lists(
    st.tuples(st.integers(0, 50), st.integers(0, 10)).map(lambda p: (p[0], p[0] + p[1])),
    max_size=40,
)


@given(intervals)
def test_lanes_never_overlap_and_are_as_few_as_the_most_at_once(
    spans: list[tuple[int, int]],
) -> None:
    starts, ends = [s for s, _ in spans], [e for _, e in spans]
    lanes = pack_lanes(starts, ends)
    by_lane: dict[int, list[tuple[int, int]]] = {}
    for lane, span in zip(lanes, spans, strict=True):
        by_lane.setdefault(lane, []).append(span)
    for held in by_lane.values():
        held.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(held))
    at_once = max((sum(s <= t < e or s == t == e for s, e in spans) for t in starts), default=0)
    assert len(by_lane) == (max(lanes) + 1 if lanes else 0) <= at_once


def test_an_update_of_no_time_followed_by_the_next_announcement_at_once_pairs_each_right() -> None:
    # Found by explain's property that its waits are the trainer's idle and update time: at
    # t=20, v1 goes live, then v2 (batch 2, shipped during v1's update, trained in no time)
    # is announced and goes live; sorting the instants by kind paired v2's announcement
    # with v1's update and drew 8-20 as idle.
    ships = [(0.5, 1, 1, 1), (10.5, 2, 1, 1)]
    spans = trainer_spans(0.0, 30.0, ships, [(8.0, 1), (20.0, 2)], [(20.0, 1), (20.0, 2)])
    assert spans == [
        (0.0, 0.5, IDLE),
        (0.5, 8.0, BUSY),
        (8.0, 20.0, UPDATE),
        (20.0, 20.0, BUSY),
        (20.0, 20.0, UPDATE),
        (20.0, 30.0, IDLE),
    ]
