"""Which server a request goes to: what the live runtime's `EndpointPool.place` does.

The members of a group stay on one server, so they share its prefix cache; a new group
(or one whose affinity was forgotten) goes to the server with the fewest requests on it,
ties to the lowest index, so placement is reproducible. A group's affinity is forgotten
when it is scored (the live driver's `forget_group`). The affinity itself is the live
pool's (`runtime.affinity`).
"""

from __future__ import annotations

from collections.abc import Callable

from rolloutlog.runtime.affinity import GroupAffinity


class Router:
    """Group-affine, least-loaded placement over `servers` servers."""

    def __init__(self, servers: int) -> None:
        if servers < 1:
            raise ValueError(f"a router needs at least one server (got {servers})")
        self.servers = servers
        self._affinity: GroupAffinity[int] = GroupAffinity()

    def place(self, group_id: str, load: Callable[[int], int]) -> int:
        """The group's server; a new group goes to the server of least `load(index)`."""
        if self.servers == 1:  # nothing to choose, nothing to remember
            return 0
        server = self._affinity.recall(group_id)
        if server is not None:
            return server
        least = min(range(self.servers), key=lambda index: (load(index), index))
        return self._affinity.remember(group_id, least)

    def forget(self, group_id: str) -> None:
        """Drop a scored group's affinity."""
        self._affinity.forget(group_id)
