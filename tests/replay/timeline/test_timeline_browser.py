"""The timeline page in a real browser: headless Chromium over the DevTools protocol.

Skipped only when Chromium is absent and ROLLOUTLOG_REQUIRE_BROWSER is unset; CI sets it
(and installs Chromium), so there a missing browser fails instead of skipping.
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rolloutlog.events.log_writer import write_log
from rolloutlog.replay.explain import cause_bands
from rolloutlog.replay.source import open_log
from rolloutlog.replay.spans import MARKERS, OUTCOMES, Spans, read_spans
from rolloutlog.replay.timeline_page import Window, page_data, render_page
from rolloutlog.testing.browser import REQUIRE_ENV, HeadlessChromium, find_chromium
from tests.core.interrupted_runs import finished_interrupted_run

CHROMIUM = find_chromium()
if CHROMIUM is None and not os.environ.get(REQUIRE_ENV):
    pytest.skip("no Chromium on PATH (set ROLLOUTLOG_CHROMIUM)", allow_module_level=True)

# Painted pixels (alpha > 0) on uPlot's canvas.
INK = """(() => { const c = document.querySelector('.uplot canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; })()"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadlessChromium]:
    if CHROMIUM is None:
        pytest.fail(f"{REQUIRE_ENV} is set but no Chromium is on PATH")
    with HeadlessChromium(CHROMIUM, tmp_path_factory.mktemp("chromium")) as chromium:
        yield chromium


@pytest.fixture(scope="module")
def page(chaos_log: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Spans, Path]:
    spans = read_spans(open_log(chaos_log))
    html = tmp_path_factory.mktemp("page") / "chaos.html"
    causes = cause_bands(open_log(chaos_log))
    data = page_data(spans, {"events": 1}, Window(), title="chaos", causes=causes)
    html.write_text(render_page(data))
    return spans, html


@pytest.fixture
def shown(browser: HeadlessChromium, page: tuple[Spans, Path]) -> Spans:
    """The page freshly opened, with its first frame drawn."""
    browser.open(page[1].as_uri())
    browser.wait_for("window.__timeline && window.__timeline.stats().draws > 0")
    return page[0]


def stats(browser: HeadlessChromium) -> dict[str, Any]:
    value: dict[str, Any] = browser.evaluate("window.__timeline.stats()")
    return value


def test_the_page_draws_every_bar_and_marker_without_errors_or_requests(
    browser: HeadlessChromium,
    shown: Spans,
    page: tuple[Spans, Path],
    tmp_path: Path,
    chaos_log: Path,
) -> None:
    drawn = stats(browser)
    assert browser.console_errors() == []
    assert browser.requests() == [page[1].as_uri()]
    assert drawn["bars_visible"] == shown.episodes
    assert 0 < drawn["bars_drawn"] <= shown.episodes
    expected = Counter(MARKERS[kind] for kind in shown.marker_kind)
    assert drawn["markers_visible"] == {name: expected[name] for name in MARKERS}
    # at least one of each kind present is drawn (several on one pixel of a row draw once)
    assert {k: n > 0 for k, n in drawn["markers_drawn"].items()} == {
        name: expected[name] > 0 for name in MARKERS
    }
    assert all(drawn["markers_drawn"][k] <= expected[k] for k in MARKERS)
    assert drawn["version_lines"] == len(shown.pending) + len(shown.live)
    assert drawn["ships"] == len(shown.ships)
    assert drawn["trainer_spans"] == len(shown.trainer)
    assert drawn["cause_spans"] == len(cause_bands(open_log(chaos_log))) > 0
    assert browser.evaluate(INK) > 20_000
    shown_range = browser.evaluate("document.getElementById('range').textContent")
    assert shown_range.startswith("showing 0.00 s … "), shown_range  # not the padding's -0.46
    screenshot = tmp_path / "timeline.png"
    browser.screenshot(screenshot)
    assert (
        screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
    )


def test_wheel_keys_and_drag_zoom_and_pan(browser: HeadlessChromium, shown: Spans) -> None:
    full = stats(browser)
    width = full["x_max"] - full["x_min"]
    box = browser.evaluate(
        "(() => { const r = document.querySelector('.u-over')"
        ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()"
    )
    left, top, w, h = box
    browser.mouse("mouseWheel", left + w / 2, top + h / 2, deltaX=0, deltaY=-600)
    wheel = stats(browser)
    assert wheel["x_max"] - wheel["x_min"] < width / 2
    assert wheel["bars_visible"] < shown.episodes
    browser.key("+")
    keyed = stats(browser)
    assert keyed["x_max"] - keyed["x_min"] == pytest.approx((wheel["x_max"] - wheel["x_min"]) / 2)
    browser.key("ArrowRight")
    panned = stats(browser)
    assert panned["x_min"] > keyed["x_min"]
    browser.key("0")
    assert stats(browser)["bars_visible"] == shown.episodes
    browser.mouse("mousePressed", left + w * 0.25, top + h / 2, button="left", clickCount=1)
    browser.mouse("mouseMoved", left + w * 0.5, top + h / 2, button="left")
    browser.mouse("mouseReleased", left + w * 0.5, top + h / 2, button="left", clickCount=1)
    dragged = stats(browser)
    assert dragged["x_max"] - dragged["x_min"] == pytest.approx(
        (full["x_max"] - full["x_min"]) / 4, rel=0.05
    )
    # shift+drag pans: the range moves right by the distance dragged left, its width stays
    shift = 8  # the DevTools protocol's modifier bit for Shift
    browser.mouse("mousePressed", left + w * 0.6, top + h / 2, button="left", modifiers=shift)
    browser.mouse("mouseMoved", left + w * 0.4, top + h / 2, button="left", modifiers=shift)
    browser.mouse("mouseReleased", left + w * 0.4, top + h / 2, button="left", modifiers=shift)
    moved = stats(browser)
    span = dragged["x_max"] - dragged["x_min"]
    assert moved["x_max"] - moved["x_min"] == pytest.approx(span)
    assert moved["x_min"] - dragged["x_min"] == pytest.approx(0.2 * span, rel=0.05)
    assert browser.console_errors() == []


def test_hover_names_the_episode_and_its_fate(browser: HeadlessChromium, shown: Spans) -> None:
    trained = OUTCOMES.index("trained")
    # the first trained episode in page order (the page orders by version, then start)
    index = browser.evaluate(
        "(() => { const d = JSON.parse(document.getElementById('timeline-data').textContent);"
        " const b = atob(d.columns.outcome.b64);"
        f" for (let i = 0; i < b.length; i++) if (b.charCodeAt(i) === {trained}) return i;"
        " return -1; })()"
    )
    where = browser.evaluate(f"window.__timeline.where({index})")
    browser.mouse("mouseMoved", where["x"], where["y"])
    tip = browser.evaluate("window.__timeline.tooltip()")
    assert tip is not None and tip.startswith("episode g") and "trained in batch" in tip
    assert "age" in tip


def test_an_interrupted_episode_is_drawn_as_its_segments_with_the_gap_empty(
    browser: HeadlessChromium, tmp_path: Path
) -> None:
    """The same run drawn with and without its pauses: the gaps take ink off the bars, and
    hovering a paused episode names its abort and its resumption."""
    write_log(tmp_path / "interrupted.arrow", finished_interrupted_run())
    spans = read_spans(open_log(tmp_path / "interrupted.arrow"))
    data = page_data(spans, {"events": 1}, Window(), title="interrupted")
    ink = {}
    for name, shown in (
        ("segments", data),
        (
            "whole",
            {
                **data,
                "columns": {k: v for k, v in data["columns"].items() if not k.startswith("pause_")},
            },
        ),
    ):
        html = tmp_path / f"{name}.html"
        html.write_text(render_page(shown))
        browser.open(html.as_uri())
        browser.wait_for("window.__timeline && window.__timeline.stats().draws > 0")
        ink[name] = browser.evaluate(INK)
        assert browser.console_errors() == []
    assert stats(browser)["pauses_visible"] == 0
    assert ink["segments"] < ink["whole"]
    browser.open((tmp_path / "segments.html").as_uri())
    browser.wait_for("window.__timeline && window.__timeline.stats().draws > 0")
    assert stats(browser)["pauses_visible"] == len(spans.pauses) == 4
    paused = browser.evaluate("window.__timeline.where(" + str(_page_index(data, 0)) + ")")
    browser.mouse("mouseMoved", paused["x"], paused["y"])
    tip = browser.evaluate("window.__timeline.tooltip()")
    assert tip is not None and "interrupted at" in tip and "under v1" in tip


def _page_index(data: dict[str, Any], k: int) -> int:
    """The page position of the episode of the `k`-th pause."""
    return int(np.frombuffer(base64.b64decode(data["columns"]["pause_episode"]["b64"]), "<u4")[k])
