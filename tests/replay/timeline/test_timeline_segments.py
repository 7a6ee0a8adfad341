"""An interrupted and resumed episode drawn as its segments, one per version, with the
gap between its abort and its resumption: in the spans, the Chrome trace and the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from rolloutlog.events.log_writer import write_log
from rolloutlog.replay.chrome_trace import trace_events
from rolloutlog.replay.source import open_log
from rolloutlog.replay.spans import Spans, read_spans
from rolloutlog.replay.timeline_page import Window, page_data
from tests.core.interrupted_runs import finished_interrupted_run


@pytest.fixture
def spans(tmp_path: Path) -> Spans:
    """g2 and g3 in flight at v1's update (t=3), interrupted, resumed under v1 at t=4."""
    write_log(tmp_path / "interrupted.arrow", finished_interrupted_run())
    return read_spans(open_log(tmp_path / "interrupted.arrow"))


def test_each_pause_runs_from_the_abort_to_the_resumption(spans: Spans) -> None:
    paused = [spans.episode_ids[i] for i, *_ in spans.pauses]
    assert paused == ["g2/0", "g2/1", "g3/0", "g3/1"]
    assert {(stop, resume, version) for _, stop, resume, version in spans.pauses} == {(3.0, 4.0, 1)}
    g2 = spans.episode_ids.index("g2/0")
    assert spans.segments()[g2] == [(float(spans.start[g2]), 3.0, 0), (4.0, 5.0, 1)]
    assert spans.episode_ids.index("g1/0") not in spans.segments()


def test_the_trace_has_one_slice_per_segment_with_its_version(spans: Spans) -> None:
    slices = [e for e in trace_events(spans) if e["ph"] == "X" and e["name"] == "g2/0"]
    assert [(s["ts"], s["args"]["segment"], s["args"]["version"]) for s in slices] == [
        (spans.start[spans.episode_ids.index("g2/0")] * 1e6, 0, 0),
        (4.0e6, 1, 1),
    ]
    assert slices[0]["ts"] + slices[0]["dur"] == 3.0e6  # the gap: 3 s to 4 s, empty
    (whole,) = [e for e in trace_events(spans) if e["ph"] == "X" and e["name"] == "g1/0"]
    assert "segment" not in whole["args"]


def test_the_page_holds_the_pauses_of_the_episodes_it_shows(spans: Spans) -> None:
    columns = page_data(spans, {}, Window(), "t")["columns"]
    assert {name for name in columns if name.startswith("pause_")} == {
        "pause_episode",
        "pause_start",
        "pause_end",
        "pause_version",
        "pause_until",
    }
    assert not any(
        name.startswith("pause_")
        for name in page_data(spans, {}, Window(group="g1"), "t")["columns"]
    )
