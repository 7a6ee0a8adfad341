"""The account's check of slime's abort of the leftovers (`leftovers = "abort"`).

A shipped batch aborts every train group of an earlier step still owed: each is cancelled
whole (reason `leftover`); the queued episodes the batch did not take, and every arrival of
a train group opened for a batch that has shipped, are dropped (reason `leftover`). The
check keeps the step each open train group (and queued episode) opened at, and checks:
whenever a world event's reactions settle, nothing of an earlier step is owed or queued (a
decider that skips an abort is caught there); a `leftover` cancellation is whole and of an
earlier step's group; a `leftover` drop is of a queued episode or an earlier step's arrival,
under the abort rule only; and such a group scores nothing. It counts
`episodes_dropped_leftover`: the finished rollouts the abort wasted. A run that never aborts
feeds it nothing but the `leftover` cancellations and drops it refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Group
from rolloutlog.core.config import RunConfig


class Leftovers:
    """The account's books of the leftovers aborted once a batch is full."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.aborts = config.leftovers == "abort"
        self.opened_at: dict[str, int] = {}  # open train group -> the step it opened at
        self.queued_at: dict[str, int] = {}  # queued episode -> its group's step

    @staticmethod
    def used(config: RunConfig) -> bool:
        return config.leftovers == "abort"

    def _earlier(self, group_id: str) -> bool:
        """A train group opened for a batch that has shipped."""
        step = self.books.step
        return self.opened_at.get(group_id, step) < step

    def opened(self, seq: int, group_id: str, group: Group, task: tuple[str, str]) -> None:
        """A train group opened: the step it belongs to."""
        self.opened_at[group_id] = self.books.step

    def settled(self, seq: int, world_kind: str) -> None:
        """After a world event's reactions: nothing of an earlier step (a batch that
        shipped) is owed or queued. Holds at any settled point, so a fold that settles only
        some world events checks it as well."""
        step, groups = self.books.step, self.books.groups
        owed = sorted(g for g, at in self.opened_at.items() if at < step and groups[g].owes)
        if owed:
            self.books.fail(seq, world_kind, f"leftovers not aborted at the ship: {owed[:3]}")
        kept = sum(at < step for at in self.queued_at.values())
        if kept:
            self.books.fail(seq, world_kind, f"{kept} queued past the batch, kept")

    def cancelled_leftover(
        self, seq: int, group_id: str, episode_ids: Sequence[str], unscheduled: int
    ) -> None:
        """A `leftover` cancellation: under the abort rule, of a train group opened before
        the current step (the ship moved it), and whole."""
        kind, group = "episodes_cancelled", self.books.groups[group_id]
        if not self.aborts or not self._earlier(group_id):
            self.books.fail(seq, kind, f"leftover cancellation of {group_id} with no batch full")
        if set(group.inflight) - set(episode_ids) or unscheduled != group.unscheduled:
            self.books.fail(seq, kind, f"leftover cancellation leaves {group_id} owing members")

    def dropping(self, seq: int, episode_id: str, reason: str) -> None:
        """Any drop: the episode leaves the queue."""
        self.queued_at.pop(episode_id, None)

    def dropped_leftover(self, seq: int, episode_id: str, group: Group | None) -> None:
        """A `leftover` drop: under the abort rule, of a queued episode (`group` None) or of
        an arrival of a train group opened for a batch that has shipped."""
        self.books.run.dropped_leftover += 1
        early = group is not None and not self._earlier(episode_id.rpartition("/")[0])
        if not self.aborts or early:
            problem = f"leftover drop of {episode_id}, no batch full"
            self.books.fail(seq, "episode_dropped", problem)

    def finalized(
        self, seq: int, group_id: str, group: Group, scored: Sequence[str], admitted: bool
    ) -> None:
        """A group finalized: an earlier step's scores nothing; its admitted members join
        the queue at the step their group opened at."""
        if scored and self._earlier(group_id):
            problem = f"{group_id} is a leftover, and scores {len(scored)}"
            self.books.fail(seq, "group_scored", problem)
        if admitted:
            step = self.opened_at.get(group_id, self.books.step)
            self.queued_at.update(dict.fromkeys(scored, step))
        self.opened_at.pop(group_id, None)

    def ships(self, seq: int, step: int, episode_ids: Sequence[str]) -> None:
        """A batch took these episodes off the queue."""
        for episode_id in episode_ids:
            self.queued_at.pop(episode_id, None)
