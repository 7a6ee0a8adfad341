"""The account's check that a version update leaves no stale train work in flight
(`core.account.properties.NO_STALE_IN_FLIGHT`: per-episode stamping, stale work cancelled).

Judged once the `version_pending` settled, at the step the update arrived at: batches
shipped later in the same reaction can age episodes further, and those the sink drops when
they arrive. Episodes at the announced version were dispatched after it arrived: only a lag
above the bound (prime-rl's `gate_lag = "one"` at bound 0) lets those out stale. Under
`stale_tokens = mask` an episode is judged by the version it goes on under.
"""

from __future__ import annotations

from collections.abc import Callable

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.properties import NO_STALE_IN_FLIGHT, kept_properties
from rolloutlog.core.config import RunConfig


class StaleInFlight:
    """No stale train episode in flight once an update's reactions settled."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.goes_on_under: Callable[[str, int], int] | None = None  # the mask's, if used

    @staticmethod
    def used(config: RunConfig) -> bool:
        return NO_STALE_IN_FLIGHT in kept_properties(config)

    def update_settled(self, seq: int, world_kind: str) -> None:
        """A `version_pending` settled: no stale train episode is in flight."""
        books, goes_on_under = self.books, self.goes_on_under
        step, bound, announced = books.publish_step, books.bound, books.version
        for group_id, group in books.groups.items():
            for episode_id, (stamp, _) in group.inflight.items():
                version = stamp if goes_on_under is None else goes_on_under(episode_id, stamp)
                if version != announced and group.stale(version, step, bound):
                    problem = f"stale {episode_id} of {group_id} in flight"
                    books.fail(seq, world_kind, problem)
