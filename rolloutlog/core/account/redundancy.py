"""The account's check of redundant members (`group_redundancy`).

Under `group_redundancy` r a group of G dispatches G + r members and is finalized at its
first G arrivals (completed or failed): the dispatcher cancels every member the group still
owes at that arrival, with reason `redundant`. So a group accounts for G + r members
(`Books.members`), not G, and at most G of them arrive. The check counts on its own: a group
whose G-th arrival leaves members owed is due a redundant cancellation before its world
event settles, and that cancellation takes everything owed; a redundant cancellation of a
group not due one is refused. A run with r = 0 feeds it nothing, and `redundant` is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Group
from rolloutlog.core.config import RunConfig


class Redundancy:
    """The account's count of each group's members past G."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.due: set[str] = set()  # groups whose G-th arrival came while they still owed

    @staticmethod
    def used(config: RunConfig) -> bool:
        return config.group_redundancy > 0

    def arrived(self, seq: int, kind: str, episode_id: str, group: Group) -> None:
        """After an arrival: at the G-th, what the group still owes is due for cancellation."""
        if len(group.arrived) == group.size and group.owes:
            self.due.add(episode_id.rpartition("/")[0])

    def cancelled_redundant(
        self, seq: int, group_id: str, group: Group, ids: Sequence[str], unscheduled: int
    ) -> None:
        """A `redundant` cancellation: of a group due one, and of all it owes."""
        kind = "episodes_cancelled"
        if group_id not in self.due:
            arrived = len(group.arrived)
            self.books.fail(seq, kind, f"redundant cancel of {group_id} at {arrived} of G arrived")
            return
        self.due.discard(group_id)
        if not (set(group.inflight) <= set(ids) and unscheduled == group.unscheduled):
            self.books.fail(seq, kind, f"redundant cancel of {group_id} leaves members owed")

    def settled(self, seq: int, world_kind: str) -> None:
        """Once a world event settled, no group that reached G still owes members."""
        if self.due:
            due = sorted(self.due)[:3]
            problem = f"G arrived but members still owed, not cancelled: {due}"
            self.books.fail(seq, world_kind, problem)
            self.due.clear()
