"""The account's check of verl's sample budget (`admission = "verl"`).

A train group opens only while the train groups counted in the current sync window stay
under `int(max(1, batch_size // G) × (1 + θ) × K)`, unless no train group is open, no sync
is owed (no K-th batch shipped whose version is unannounced) and the queue holds less than a
batch (the liveness exception, where the run keeps it). The check keeps its own window
count: one per train group opened, restarted at each `version_pending` at the train groups
then open (opened, not yet scored) and those with an episode in the queue. It reads nothing
of the dispatcher's ledger. Kept with episode batches only
(`core.account.properties.VERL_BUDGET`).
"""

from __future__ import annotations

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Group
from rolloutlog.core.account.properties import VERL_BUDGET, kept_properties
from rolloutlog.core.config import RunConfig


class VerlBudget:
    """The account's own count of verl's sync window."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        groups_per_batch = max(1, (config.batch_size or 0) // config.group_size)
        ratio = 1 + config.staleness_threshold
        self.budget = int(groups_per_batch * ratio * config.updates_per_sync)
        self.window = 0  # train groups counted since the last version_pending

    @staticmethod
    def used(config: RunConfig) -> bool:
        return VERL_BUDGET in kept_properties(config)

    def opened(self, seq: int, group_id: str, group: Group, task: tuple[str, str]) -> None:
        """A train group opened (already among the open groups): it must fit the window's
        budget unless it is the only one open, and it counts."""
        books, config = self.books, self.books.config
        others = sum(group.train for group in books.groups.values()) - 1
        k = config.updates_per_sync
        owed = (books.shipped() // k) * k > books.version  # a sync is coming
        full = len(books.queue) >= (config.batch_size or 0)  # a batch is coming
        waits = others or owed or full or not config.liveness
        if waits and self.window >= self.budget:
            problem = f"{self.window} groups counted this sync window, of {self.budget}"
            books.fail(seq, "group_opened", f"verl admission: {problem}")
        self.window += 1

    def announced(self) -> None:
        """A weight sync: the count restarts at what is outstanding, open or queued."""
        open_train = sum(group.train for group in self.books.groups.values())
        queued = {episode_id.rpartition("/")[0] for episode_id in self.books.queue}
        self.window = open_train + len(queued)
