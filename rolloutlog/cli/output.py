"""What every command prints the same way: JSON, key/value tables, warnings on stderr."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.events.errors import EventError, LogError
from rolloutlog.events.log_reader import TornTail
from rolloutlog.events.types import RunStarted
from rolloutlog.replay.source import LogSource


def emit_json(data: Any) -> None:
    """One JSON object on stdout, indented for people and parseable for scripts."""
    click.echo(json.dumps(data, indent=2))


def warn_torn_tail(tail: TornTail | None, log: Path) -> None:
    """Say on stderr that LOG's unfinished last batch was cut (the rest was read)."""
    if tail is not None:
        click.echo(f"rolloutlog: warning: {log}: {tail.describe()}", err=True)


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
