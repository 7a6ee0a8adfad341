"""The shadow account's check of verl's sample budget (a mixin of `core.account.Account`).

Under `admission = "verl"` a train group opens only while the train groups counted in the
current sync window stay under `int(max(1, batch_size // G) × (1 + θ) × K)`, unless no
train group is open, no sync is owed (no K-th batch shipped whose version is unannounced)
and the queue holds less than a batch (the liveness exception, where the run keeps it).
The account keeps its own window count: one per train group opened, restarted at each
`version_pending` at the train groups it then holds open (opened, not yet scored) and
those with an episode in its own queue. It reads nothing of the dispatcher's ledger. Kept
with episode batches only (`core.account_properties.VERL_BUDGET`).
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
    budget_window: int
    version: int

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...

    def shipped(self) -> int: ...


class BudgetChecks:
    """`Account`'s own count of verl's sync window."""

    budget_window: int = 0  # train groups counted since the last version_pending

    def _budget_opened(self: _Books, seq: int) -> None:
        """A train group opened (already among the open groups): it must fit the window's
        budget unless it is the only one open, and it counts."""
        if VERL_BUDGET not in self.kept:
            return
        config = self.config
        groups_per_batch = max(1, (config.batch_size or 0) // config.group_size)
        budget = int(groups_per_batch * (1 + config.staleness_threshold) * config.updates_per_sync)
        others = sum(group.train for group in self.groups.values()) - 1
        shipped, k = self.shipped(), config.updates_per_sync
        owed = (shipped // k) * k > self.version  # a sync is coming
        full = len(self.queue) >= (config.batch_size or 0)  # a batch is coming
        waits = others or owed or full or not config.liveness
        if waits and self.budget_window >= budget:
            problem = f"{self.budget_window} groups counted this sync window, of {budget}"
            self._fail(seq, "group_opened", f"verl admission: {problem}")
        self.budget_window += 1

    def _budget_synced(self: _Books) -> None:
        """A weight sync: the count restarts at what is outstanding, open or queued."""
        if VERL_BUDGET in self.kept:
            open_train = sum(group.train for group in self.groups.values())
            queued = {episode_id.rpartition("/")[0] for episode_id in self.queue}
            self.budget_window = open_train + len(queued)
