"""A long command's progress on stderr: a live bar on a terminal, and when stderr is not
one (piped, redirected to a file, under CI, `--json`) a plain line now and then, so that a
run of minutes is never silent and a log file does not fill with redraws. A phase without
units to count (reading and checking a log, fitting a world) says what it does once it has
taken two seconds: a spinner on a terminal, else a line every ten seconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

# off a terminal: the first update, then one line this often (also while nothing moves),
# and the last
LINE_INTERVAL_S: Final = 10.0
PHASE_QUIET_S: Final = 2.0  # a phase shorter than this says nothing

Update = Callable[[int, str], None]  # (units done, what to say about them)


@contextmanager
def progress(unit: str, total: int, *, quiet: bool = False, first: str = "") -> Iterator[Update]:
    """`update(done, line)` shows `unit done/total  line`; `first` is shown before any."""
    if quiet:
        yield lambda done, line: None
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        with _lines(unit, total, first) as update:
            yield update
        return
    bar = Progress(
        TextColumn(unit),
        MofNCompleteColumn(),
        BarColumn(bar_width=10),
        TextColumn("{task.fields[line]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with bar:
        task = bar.add_task(unit, total=total, line=first)
        yield lambda done, line: bar.update(task, completed=done, line=line)


@contextmanager
def phase(what: str) -> Iterator[None]:
    """Say on stderr that `what` (`verifying run.arrow`) is under way, once it has taken
    `PHASE_QUIET_S`: a spinner on a terminal, else `rolloutlog: what ... (N s)` every
    `LINE_INTERVAL_S`."""
    console = Console(stderr=True)
    started, done = time.monotonic(), threading.Event()
    if console.is_terminal:

        def show() -> None:
            if not done.wait(PHASE_QUIET_S):
                with console.status(f"{what} …"):
                    done.wait()

    else:

        def say() -> None:
            click.echo(f"rolloutlog: {what} ... ({time.monotonic() - started:.0f} s)", err=True)

        if PHASE_QUIET_S <= 0:  # at once, before the work: every phase says what it does
            say()

        def show() -> None:
            wait = PHASE_QUIET_S if PHASE_QUIET_S > 0 else LINE_INTERVAL_S
            while not done.wait(wait):
                say()
                wait = LINE_INTERVAL_S

    shower = threading.Thread(target=show, daemon=True)
    shower.start()
    try:
        yield
    finally:
        done.set()
        shower.join()


class _Lines:
    """Progress as lines: at the first update, then at most one every `LINE_INTERVAL_S`
    (the latest state again while nothing moves, from a heartbeat thread), and the last."""

    def __init__(self, unit: str, total: int, first: str) -> None:
        self.unit, self.total, self.done, self.line = unit, total, 0, first
        self.started = time.monotonic()
        self.said: float | None = None
        self.lock, self.stop = threading.Lock(), threading.Event()

    def update(self, done: int, line: str) -> None:
        with self.lock:
            self.done, self.line = done, line
            if self.said is None or done >= self.total or self._due():
                self._say()

    def heartbeat(self) -> None:
        if LINE_INTERVAL_S <= 0:  # a line at every update already
            return
        while not self.stop.wait(LINE_INTERVAL_S / 2):
            with self.lock:
                if self._due():
                    self._say()

    def _due(self) -> bool:
        return time.monotonic() - (self.said or self.started) >= LINE_INTERVAL_S

    def _say(self) -> None:
        self.said = now = time.monotonic()
        click.echo(
            f"{self.unit} {self.done}/{self.total}  {self.line}  ({now - self.started:.0f} s)",
            err=True,
        )


@contextmanager
def _lines(unit: str, total: int, first: str) -> Iterator[Update]:
    lines = _Lines(unit, total, first)
    beating = threading.Thread(target=lines.heartbeat, daemon=True)
    beating.start()
    try:
        yield lines.update
    finally:
        lines.stop.set()
        beating.join()
