"""`rolloutlog info`, `export` and `import`: the log file itself, not what happened in it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import click
from rich.console import Console

from rolloutlog.cli.bad_input import command, fail, reports_bad_input
from rolloutlog.cli.foreign import import_foreign
from rolloutlog.cli.options import (
    FILE,
    NEW_LOG,
    OUTPUT,
    NamedPath,
    holds_arrow_log,
    json_option,
    output_format,
)
from rolloutlog.cli.output import emit_json, key_values, say_next, warn_torn_tail
from rolloutlog.cli.progress import phase
from rolloutlog.events.errors import JsonlError
from rolloutlog.events.jsonl import import_lines, write_jsonl
from rolloutlog.events.log_reader import LogInfo, LogReader
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.whole_file import written_whole
from rolloutlog.replay.chrome_trace import write_chrome_trace
from rolloutlog.replay.spans import read_spans

EXPORT_FORMATS = {".jsonl": "jsonl", ".json": "chrome-trace"}  # by the suffix of -o
STRICT = click.option(
    "--strict", is_flag=True, help="Fail on a torn tail instead of keeping the complete batches."
)


@command("info")
@click.argument("log", type=FILE)
@json_option("Print one JSON object instead of tables.")
@STRICT
@reports_bad_input
def info_command(log: Path, as_json: bool, strict: bool) -> None:
    """Summarize LOG: schema version, seq range, config and event counts by kind."""
    with phase(f"reading {log}"):
        info = LogReader(log, strict=strict, warn=False).info()
    warn_torn_tail(info.torn_tail, log)
    if as_json:
        emit_json(info.to_json())
    else:
        _print_info(info)


@command("export")
@click.argument("log", type=FILE)
@click.option(
    "-o", "--output", type=OUTPUT, help="Write to this file (.jsonl, or .json for chrome-trace)."
)
@click.option(
    "--format",
    "form",
    type=click.Choice(list(EXPORT_FORMATS.values())),
    help="jsonl (stdout's default): one object per event. chrome-trace: Trace Event Format "
    "for Perfetto. With -o, the file's suffix names the format.",
)
@STRICT
@reports_bad_input
def export_command(log: Path, output: Path | None, form: str | None, strict: bool) -> None:
    """Write LOG as JSON Lines (one object per event, with kind, seq, t and its fields), or as
    a Trace Event Format JSON that Perfetto and chrome://tracing open (--format chrome-trace:
    a track per inference slot, one for the trainer, instants for versions and ships).
    """
    form = output_format(form, output, EXPORT_FORMATS, "jsonl")
    reader = LogReader(log, strict=strict, warn=False)
    write: Callable[[TextIO], int]
    if form == "jsonl":
        write, what = (lambda out: write_jsonl(reader.events(), out)), "events"
    else:
        write, what = (lambda out: write_chrome_trace(read_spans(reader), out)), "trace events"
    if output is None:
        with phase(f"exporting {log}"):
            write(sys.stdout)
    else:
        with (
            phase(f"exporting {log}"),
            written_whole(output) as temporary,
            temporary.open("w", encoding="utf-8") as out,
        ):
            count = write(out)
        click.echo(f"exported {count} {what} to {output}", err=True)
    warn_torn_tail(reader.torn_tail, log)


@command("import")
@click.argument("jsonl", type=NamedPath(path_type=Path))  # a file, or with --from a folder
@click.option("-o", "--output", type=NEW_LOG, required=True, help="The log to write.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option(
    "--from",
    "source",
    type=click.Choice(["jsonl", "prime-rl", "areal"]),
    default="jsonl",
    show_default=True,
    help="What JSONL is: a rolloutlog export, a prime-rl output folder or an AReaL run folder.",
)
@reports_bad_input
def import_command(jsonl: Path, output: Path, force: bool, source: str) -> None:
    """Check every line of JSONL and write it as the log OUTPUT; all or nothing.

    With --from prime-rl or areal, JSONL is that stack's run folder: its world facts are
    imported, and what was reconstructed and what assumed is said on stderr
    (docs/foreign-runs.md)."""
    if output.exists() and not force:
        fail(f"{output}: already exists (pass --force to replace it)")
    if source != "jsonl":
        count = import_foreign(jsonl, output, source)
        click.echo(f"imported {count} events into {output}")
        say_next(f"rolloutlog replay {output}", f"rolloutlog whatif {output}")
        return
    if jsonl.is_dir():
        fail(f"{jsonl}: a folder, not JSON Lines (--from prime-rl or areal reads a run's folder)")
    if holds_arrow_log(jsonl):
        fail(f"{jsonl}: a rolloutlog log, not JSON Lines (rolloutlog export writes its JSON Lines)")
    with jsonl.open("rb") as lines, phase(f"importing {jsonl}"):
        try:
            count = write_log(output, import_lines(lines), overwrite=True)
        except JsonlError as error:
            fail(f"{jsonl}: {error}")
    click.echo(f"imported {count} events into {output}")
    say_next(f"rolloutlog replay {output}", f"rolloutlog verify {output}")


def _print_info(info: LogInfo) -> None:
    """The log info as rich tables: the log, then counts by kind, then the config."""
    console = Console()
    console.print(key_values("log", _log_rows(info)))
    console.print(key_values("events by kind", info.counts.items()))
    if info.config is not None:
        console.print(key_values("config (run_started)", info.config.items()))


def _log_rows(info: LogInfo) -> list[tuple[str, Any]]:
    seqs = "none" if info.last_seq is None else f"{info.first_seq}..{info.last_seq}"
    tail = "none" if info.torn_tail is None else info.torn_tail.describe()
    return [
        ("path", info.path),
        ("schema version", info.schema_version),
        ("events", info.events),
        ("seq range", seqs),
        ("record batches", info.batches),
        ("closed", "yes" if info.closed else "no (still being written, or its writer died)"),
        ("torn tail", tail),
    ]
