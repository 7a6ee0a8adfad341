"""The shadow account's check of verl's sample budget (a mixin of `core.account.Account`).

Under `admission = "verl"` a train group opens only while the episodes counted in the
current sync window stay under `int(max(1, batch_size // G) × (1 + θ) × K) × G`, unless no
train group is open, no sync is owed (no K-th batch shipped whose version is unannounced)
and the queue holds less than a batch (the liveness exception, where the run keeps it).
The account keeps its own window count: the episodes in its own queue at each
`version_pending(v)` and in the batches it saw cut past `v`, those queued by train groups
scored since, and for each open train group the members it can still bring (not
cancelled, failed or dropped; at most `G`). It reads nothing of the dispatcher's ledger.
Kept with episode batches only (`core.account_properties.VERL_BUDGET`).
"""

from __future__ import annotations

from typing import Protocol

from rolloutlog.core.account_group import Group
from rolloutlog.core.account_properties import VERL_BUDGET
from rolloutlog.core.config import RunConfig


class _Books(Protocol):
    """What these checks read and keep of the account."""

    config: RunConfig
    kept: frozenset[str]
    groups: dict[str, Group]
    queue: dict[str, tuple[int, bool, int]]
    budget_queued: int
    unpublished: dict[int, set[str]]
    version: int

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...

    def shipped(self) -> int: ...

    def members(self, group: Group) -> int: ...

    def budget_counted(self) -> int: ...


class BudgetChecks:
    """`Account`'s own count of verl's sync window, in episodes."""

    budget_queued: int = 0  # queued at the last version_pending, and by train groups since

    def _budget_opened(self: _Books, seq: int) -> None:
        """A train group opened (already among the open groups): the window's count before
        it must leave room for it unless it is the only one open."""
        if VERL_BUDGET not in self.kept:
            return
        config, size = self.config, self.config.group_size
        groups_per_batch = max(1, (config.batch_size or 0) // size)
        budget = size * int(
            groups_per_batch * (1 + config.staleness_threshold) * config.updates_per_sync
        )
        counted = self.budget_counted() - size  # the new group's G, not lost
        shipped, k = self.shipped(), config.updates_per_sync
        owed = (shipped // k) * k > self.version  # a sync is coming
        full = len(self.queue) >= (config.batch_size or 0)  # a batch is coming
        others = sum(group.train for group in self.groups.values()) - 1
        waits = others or owed or full or not config.liveness
        if waits and counted >= budget:
            problem = f"{counted} episodes counted this sync window, of {budget}"
            self._fail(seq, "group_opened", f"verl admission: {problem}")

    def budget_counted(self: _Books) -> int:
        """The episodes the sync window counts now: queued at its start and by the train
        groups scored since, and what each open train group can still bring."""
        train = (group for group in self.groups.values() if group.train)
        return self.budget_queued + sum(_can_bring(self, group) for group in train)

    def _budget_synced(self: _Books) -> None:
        """A weight sync to `v`: the count restarts at the episodes verl's MessageQueue
        would hold, queued or in batches cut past `v` (the open groups are counted as they
        stand)."""
        if VERL_BUDGET in self.kept:
            cut = (len(ids) for step, ids in self.unpublished.items() if step > self.version)
            self.budget_queued = len(self.queue) + sum(cut)


def _can_bring(books: _Books, group: Group) -> int:
    """The episodes an open train group can still bring to the queue, at most `G`: its
    members less those cancelled, failed or dropped on arrival."""
    lost = sum(
        reward is None or episode_id in group.dropped
        for episode_id, (_, _, reward, _) in group.arrived.items()
    )
    left = books.members(group) - group.cancelled - lost
    return min(books.config.group_size, max(0, left))
