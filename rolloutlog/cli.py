"""The `rolloutlog` command: one small function per subcommand, formatting in helpers.

Bad input (a missing or damaged log, an invalid JSONL line, an existing output) is reported
as one line on stderr with exit status 2, never as a traceback: the message already names
the file, the line or the seq range to look at.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from rolloutlog import __version__
from rolloutlog.commands.bad_input import reports_bad_input
from rolloutlog.commands.replay import diff_command, replay_command, show_command, verify_command
from rolloutlog.commands.simulate import simulate_command
from rolloutlog.commands.train import train_command
from rolloutlog.events.jsonl import read_jsonl, write_jsonl
from rolloutlog.events.log_reader import LogInfo, LogReader, TornTail
from rolloutlog.events.log_writer import write_log


def warn_torn_tail(tail: TornTail | None, log: Path) -> None:
    if tail is not None:
        click.echo(f"rolloutlog: warning: {log}: {tail.describe()}", err=True)


LOG_PATH = click.Path(dir_okay=False, path_type=Path)
STRICT = click.option(
    "--strict", is_flag=True, help="Fail on a torn tail instead of keeping the complete batches."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rolloutlog")
def main() -> None:
    """rolloutlog: the orchestrator of asynchronous RL as pure deciders over an event log.

    Simulate staleness policies, train for real, and replay, verify, show and diff the
    recorded logs.
    """


@main.command()
@click.argument("log", type=LOG_PATH)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@STRICT
@reports_bad_input
def info(log: Path, as_json: bool, strict: bool) -> None:
    """Summarize LOG: schema version, seq range, config and event counts by kind."""
    summary = LogReader(log, strict=strict, warn=False).info()
    warn_torn_tail(summary.torn_tail, log)
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))
    else:
        print_info(summary)


@main.command()
@click.argument("log", type=LOG_PATH)
@click.option("-o", "--output", type=LOG_PATH, help="Write to this file instead of stdout.")
@STRICT
@reports_bad_input
def export(log: Path, output: Path | None, strict: bool) -> None:
    """Write LOG as JSON Lines: one object per event, with kind, seq, t and its fields."""
    reader = LogReader(log, strict=strict, warn=False)
    if output is None:
        write_jsonl(reader.events(), sys.stdout)
    else:
        with output.open("w", encoding="utf-8") as out:
            count = write_jsonl(reader.events(), out)
        click.echo(f"exported {count} events to {output}", err=True)
    warn_torn_tail(reader.torn_tail, log)


@main.command("import")
@click.argument("jsonl", type=LOG_PATH)
@click.option("-o", "--output", type=LOG_PATH, required=True, help="The log to write.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@reports_bad_input
def import_command(jsonl: Path, output: Path, force: bool) -> None:
    """Check every line of JSONL and write it as the log OUTPUT; all or nothing."""
    with jsonl.open(encoding="utf-8") as lines:
        count = write_log(output, read_jsonl(lines), overwrite=force)
    click.echo(f"imported {count} events into {output}")


def print_info(summary: LogInfo) -> None:
    """The summary as rich tables: the log, then counts by kind, then the config."""
    console = Console()
    console.print(_key_values("log", _log_rows(summary)))
    console.print(_key_values("events by kind", list(summary.counts.items())))
    if summary.config is not None:
        console.print(_key_values("config (run_started)", list(summary.config.items())))


def _log_rows(summary: LogInfo) -> list[tuple[str, Any]]:
    seqs = "none" if summary.last_seq is None else f"{summary.first_seq}..{summary.last_seq}"
    tail = "none" if summary.torn_tail is None else summary.torn_tail.describe()
    return [
        ("path", summary.path),
        ("schema version", summary.schema_version),
        ("events", summary.events),
        ("seq range", seqs),
        ("record batches", summary.batches),
        ("closed", "yes" if summary.closed else "no (still being written, or its writer died)"),
        ("torn tail", tail),
    ]


def _key_values(title: str, rows: list[tuple[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, value if isinstance(value, str) else json.dumps(value))
    return table


main.add_command(replay_command)
main.add_command(verify_command)
main.add_command(show_command)
main.add_command(diff_command)
main.add_command(simulate_command)
main.add_command(train_command)
