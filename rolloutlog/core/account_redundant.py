"""The shadow account's redundant-member checks (a mixin of `core.account.Account`).

Under `group_redundancy` r a group of G dispatches G + r members and is finalized at its
first G arrivals (completed or failed): the dispatcher cancels every member the group
still owes at that arrival, with reason `redundant`. So a group accounts for G + r
members, not G, and at most G of them arrive. The account counts on its own: a group whose
G-th arrival leaves members owed is due a redundant cancellation before its world event
settles, and that cancellation takes everything owed; a redundant cancellation of a group
not due one is refused. With r = 0 no group is ever due one, and `redundant` is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rolloutlog.core.account_group import Group


class _Books(Protocol):
    """What these checks read and keep of the account."""

    redundancy: int
    redundant_due: set[str]

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...


class RedundancyChecks:
    """`Account`'s count of each group's members past G."""

    redundancy: int  # the run's `group_redundancy` (`Account.__init__` sets both)
    redundant_due: set[str]  # groups whose G-th arrival came while they still owed members

    def members(self: _Books, group: Group) -> int:
        """What a group accounts for: G + r members."""
        return group.size + self.redundancy

    def _redundant_arrived(self: _Books, seq: int, kind: str, group_id: str, group: Group) -> None:
        """After an arrival: at the G-th, what the group still owes is due for cancellation."""
        arrived = len(group.arrived)
        if arrived > group.size:
            self._fail(seq, kind, f"{group_id}: {arrived} arrived, more than G={group.size}")
        elif self.redundancy and arrived == group.size and group.owes:
            self.redundant_due.add(group_id)

    def _redundant_cancel(
        self: _Books, seq: int, group_id: str, group: Group, ids: Sequence[str], unscheduled: int
    ) -> None:
        """A `redundant` cancellation: of a group due one, and of all it owes."""
        kind = "episodes_cancelled"
        if group_id not in self.redundant_due:
            arrived = len(group.arrived)
            self._fail(seq, kind, f"redundant cancel of {group_id} at {arrived} of G arrived")
            return
        self.redundant_due.discard(group_id)
        if not (set(group.inflight) <= set(ids) and unscheduled == group.unscheduled):
            self._fail(seq, kind, f"redundant cancel of {group_id} leaves members owed")

    def _redundant_settled(self: _Books, seq: int, world_kind: str) -> None:
        """Once a world event settled, no group that reached G still owes members."""
        if self.redundant_due:
            due = sorted(self.redundant_due)[:3]
            self._fail(seq, world_kind, f"G arrived but members still owed, not cancelled: {due}")
            self.redundant_due.clear()
