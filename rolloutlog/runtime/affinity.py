"""Group affinity: the members of a group go to one server, so they share its prefix cache.

One rule for the live pool (`runtime.live.endpoints.EndpointPool.place`) and the simulated
router (`runtime.sim.router`), so the simulator places requests as a live run does. A group
placed before is recalled (and renewed as the newest); where it is new, the caller chooses
and the placement is remembered. Memory is bounded: past `GROUPS_REMEMBERED_MAX` the oldest
placement is forgotten. This module imports nothing of the live runtime, so a simulation
does not load its HTTP stack.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Final, Generic, TypeVar

GROUPS_REMEMBERED_MAX: Final = 65536  # placements kept; the oldest are forgotten

T = TypeVar("T")


class GroupAffinity(Generic[T]):
    """Each group's server, newest last."""

    def __init__(self) -> None:
        self._placed: OrderedDict[str, T] = OrderedDict()

    def recall(self, group_id: str, usable: Callable[[T], bool] | None = None) -> T | None:
        """The group's server, renewed as the newest; None where it has none, or where
        `usable` says it can no longer serve (a lost endpoint)."""
        placed = self._placed.get(group_id)
        if placed is None or (usable is not None and not usable(placed)):
            return None
        self._placed.move_to_end(group_id)
        return placed

    def remember(self, group_id: str, placed: T) -> T:
        """Place the group on `placed`, forgetting the oldest past the bound."""
        self._placed[group_id] = placed
        while len(self._placed) > GROUPS_REMEMBERED_MAX:
            self._placed.popitem(last=False)
        return placed

    def forget(self, group_id: str) -> None:
        """Drop a finished group's placement."""
        self._placed.pop(group_id, None)
