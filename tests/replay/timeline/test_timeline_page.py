"""The timeline page as data and as HTML: rows packed by group, windows, a page with no requests."""

from __future__ import annotations

import base64
import itertools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from rolloutlog.cli.main import main
from rolloutlog.replay.source import open_log
from rolloutlog.replay.spans import MARKERS, Spans, read_spans
from rolloutlog.replay.timeline_page import (
    ASSETS,
    Window,
    WindowError,
    page_data,
    render_page,
)

TYPES = {
    "Float32": "<f4",
    "Uint32": "<u4",
    "Int32": "<i4",
    "Uint8": "u1",
    "Int8": "i1",
    "Int16": "<i2",
}


def columns(data: dict[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """The page's columns decoded the way its script decodes them."""
    return {
        name: np.frombuffer(base64.b64decode(column["b64"]), dtype=TYPES[column["type"]])
        for name, column in data["columns"].items()
    }


WHOLE = Window()


def data_for(log: Path, window: Window = WHOLE) -> tuple[Spans, dict[str, Any]]:
    spans = read_spans(open_log(log))
    return spans, page_data(spans, {"events": 1}, window, title="t")


def test_the_columns_carry_every_episode_and_marker(chaos_log: Path) -> None:
    spans, data = data_for(chaos_log)
    c = columns(data)
    assert data["episodes"] == spans.episodes == len(c["start"])
    ids = [f"{data['groups'][g]}/{m}" for g, m in zip(c["group"], c["member"], strict=True)]
    assert data["ids"] is None and sorted(ids) == sorted(spans.episode_ids)
    i, j = spans.episode_ids.index(ids[7]), 7
    assert c["start"][j] == np.float32(spans.start[i] - spans.t_start)
    assert c["version"][j] == spans.version[i] and c["outcome"][j] == spans.outcome[i]
    assert len(c["marker_t"]) == len(spans.marker_t)
    assert (np.diff(c["marker_t"]) >= 0).all()
    # each slice is one colour (version, discarded) and sorted by start, for binary search
    for offset, count, version, _ in data["slices"]:
        assert (c["version"][offset : offset + count] == version).all()
        assert (np.diff(c["start"][offset : offset + count]) >= 0).all()
    assert sum(count for _, count, _, _ in data["slices"]) == spans.episodes


def test_rows_are_packed_by_group(chaos_log: Path) -> None:
    _spans, data = data_for(chaos_log)
    c = columns(data)
    start, end, row, group = c["start"], c["end"], c["row"], c["group"]
    span = {g: (start[group == g].min(), end[group == g].max()) for g in set(group.tolist())}
    assert row.max() + 1 == data["rows"]
    for r in range(data["rows"]):
        # the hover index: a row's episodes by start, none overlapping
        held = c["by_row"][c["row_start"][r] : c["row_start"][r + 1]]
        assert (row[held] == r).all() and (np.diff(start[held]) >= 0).all()
        assert (end[held][:-1] <= start[held][1:]).all()
        # a row is shared by groups only one after the other
        groups = sorted(set(group[held].tolist()), key=lambda g: span[g][0])
        assert all(span[a][1] <= span[b][0] for a, b in itertools.pairwise(groups))


def test_a_window_keeps_one_group_or_one_time_range(chaos_log: Path) -> None:
    spans, whole = data_for(chaos_log)
    _, one = data_for(chaos_log, Window(group="g3"))
    assert 0 < one["episodes"] == sum(e.startswith("g3/") for e in spans.episode_ids)
    t_from, t_to = 100.0, 150.0
    _, part = data_for(chaos_log, Window(t_from=t_from, t_to=t_to))
    overlapping = (spans.end >= t_from) & (spans.start <= t_to)
    assert part["episodes"] == int(overlapping.sum()) < whole["episodes"]
    assert part["origin"] == t_from and part["range"][1] == pytest.approx(t_to - t_from)
    assert all(0 <= t <= t_to - t_from for t, _ in part["pending"].tolist() + part["live"].tolist())
    with pytest.raises(WindowError, match="no group 'nope'"):
        data_for(chaos_log, Window(group="nope"))
    with pytest.raises(WindowError, match="not before"):
        data_for(chaos_log, Window(t_from=5.0, t_to=5.0))


def test_the_page_is_self_contained(worked_log: Path) -> None:
    _, data = data_for(worked_log)
    data["title"] = "run </script><b>bold</b>"
    html = render_page(data)
    assert "default-src 'none'" in html  # the page's own policy forbids every request
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=", html, re.IGNORECASE)
    assert "<b>bold" not in html
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", html, re.DOTALL)
    assert len(scripts) == 3  # the data, uPlot, our script: nothing cut short
    assert json.loads(scripts[0]) == data
    assert "uPlot" in scripts[1] and "__timeline" in scripts[2]


def test_the_command_writes_the_page_and_refuses_an_unknown_group(
    worked_log: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.html"
    result = CliRunner().invoke(main, ["timeline", str(worked_log), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "8 episodes" in result.output and out.read_text().startswith("<!doctype html>")
    result = CliRunner().invoke(
        main, ["timeline", str(worked_log), "-o", str(out), "--group", "g9"]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"rolloutlog: error: {worked_log}: no group 'g9' in the log"
    ]


def test_the_command_takes_a_time_range(worked_log: Path, tmp_path: Path) -> None:
    out = tmp_path / "part.html"
    arguments = ["timeline", str(worked_log), "-o", str(out)]
    result = CliRunner().invoke(main, [*arguments, "--from", "4.5", "--to", "6"])
    assert result.exit_code == 0, result.output
    # g1 and g2/0 ended by 2.5, g2/1 arrived at 4.0: four episodes overlap [4.5, 6]
    assert "4 episodes" in result.output
    result = CliRunner().invoke(main, [*arguments, "--from", "6", "--to", "1"])
    assert result.exit_code == 2 and "--from 6.0 is not before --to 1.0" in result.output


def test_a_time_range_wider_than_float32_seconds_is_refused(worked_log: Path) -> None:
    """Finite, but the page's float32 range would be inf, which its JSON cannot hold."""
    for window in (Window(t_from=-1e300), Window(t_to=1e39), Window(-1.7e308, 1.7e308)):
        with pytest.raises(WindowError, match="too wide to draw"):
            data_for(worked_log, window)
    assert data_for(worked_log, Window(t_to=1e38))[1]["range"][1] < np.inf


@pytest.mark.parametrize(
    ("window", "refused"),
    [
        (["--to", "inf"], "--to inf"),
        (["--from", "nan"], "--from nan"),
        (["--from", "-inf", "--to", "inf"], "--from -inf"),
    ],
)
def test_the_command_refuses_a_time_that_is_not_finite(
    worked_log: Path, tmp_path: Path, window: list[str], refused: str
) -> None:
    out = tmp_path / "run.html"
    result = CliRunner().invoke(main, ["timeline", str(worked_log), "-o", str(out), *window])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"rolloutlog: error: {refused} is not a finite number of log seconds"
    ]
    assert not out.exists()


def test_the_script_styles_every_marker_kind() -> None:
    script = (resources.files(ASSETS) / "timeline.js").read_text(encoding="utf-8")
    assert [name for name in MARKERS if f"{name}: [" not in script] == []


def test_the_summary_panel_rounds_what_it_shows_and_keeps_the_summary_whole() -> None:
    summary = {"mean_trained_age": 1 / 3, "episodes_cancelled": {"stale": 3}, "run_finished": None}
    spans = read_spans(open_log(Path(__file__).resolve().parents[3] / "examples/simulated.arrow"))
    data = page_data(spans, summary, WHOLE, title="t")
    assert data["summary"] == summary
    assert data["summary_rows"] == [
        ["mean_trained_age", "0.333"],
        ["episodes_cancelled · stale", "3"],
        ["run_finished", "null"],
    ]
