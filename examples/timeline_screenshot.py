"""The README's picture: the timeline of examples/simulated.arrow, shot by headless Chromium.

.venv/bin/python examples/timeline_screenshot.py      # writes docs/img/timeline.png
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from rolloutlog.replay.source import open_log
from rolloutlog.replay.timeline_page import Window, timeline_page
from rolloutlog.testing.browser import HeadlessChromium, find_chromium

ROOT = Path(__file__).resolve().parents[1]


def shoot(log: Path, window: Window, title: str, picture: Path) -> None:
    """The timeline page of `log` over `window`, as a 1400x700 screenshot at `picture`."""
    chromium = find_chromium()
    if chromium is None:
        sys.exit("no Chromium on PATH (apt-get install chromium)")
    html, _ = timeline_page(open_log(log), window, title)
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "timeline.html"
        page.write_text(html, encoding="utf-8")
        with HeadlessChromium(chromium, Path(scratch) / "profile", width=1400, height=700) as b:
            b.open(page.as_uri())
            b.wait_for("window.__timeline && window.__timeline.stats().draws > 0")
            b.screenshot(picture)
    print(f"wrote {picture.relative_to(ROOT)}")


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # --help
    log = ROOT / "examples/simulated.arrow"
    shoot(log, Window(), "simulated.arrow", ROOT / "docs/img/timeline.png")


if __name__ == "__main__":
    main()
