"""docs/explain.md's picture: a window of the slow-update run's timeline, with the band of
why the trainer waited under its row, shot by headless Chromium.

.venv/bin/python examples/explain_screenshot.py      # writes docs/img/explain.png
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rolloutlog.replay.source import open_log
from rolloutlog.replay.timeline_page import Window, timeline_page
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.testing.browser import HeadlessChromium, find_chromium

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    chromium = find_chromium()
    if chromium is None:
        sys.exit("no Chromium on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "su.arrow"  # as `simulate --scenario slow-update --steps 20`
        run_policy(load_scenario("slow-update").with_steps(20), log_path=log)
        html, _ = timeline_page(open_log(log), Window(t_from=600.0, t_to=1000.0), "su.arrow")
        page = Path(scratch) / "timeline.html"
        page.write_text(html, encoding="utf-8")
        with HeadlessChromium(chromium, Path(scratch) / "profile", width=1400, height=700) as b:
            b.open(page.as_uri())
            b.wait_for("window.__timeline && window.__timeline.stats().draws > 0")
            b.screenshot(ROOT / "docs/img/explain.png")
    print("wrote docs/img/explain.png")


if __name__ == "__main__":
    main()
