"""What every command prints the same way: JSON, key/value tables, the torn-tail warning."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from rolloutlog.events.log_reader import TornTail


def emit_json(data: Any) -> None:
    """One JSON object on stdout, indented for people and parseable for scripts."""
    click.echo(json.dumps(data, indent=2))


def warn_torn_tail(tail: TornTail | None, log: Path) -> None:
    """Say on stderr that LOG's unfinished last batch was cut (the rest was read)."""
    if tail is not None:
        click.echo(f"rolloutlog: warning: {log}: {tail.describe()}", err=True)


def key_values(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    """A two-column table, bold keys; values that are not strings are shown as JSON."""
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, value if isinstance(value, str) else json.dumps(value))
    return table
