"""The shadow account's checks of versions and restarts (a mixin of `core.account.Account`).

A version is announced once, after its batch has shipped; a restart names exactly what was
in flight, resumes from a checkpoint between the last announced version and the batches
shipped, and cancels only what was outstanding (reason `restart`); no version announced
after it is inside that checkpoint, so no batch trains twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rolloutlog.core.account_group import Group


class _Books(Protocol):
    """What these checks read and keep of the account."""

    version: int
    updates: int
    step: int
    publish_step: int
    finished: bool
    inflight: dict[str, Group]
    restart_ids: frozenset[str]
    resumed_from: int | None

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...

    def shipped(self) -> int: ...

    def _moved(self) -> None: ...

    def _budget_synced(self) -> None: ...


class RestartChecks:
    """`Account`'s `on_version_pending` and `on_resumed`, and the restart's own checks of
    the cancellation and the settling that follow a `run_resumed`."""

    # What the latest restart left to check (`Account.__init__` sets both).
    restart_ids: frozenset[str]  # outstanding at the latest restart
    resumed_from: int | None  # the checkpoint of the latest restart

    def on_version_pending(self: _Books, seq: int, version: int) -> None:
        """Each version is announced once, after its batch: `version < v ≤ shipped`; across
        a restart, no version inside the checkpoint resumed from (each batch trains once)."""
        kind, shipped = "version_pending", self.shipped()
        if not self.version < version <= shipped:
            problem = f"v{version} after v{self.version} with {shipped} batches shipped"
            self._fail(seq, kind, f"{problem}: a version is announced once, after its batch")
        if self.resumed_from is not None and version < self.resumed_from:
            problem = f"v{version} is inside checkpoint v{self.resumed_from} resumed from"
            self._fail(seq, kind, f"{problem}: its batch would train twice")
        self.version = version
        self.updates += 1  # versions announced (max-lag admission counts them)
        self.publish_step = self.step
        self._moved()
        self._budget_synced()

    def on_resumed(self: _Books, seq: int, episode_ids: Sequence[str], version: int) -> None:
        """A restart names exactly what was outstanding, after the last announced version
        and no further than the batches shipped (nothing trained twice, nothing lost)."""
        kind = "run_resumed"
        if self.finished:
            self._fail(seq, kind, "a restart after run_finished")
        named = set(episode_ids)
        if named != self.inflight.keys():
            different = sorted(named ^ self.inflight.keys())[:3]
            problem = f"names {len(named)} outstanding episodes, {len(self.inflight)} in flight"
            self._fail(seq, kind, f"{problem}: {different}")
        shipped = self.shipped()
        if not self.version <= version <= shipped:
            problem = f"resumes from v{version}, but v{self.version} was announced"
            self._fail(seq, kind, f"{problem} and {shipped} batches shipped")
        self.restart_ids = frozenset(named)
        self.resumed_from = version

    def _check_restart_cancel(
        self: _Books, seq: int, episode_ids: Sequence[str], unscheduled: int
    ) -> None:
        """A restart cancels only what was outstanding at it, and nothing unscheduled."""
        strays = [e for e in episode_ids if e not in self.restart_ids]
        if strays or unscheduled:
            problem = f"a restart cancels only what was outstanding: {strays[:3]}"
            self._fail(seq, "episodes_cancelled", f"{problem}, {unscheduled} unscheduled")

    def _restart_settled(self: _Books, seq: int) -> None:
        """After the `run_resumed` settled: nothing outstanding at the restart is in flight."""
        left = [e for e in sorted(self.restart_ids) if e in self.inflight]
        if left:
            self._fail(seq, "run_resumed", f"outstanding at the restart, in flight: {left[:3]}")
        self.restart_ids = frozenset()
