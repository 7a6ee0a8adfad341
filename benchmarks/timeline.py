"""The timeline page of a 1M-event log: how long it takes to build, its size, and how long
headless Chromium takes to show it.

    .venv/bin/python benchmarks/timeline.py                      # simulates the log once, cached
    .venv/bin/python benchmarks/timeline.py --log run.arrow      # any log
    .venv/bin/python benchmarks/timeline.py --screenshot docs/img/timeline-1m.png
    .venv/bin/python benchmarks/timeline.py --memory --log big.arrow   # the command's peak RSS

The log is `rolloutlog simulate --steps 4890` (the default scenario, seed 0): 1.00M events.
Reports: the seconds to build the page (read the spans, replay for the summary, encode;
wall clock and this process's CPU time, which a busy machine inflates less);
the HTML size; then, over `--rounds` fresh page loads in headless Chromium, the time to
first draw (from navigation start to the end of the first frame, the page's own clock),
and the time one frame takes to draw the whole run and a 1% window of it. `--memory`
instead runs `rolloutlog timeline LOG` (its default, sampled view past 100,000 episodes,
then `--max-episodes 0`, every episode) and reports each run's peak resident memory.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rolloutlog.events.log_reader import LogReader
from rolloutlog.replay.source import open_log
from rolloutlog.replay.timeline_page import Window, timeline_page
from rolloutlog.testing.browser import HeadlessChromium, find_chromium

STEPS = 4890
DEFAULT_LOG = Path(tempfile.gettempdir()) / f"rolloutlog-bench-timeline-{STEPS}.arrow"


def ensure_log(path: Path) -> Path:
    if not path.exists():
        print(f"simulating {STEPS} steps of the default scenario into {path} ...", flush=True)
        command = ["rolloutlog", "simulate", "--steps", str(STEPS), "--log", str(path)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help=f"the log to draw (default: {DEFAULT_LOG})")
    parser.add_argument("--rounds", type=int, default=3, help="page loads to time")
    parser.add_argument("--html", type=Path, help="keep the page here")
    parser.add_argument("--screenshot", type=Path, help="save a 0.5%% window of the run as PNG")
    parser.add_argument("--memory", action="store_true", help="the command's peak memory")
    args = parser.parse_args()
    if args.memory:
        measure_memory(args.log or ensure_log(DEFAULT_LOG))
        return
    chromium = find_chromium()
    if chromium is None:
        sys.exit("no Chromium on PATH (apt-get install chromium, or set ROLLOUTLOG_CHROMIUM)")
    log = args.log or ensure_log(DEFAULT_LOG)
    info = LogReader(log).info()
    print(f"log: {log}, {info.events:,} events, {log.stat().st_size / 1e6:.1f} MB")

    began, cpu = time.perf_counter(), time.process_time()
    html, data = timeline_page(open_log(log), Window(), log.name)
    built, cpu = time.perf_counter() - began, time.process_time() - cpu
    with tempfile.TemporaryDirectory() as scratch:
        page = args.html or Path(scratch) / "timeline.html"
        page.write_text(html, encoding="utf-8")
        size = page.stat().st_size
        print(
            f"page: {data['episodes']:,} episodes on {data['rows']} rows, "
            f"{len(data['pending']) + len(data['live']):,} version lines, "
            f"built in {built:.1f} s ({cpu:.1f} s CPU), "
            f"HTML {size / 1e6:.1f} MB"
        )
        first, whole, window = [], [], []
        for round_ in range(args.rounds):
            with HeadlessChromium(chromium, Path(scratch) / f"profile{round_}") as browser:
                browser.open(page.as_uri(), timeout=300)
                browser.wait_for("window.__timeline && window.__timeline.stats().draws > 0")
                if browser.console_errors():
                    sys.exit(f"the page reported errors: {browser.console_errors()}")
                first.append(browser.evaluate("window.__timeline.stats().first_draw_ms"))
                full = data["range"][1]
                whole.append(redraw(browser, 0.0, full))
                window.append(redraw(browser, full * 0.5, full * 0.51))
                if args.screenshot is not None:
                    browser.evaluate(f"window.__timeline.setRange({full * 0.5}, {full * 0.505})")
                    browser.screenshot(args.screenshot)
        print(
            f"time to first draw: median {statistics.median(first):.0f} ms "
            f"(best {min(first):.0f} ms, {args.rounds} loads)"
        )
        print(
            f"one frame: whole run {statistics.median(whole):.0f} ms, "
            f"1% window {statistics.median(window):.1f} ms (medians)"
        )


# runs the command given and prints its peak resident memory (KiB) and CPU seconds: a
# fresh parent per measurement, since a process's children's peak is over all of them
_PEAK = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(usage.ru_maxrss, usage.ru_utime + usage.ru_stime)\n"
)


def measure_memory(log: Path) -> None:
    """Peak resident memory of `rolloutlog timeline LOG`, sampled and whole, each in a
    fresh process."""
    print(f"log: {log}, {LogReader(log).info().events:,} events")
    for extra in ([], ["--max-episodes", "0"]):
        with tempfile.TemporaryDirectory() as scratch:
            page = Path(scratch) / "t.html"
            command = [sys.executable, "-m", "rolloutlog", "timeline", str(log), "-o", str(page)]
            run = subprocess.run(
                [sys.executable, "-c", _PEAK, *command, *extra],
                capture_output=True,
                text=True,
                check=True,
            )
            peak_kib, cpu = run.stdout.split()
            sampled = [line for line in run.stderr.splitlines() if "drew every" in line]
            print(
                f"timeline {' '.join(extra) or '(default)'}: peak {int(peak_kib) / 1024:.0f} MB, "
                f"{float(cpu):.1f} s CPU, page {page.stat().st_size / 1e6:.1f} MB"
                + (f"; {sampled[0].split(': ', 2)[-1]}" if sampled else "")
            )


def redraw(browser: HeadlessChromium, t_min: float, t_max: float) -> float:
    """Milliseconds the page takes to draw one frame of [t_min, t_max] (best of 5)."""
    times = []
    for k in range(5):
        draws = browser.evaluate("window.__timeline.stats().draws")
        nudge = (t_max - t_min) * 1e-6 * k  # a new range each time, so that uPlot redraws
        browser.evaluate(f"window.__timeline.setRange({t_min + nudge}, {t_max + nudge})")
        stats = browser.evaluate("window.__timeline.stats()")
        if stats["draws"] != draws + 1:
            sys.exit(f"expected one redraw, the page drew {stats['draws'] - draws}")
        times.append(stats["draw_ms"])
    return float(min(times))


if __name__ == "__main__":
    main()
