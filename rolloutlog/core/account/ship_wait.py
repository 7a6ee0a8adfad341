"""The account's check of the ship wait (`ship_wait = "last-chance"`, the tinker-822 preset).

A full batch whose hold has lifted waits for every open train group that holds a member at
its last chance: rollout age at the batch's step at least `max_off_policy_steps`. The check
keeps its own watch: from the account's open groups, queue, step and version it notes the
first moment a batch could have shipped but for the wait, and when that batch ships it
counts one wait (`ship_waits`) and its seconds (`ship_wait_seconds`: ship time minus that
moment). A batch that ships while such a group is open breaks the rule, and is reported at
its seq. Time comes from the events: `Books.now` is the time of the event being folded.
"""

from __future__ import annotations

from collections.abc import Sequence

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Group, age
from rolloutlog.core.account.properties import SHIP_WAIT, kept_properties
from rolloutlog.core.config import RunConfig


class ShipWait:
    """The account's watch over the ship wait."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.batch_size, self.token_batch_size = config.batch_size, config.token_batch_size
        self.since: float | None = None  # when batch `step` could first have shipped

    @staticmethod
    def used(config: RunConfig) -> bool:
        return SHIP_WAIT in kept_properties(config)

    def _last_chance_open(self) -> str | None:
        """An open train group holding a member at age ≥ the bound at this step, or None."""
        step, bound = self.books.step, self.books.bound
        for group_id, group in self.books.groups.items():
            if not group.train or group.frozen:
                continue
            versions = [v for v, _ in group.inflight.values()]
            versions += [v for _, v, _, _ in group.arrived.values()]
            if any(age(v, step) >= bound for v in versions):
                return group_id
        return None

    def moved(self) -> None:
        """Something moved: if batch `step` is full and the hold lifted but last-chance work
        is open, the wait starts now (once per batch)."""
        books = self.books
        if self.since is not None or books.finished or books.gated:
            return
        size, tokens = self.batch_size, self.token_batch_size
        if size is not None and len(books.queue) < size:
            return
        if tokens is not None and sum(t for _, _, t in books.queue.values()) < tokens:
            return
        if self._last_chance_open() is not None:
            self.since = books.now

    def dispatched(self, version: int) -> None:
        """Dispatched at or past its last chance (a lag of K − 1 above the bound)."""
        if age(version, self.books.step) >= self.books.bound:
            self.moved()

    def scored(self, seq: int, group: Group, episode_ids: Sequence[str], admitted: bool) -> None:
        self.moved()

    def ships(self, seq: int, step: int, episode_ids: Sequence[str]) -> None:
        """Batch `step` ships: nothing at its last chance may still be open; a wait before
        it is counted with its seconds."""
        group_id = self._last_chance_open()
        if group_id is not None:
            problem = f"batch {step} ships while {group_id} is at its last chance"
            self.books.fail(seq, "batch_shipped", f"{problem} (ship_wait = last-chance)")
        if self.since is not None:
            self.books.run.ship_waits += 1
            self.books.run.ship_wait_seconds += self.books.now - self.since
            self.since = None
