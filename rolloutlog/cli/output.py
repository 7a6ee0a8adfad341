"""What every command prints the same way: JSON, key/value tables, warnings on stderr."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import click
from rich.table import Table

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.events.errors import EventError, LogError
from rolloutlog.events.log_reader import TornTail
from rolloutlog.events.types import RunStarted
from rolloutlog.replay.source import LogFile, LogSource

# name in a value, name in a rate's label ("trained / h"), in words ("/ hour"), seconds
DURATION_UNITS: Final = (("h", "hour", 3600.0), ("min", "minute", 60.0), ("s", "second", 1.0))
Unit = tuple[str, str, float]


def duration_unit(seconds: float) -> Unit:
    """The largest unit that `seconds` fills at least once (seconds below a second)."""
    return next((u for u in DURATION_UNITS if abs(seconds) >= u[2]), DURATION_UNITS[-1])


def duration(seconds: float) -> str:
    """A duration for people, in the unit that fits it, to three figures (one decimal at
    least): `0.42 s`, `42.0 s`, `5.50 min`, `3.01 h`, `100.0 h`. Every command prints
    durations with it; `--json` keeps plain seconds."""
    unit = duration_unit(seconds)
    return f"{in_unit(seconds, unit)} {unit[0]}"


def in_unit(seconds: float, unit: Unit) -> str:
    """`seconds` in `unit`, to three figures (one decimal at least), without its name: a
    column of durations shows every row in the unit its header names."""
    value = seconds / unit[2]
    return f"{value:,.{2 if abs(value) < 10 else 1}f}"


def rate_unit(durations: Iterable[float | None]) -> Unit:
    """The time unit for a rate measured over runs of these lengths: the unit of the
    shortest, so that no run's figure extrapolates past its own length (a 10 s run's rate
    is per second, not an hour's worth of it). Hours when no length is known."""
    known = [seconds for seconds in durations if seconds is not None]
    return duration_unit(min(known)) if known else DURATION_UNITS[0]


def per_unit(per_hour: float, unit: Unit) -> str:
    """A rate given per hour (as `--json` keeps it), shown per `unit`, to three figures at
    least: `4,092`, `24.4`, `0.41`."""
    value = per_hour * unit[2] / 3600.0
    return f"{value:,.{0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2}f}"


def emit_json(data: Any) -> None:
    """One JSON object on stdout, indented for people and parseable for scripts."""
    click.echo(json.dumps(data, indent=2))


def say_next(*commands: str) -> None:
    """The commands a user would run next on what this one wrote, on stderr."""
    click.echo(f"rolloutlog: next: {'  |  '.join(commands)}", err=True)


def warn_torn_tail(tail: TornTail | None, log: Path) -> None:
    """Say on stderr that LOG's unfinished last batch was cut (the rest was read)."""
    if tail is not None:
        click.echo(f"rolloutlog: warning: {log}: {tail.describe()}", err=True)


def note_being_written(source: LogFile, log: Path) -> None:
    """Say on stderr that LOG is still being written, so the command reads what was
    committed when it opened it (`replay.source.LogFile`), not the run's end."""
    if source.writer is not None:
        click.echo(
            f"rolloutlog: note: {log}: {source.writer} is still writing it; reading the "
            f"{source.prefix_events} events it had committed",
            err=True,
        )


def warn_no_event(events: int, log: Path) -> None:
    """Say on stderr that LOG holds no event, so a clean verdict on it checked nothing (a
    writer opened and closed, or a run that died before it recorded run_started)."""
    if events == 0:
        click.echo(
            f"rolloutlog: warning: {log}: the log holds no event (not even run_started): "
            "nothing was checked",
            err=True,
        )


def warn_unstartable_config(source: LogSource, log: Path) -> None:
    """Say on stderr when LOG records a config that rolloutlog would not start a run with.

    Such a log (written by another orchestrator through the recording API) is folded as
    recorded; only `simulate` and `train` refuse the config. A log whose first event or
    config cannot be read at all is left to the fold, which names the seq.
    """
    try:
        first = next(iter(source.events()), None)
        if not isinstance(first, RunStarted):
            return
        config = RunConfig.from_mapping(first.config, "run_started.config", startable=False)
    except (ConfigError, EventError, LogError, TypeError):
        return
    for problem in config.startup_problems():
        click.echo(
            f"rolloutlog: warning: {log}: run_started.config: {problem} "
            "(rolloutlog would not start this run; folding what was recorded)",
            err=True,
        )


def key_values(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    """A two-column table, bold keys; values that are not strings are shown as JSON."""
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, value if isinstance(value, str) else json.dumps(value))
    return table
