"""A long command's progress on stderr: a live bar on a terminal, and when stderr is not
one (piped, redirected to a file, under CI) a plain line now and then, so that a run of
minutes is never silent and a log file does not fill with redraws."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

LINE_INTERVAL_S: Final = (
    10.0  # off a terminal: the first update, then one line this often, and the last
)

Update = Callable[[int, str], None]  # (units done, what to say about them)


@contextmanager
def progress(unit: str, total: int, *, quiet: bool = False, first: str = "") -> Iterator[Update]:
    """`update(done, line)` shows `unit done/total  line`; `first` is shown before any."""
    if quiet:
        yield lambda done, line: None
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        yield _lines(unit, total)
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


def _lines(unit: str, total: int) -> Update:
    started = time.monotonic()
    last: list[float] = []

    def update(done: int, line: str) -> None:
        now = time.monotonic()
        if not last or done >= total or now - last[0] >= LINE_INTERVAL_S:
            last[:] = [now]
            click.echo(f"{unit} {done}/{total}  {line}  ({now - started:.0f} s)", err=True)

    return update
