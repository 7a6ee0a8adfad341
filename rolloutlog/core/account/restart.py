"""The account's check of restarts (`run_resumed`, `train --resume`).

A restart names exactly what was in flight, resumes from a checkpoint between the last
announced version and the batches shipped, and cancels only what was outstanding (reason
`restart`); no version announced after it is inside that checkpoint, so no batch trains
twice. Fed only `run_resumed`, the `restart` cancellations and the versions announced.
"""

from __future__ import annotations

from collections.abc import Sequence

from rolloutlog.core.account.books import Books


class Restarts:
    """What the latest restart left to check."""

    def __init__(self, books: Books) -> None:
        self.books = books
        self.outstanding: frozenset[str] = frozenset()  # in flight at the latest restart
        self.resumed_from: int | None = None  # the checkpoint of the latest restart

    def announced(self, seq: int, version: int) -> None:
        """No version inside the checkpoint resumed from (its batch would train twice)."""
        if self.resumed_from is not None and version < self.resumed_from:
            problem = f"v{version} is inside checkpoint v{self.resumed_from} resumed from"
            self.books.fail(seq, "version_pending", f"{problem}: its batch would train twice")

    def resumed(self, seq: int, episode_ids: Sequence[str], version: int) -> None:
        """A restart names exactly what was outstanding, after the last announced version
        and no further than the batches shipped (nothing trained twice, nothing lost)."""
        kind, books = "run_resumed", self.books
        if books.finished:
            books.fail(seq, kind, "a restart after run_finished")
        named = set(episode_ids)
        if named != books.inflight.keys():
            different = sorted(named ^ books.inflight.keys())[:3]
            problem = f"names {len(named)} outstanding episodes, {len(books.inflight)} in flight"
            books.fail(seq, kind, f"{problem}: {different}")
        shipped = books.shipped()
        if not books.version <= version <= shipped:
            problem = f"resumes from v{version}, but v{books.version} was announced"
            books.fail(seq, kind, f"{problem} and {shipped} batches shipped")
        self.outstanding = frozenset(named)
        self.resumed_from = version

    def cancelled(self, seq: int, episode_ids: Sequence[str], unscheduled: int) -> None:
        """A restart cancels only what was outstanding at it, and nothing unscheduled."""
        strays = [e for e in episode_ids if e not in self.outstanding]
        if strays or unscheduled:
            problem = f"a restart cancels only what was outstanding: {strays[:3]}"
            self.books.fail(seq, "episodes_cancelled", f"{problem}, {unscheduled} unscheduled")

    def settled(self, seq: int) -> None:
        """After the `run_resumed` settled: nothing outstanding at the restart is in flight."""
        left = [e for e in sorted(self.outstanding) if e in self.books.inflight]
        if left:
            problem = f"outstanding at the restart, in flight: {left[:3]}"
            self.books.fail(seq, "run_resumed", problem)
        self.outstanding = frozenset()
