"""Files that appear whole or not at all: written under a temporary name, renamed into place.

A reader never sees half a file, and a write that fails leaves whatever was at the path
before (a recorded log, last run's results) as it was. The writer holds the output's lock
(`events.output_lock`) from before the temporary is made until it is renamed or removed,
so two writers of one output never both think they wrote it; a temporary left by a
writer that was killed outright is removed by the next one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rolloutlog.events.output_lock import holding


def temporary_of(path: Path) -> Path:
    """The temporary that this process writes for `path`: `.NAME.PID.tmp` beside it."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextmanager
def written_whole(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` to write; renamed onto `path` when the block ends
    without an error, removed otherwise."""
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path}: the folder {path.parent} does not exist")
    with holding(path):
        _remove_leftovers(path)
        temporary = temporary_of(path)
        try:
            with naming(temporary):
                yield temporary
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)


@contextmanager
def naming(path: str | os.PathLike[str]) -> Iterator[None]:
    """An `OSError` of the block that names no file (`os.write` and a file object's
    `write` name none) raised again naming `path`: a full disk then reads `no space left
    on device writing PATH`, not a bare errno."""
    try:
        yield
    except OSError as error:
        if error.filename is not None or error.errno is None:
            raise
        raise type(error)(error.errno, error.strerror, os.fspath(path)) from error


def _remove_leftovers(path: Path) -> None:
    """Remove the temporaries of `path` that killed writers left (we hold its lock: no
    other writer of it is alive)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.\d+\.tmp")
    for leftover in path.parent.iterdir():
        if pattern.fullmatch(leftover.name):
            leftover.unlink(missing_ok=True)
