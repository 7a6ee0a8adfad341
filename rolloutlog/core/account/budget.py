"""The account's check of verl's sample budget (`admission = "verl"`).

A train group opens only while the episodes counted in the current sync window stay under
`int(max(1, batch_size // G) × (1 + θ) × K) × G`, unless no train group is open, no sync is
owed (no K-th batch shipped whose version is unannounced) and the queue holds less than a
batch (the liveness exception, where the run keeps it). The check keeps its own window
count: the episodes in the queue at each `version_pending(v)` and in the batches it saw cut
past `v`, those queued by train groups scored since, and for each open train group the
members it can still bring (not cancelled, failed or dropped; at most `G`). It reads
nothing of the dispatcher's ledger. Kept with episode batches only
(`core.account.properties.VERL_BUDGET`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rolloutlog.core.account.admission import cut_past, untrained
from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Group
from rolloutlog.core.account.properties import VERL_BUDGET, kept_properties
from rolloutlog.core.config import RunConfig


class VerlBudget:
    """The account's own count of verl's sync window, in episodes."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        size = config.group_size
        groups_per_batch = max(1, (config.batch_size or 0) // size)
        ratio = 1 + config.staleness_threshold
        self.budget = size * int(groups_per_batch * ratio * config.updates_per_sync)
        self.queued = 0  # queued at the last version_pending, and by train groups since
        self.unpublished: dict[int, int] = {}  # step -> the episodes its batch took

    @staticmethod
    def used(config: RunConfig) -> bool:
        return VERL_BUDGET in kept_properties(config)

    def opened(self, seq: int, group_id: str, group: Group, task: tuple[str, str]) -> None:
        """A train group opened (already among the open groups): the window's count before
        it must leave room for it unless it is the only one open."""
        books, config = self.books, self.books.config
        counted = self.counted() - config.group_size  # the new group's G, not lost
        k = config.updates_per_sync
        owed = (books.shipped() // k) * k > books.version  # a sync is coming
        full = len(books.queue) >= (config.batch_size or 0)  # a batch is coming
        others = sum(group.train for group in books.groups.values()) - 1
        waits = others or owed or full or not config.liveness
        if waits and counted >= self.budget:
            problem = f"{counted} episodes counted this sync window, of {self.budget}"
            books.fail(seq, "group_opened", f"verl admission: {problem}")

    def counted(self) -> int:
        """The episodes the sync window counts now: queued at its start and by the train
        groups scored since, and what each open train group can still bring."""
        train = (group for group in self.books.groups.values() if group.train)
        return self.queued + sum(self._can_bring(group) for group in train)

    def _can_bring(self, group: Group) -> int:
        """The episodes an open train group can still bring to the queue, at most `G`: its
        members less those cancelled, failed or dropped on arrival."""
        lost = sum(
            reward is None or episode_id in group.dropped
            for episode_id, (_, _, reward, _) in group.arrived.items()
        )
        left = self.books.members(group) - group.cancelled - lost
        return min(self.books.group_size, max(0, left))

    def finalized(
        self, seq: int, group_id: str, group: Group, scored: Sequence[str], admitted: bool
    ) -> None:
        """A train group scored: what it admits is queued, and counts in the window."""
        if group.train and admitted:
            self.queued += len(scored)

    def ships(self, seq: int, step: int, episode_ids: Sequence[str]) -> None:
        self.unpublished = cut_past(self.unpublished, self.books.version, step, episode_ids)

    def announced(self) -> None:
        """A weight sync to `v`: the count restarts at the episodes verl's MessageQueue
        would hold, queued or in batches cut past `v` (the open groups are counted as they
        stand)."""
        books = self.books
        self.queued = len(books.queue) + untrained(self.unpublished, books.version)
