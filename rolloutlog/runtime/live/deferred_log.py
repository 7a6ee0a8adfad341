"""A run's log, opened for writing only when the run records its first event.

Opening a log writes to it: a new log's header, or, when continuing a crashed run's log,
the cut of its torn tail. A start or a resume that fails before its first event (a server
that cannot be reached, a port that will not bind) must leave nothing behind and nothing
changed, so the writer is opened by the first `append`, not before the run starts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rolloutlog.events.log_writer import LogWriter
from rolloutlog.events.types import Event


class DeferredLog:
    """A `LogAppender` whose `LogWriter` is made (by `open_writer`) at the first append."""

    def __init__(self, path: Path, open_writer: Callable[[], LogWriter]) -> None:
        self.path = path  # what a torn commit (crash_points) cuts
        self._open_writer = open_writer
        self._writer: LogWriter | None = None

    @property
    def opened(self) -> bool:
        """Whether anything was recorded (so the file was opened for writing)."""
        return self._writer is not None

    def append(self, event: Event) -> Event:
        if self._writer is None:
            self._writer = self._open_writer()
        return self._writer.append(event)

    def commit(self) -> None:
        if self._writer is not None:
            self._writer.commit()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
