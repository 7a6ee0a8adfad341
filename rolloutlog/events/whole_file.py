"""Files that appear whole or not at all: written under a temporary name, renamed into place.

A reader never sees half a file, and a write that fails leaves whatever was at the path
before (a recorded log, last run's results) as it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def written_whole(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` to write; renamed onto `path` when the block ends
    without an error, removed otherwise."""
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path}: the folder {path.parent} does not exist")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
