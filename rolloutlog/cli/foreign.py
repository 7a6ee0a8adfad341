"""Importing another stack's run folder for `import --from` and `whatif FOLDER`."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from rolloutlog.cli.bad_input import BadInput
from rolloutlog.cli.progress import phase
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.whole_file import written_whole
from rolloutlog.importers import IMPORTERS, ForeignRunError, detect


def import_foreign(folder: Path, output: Path, source: str = "prime-rl") -> int:
    """Import the `source` run in `folder` as the log `output` (all or nothing); says on
    stderr what was reconstructed and what assumed. Returns the number of events."""
    try:
        with written_whole(output) as temporary, phase(f"importing the {source} run {folder}"):
            note = IMPORTERS[source](folder, temporary)
    except ForeignRunError as error:
        raise BadInput(str(error)) from error
    for fact in note["reconstructed"]:
        click.echo(f"rolloutlog: reconstructed: {fact}", err=True)
    for fact in note["assumed"]:
        click.echo(f"rolloutlog: assumed: {fact}", err=True)
    for fact in note.get("absent", ()):
        click.echo(f"rolloutlog: absent: {fact}", err=True)
    for what, counts in note.get("reconciled", {}).items():
        click.echo(f"rolloutlog: reconciled: {what}: {counts}", err=True)
    return LogReader(output).info().events


def log_of(path: Path) -> Path:
    """`path` itself when it is a log; for a prime-rl or AReaL run folder, its import,
    written to a temporary folder that lives as long as the command."""
    if not path.is_dir():
        return path
    try:
        source = detect(path)
    except ForeignRunError as error:
        raise BadInput(str(error)) from error
    folder = click.get_current_context().with_resource(tempfile.TemporaryDirectory())
    log = Path(folder) / f"{path.name}.arrow"
    import_foreign(path, log, source)
    return log
