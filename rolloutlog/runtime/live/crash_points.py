"""Deterministic crash points, for the crash-resume tests and benchmark.

`ROLLOUTLOG_CRASH_AT=name:N` makes a `rolloutlog train` process SIGKILL itself the Nth time
it passes the named point: the same place every time, with no sleeps and no races. Unset
(every real run), a point costs one dictionary lookup. The points:

- `dispatch`: a dispatched episode, before its request is sent;
- `pending`: a new version is announced (`version_pending`, committed) but not yet live;
- `shipped`: the commit that made a `batch_shipped` durable has just returned;
- `commit`: a log commit is torn: the batch is written, then the file is cut inside it
  (what a crash in the middle of the write leaves), then the process dies.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Final, Protocol

ENVIRONMENT_VARIABLE: Final = "ROLLOUTLOG_CRASH_AT"
POINTS: Final = ("dispatch", "pending", "shipped", "commit")


class CrashPoints:
    """Counts passes of each named point; `reached` is true exactly at the chosen pass."""

    def __init__(self, spec: str = "") -> None:
        self._at: dict[str, int] = {}
        self._passes: dict[str, int] = {}
        for item in filter(None, (part.strip() for part in spec.split(","))):
            name, _, count = item.partition(":")
            if name not in POINTS or not count.isdigit() or int(count) < 1:
                raise ValueError(
                    f"{ENVIRONMENT_VARIABLE}: {item!r} is not NAME:N with NAME one of "
                    f"{', '.join(POINTS)} and N >= 1"
                )
            self._at[name] = int(count)

    @classmethod
    def from_environment(cls) -> CrashPoints:
        return cls(os.environ.get(ENVIRONMENT_VARIABLE, ""))

    def reached(self, name: str) -> bool:
        """Count one pass of `name`; true at the chosen one."""
        if name not in self._at:
            return False
        self._passes[name] = self._passes.get(name, 0) + 1
        return self._passes[name] == self._at[name]

    def crash_at(self, name: str) -> None:
        """SIGKILL this process at the chosen pass of `name`."""
        if self.reached(name):
            die()


def die() -> None:
    """What an out-of-memory kill or a lost machine does: no cleanup, no flush."""
    os.kill(os.getpid(), signal.SIGKILL)


def tear_last_write(path: Path, size_before: int) -> None:
    """Cut `path` inside what was written after `size_before`: a torn commit."""
    size = path.stat().st_size
    if size > size_before:
        os.truncate(path, size_before + (size - size_before) // 2)


class Committable(Protocol):
    def commit(self) -> None: ...


def tear_commit(log: Committable) -> None:
    """Commit `log` (a `LogWriter`), cut its file inside the batch just written, and die."""
    path = getattr(log, "path", None)
    if not isinstance(path, Path):  # no file to tear: die before the commit instead
        die()
        return
    size_before = path.stat().st_size
    log.commit()
    tear_last_write(path, size_before)
    die()
