"""The shadow account's checks of slime's abort of the leftovers (a mixin of `Account`).

Under `leftovers = "abort"` (slime-oversample) a shipped batch aborts every train group of
an earlier step still owed: each is cancelled whole (reason `leftover`); the queued
episodes the batch did not take, and every arrival of a train group opened for a batch
that has shipped, are dropped (reason `leftover`). The account keeps the step each open
train group (and queued episode) opened at, on its own, and checks: whenever a world
event's reactions settle, nothing of an earlier step is owed or queued (a decider that
skips an abort is caught there); a `leftover` cancellation is whole and of an earlier step's
group; a `leftover` drop is of a queued episode or an earlier step's arrival, under the
abort rule only; and such a group scores nothing. It counts `episodes_dropped_leftover`:
the finished rollouts the abort wasted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rolloutlog.core.account_group import Group
from rolloutlog.core.run_summary import RunSummary


class _Books(Protocol):
    """What these checks read and keep of the account."""

    run: RunSummary
    step: int
    queued_at: dict[str, int]
    aborts: bool
    opened_at: dict[str, int]
    groups: dict[str, Group]
    queue: dict[str, tuple[int, bool, int]]

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...

    def _earlier(self, group_id: str) -> bool: ...

    def _leftover_queued(self, group_id: str, episode_ids: Sequence[str]) -> None: ...


class LeftoverChecks:
    """`Account`'s books of the leftovers aborted once a batch is full."""

    aborts: bool  # the run's `leftovers` rule is "abort" (`Account.__init__` sets all three)
    opened_at: dict[str, int]  # open train group -> the step it opened at
    queued_at: dict[str, int]  # queued episode -> its group's step (abort rule only)

    def _leftover_opened(self: _Books, group_id: str) -> None:
        """A train group opened: the step it belongs to."""
        self.opened_at[group_id] = self.step

    def _earlier(self: _Books, group_id: str) -> bool:
        """A train group opened for a batch that has shipped."""
        return self.opened_at.get(group_id, self.step) < self.step

    def _leftover_settled(self: _Books, seq: int, world_kind: str) -> None:
        """After a world event's reactions, where the run aborts leftovers: nothing of an
        earlier step (a batch that shipped) is owed or queued. Holds at any settled point,
        so a fold that settles only some world events checks it as well."""
        if not self.aborts:
            return
        owed = sorted(
            g for g, step in self.opened_at.items() if step < self.step and self.groups[g].owes
        )
        if owed:
            self._fail(seq, world_kind, f"leftovers not aborted at the ship: {owed[:3]}")
        kept = sum(step < self.step for step in self.queued_at.values())
        if kept:
            self._fail(seq, world_kind, f"{kept} queued past the batch, kept")

    def _leftover_queued(self: _Books, group_id: str, episode_ids: Sequence[str]) -> None:
        """Admitted episodes joined the queue: the step their group opened at."""
        if self.aborts:
            step = self.opened_at.get(group_id, self.step)
            self.queued_at.update(dict.fromkeys(episode_ids, step))

    def _leftover_cancelled(
        self: _Books, seq: int, group_id: str, episode_ids: Sequence[str], unscheduled: int
    ) -> None:
        """A `leftover` cancellation: under the abort rule, of a train group opened before
        the current step (the ship moved it), and whole."""
        kind, group = "episodes_cancelled", self.groups[group_id]
        if not self.aborts or not self._earlier(group_id):
            self._fail(seq, kind, f"leftover cancellation of {group_id} with no batch full")
        if set(group.inflight) - set(episode_ids) or unscheduled != group.unscheduled:
            self._fail(seq, kind, f"leftover cancellation leaves {group_id} owing members")

    def _leftover_dropped(self: _Books, seq: int, episode_id: str, group: Group | None) -> None:
        """A `leftover` drop: under the abort rule, of a queued episode (`group` None) or of
        an arrival of a train group opened for a batch that has shipped."""
        self.run.dropped_leftover += 1
        group_id = episode_id.rpartition("/")[0]
        early = group is not None and not self._earlier(group_id)
        if not self.aborts or early:
            self._fail(seq, "episode_dropped", f"leftover drop of {episode_id}, no batch full")

    def _leftover_scored(
        self: _Books, seq: int, group_id: str, scored: Sequence[str], admitted: bool
    ) -> None:
        """A group finalized: under the abort rule an earlier step's scores nothing."""
        if self.aborts and scored and self._earlier(group_id):
            self._fail(seq, "group_scored", f"{group_id} is a leftover, and scores {len(scored)}")
        if admitted:
            self._leftover_queued(group_id, scored)
        self.opened_at.pop(group_id, None)
