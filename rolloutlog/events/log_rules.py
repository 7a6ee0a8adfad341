"""Rules between the events of one log that no single event shows (docs/contract.md):
a run finishes once, and a version goes live only after `version_pending` announced it.

`LogReader` checks every batch it reads with one `LogRules` (so `replay`, `verify`, `show`
and every other reader refuse such a log at the seq that breaks a rule), and `LogWriter`
every event it is asked to append with checks on (`Recorder`, `import`). The deciders are
not asked: a recorded log is judged as written, before any fold.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa

from rolloutlog.events.errors import EventError
from rolloutlog.events.schema import KIND_NAMES

_RULED: Final = ("run_finished", "version_pending", "version_live")
_CODES: Final = np.array([KIND_NAMES.index(kind) for kind in _RULED], dtype=np.int8)


class LogRules:
    """The rules' state after the events checked so far."""

    __slots__ = ("announced", "finished_at")

    def __init__(self) -> None:
        self.finished_at: int | None = None  # the seq of run_finished
        self.announced: set[int] = {0}  # the initial weights serve from the start

    def event(self, seq: int, kind: str, version: int | None) -> None:
        """Check one event (its kind, and its `version` where it has one); `EventError`
        naming its seq if it breaks a rule, and then the state is as before it."""
        if kind == "run_finished":
            if self.finished_at is not None:
                raise EventError(
                    kind,
                    seq,
                    "kind",
                    f"a second run_finished (the run finished at seq "
                    f"{self.finished_at}); a run finishes once",
                )
            self.finished_at = seq
        elif kind == "version_pending" and version is not None:
            self.announced.add(version)
        elif kind == "version_live" and version not in self.announced:
            raise EventError(
                kind, seq, "version", f"version {version} was never announced (version_pending)"
            )

    def batch(self, first_seq: int, batch: pa.RecordBatch) -> None:
        """Check a record batch of `events.schema.LOG_SCHEMA` whose first seq is `first_seq`."""
        codes = batch.column("kind").indices.to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(np.isin(codes, _CODES))
        if not len(rows):
            return
        versions = batch.column("version").take(pa.array(rows)).to_pylist()
        for row, version in zip(rows.tolist(), versions, strict=True):
            self.event(first_seq + row, KIND_NAMES[codes[row]], version)
