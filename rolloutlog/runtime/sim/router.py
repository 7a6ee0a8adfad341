"""Which server a request goes to: what the live runtime's `EndpointPool.place` does.

The members of a group stay on one server, so they share its prefix cache; a new group
(or one whose affinity was forgotten) goes to the server with the fewest requests on it,
ties to the lowest index, so placement is reproducible. A group's affinity is forgotten
when it is scored (the live driver's `forget_group`), and the oldest are forgotten past
`GROUPS_REMEMBERED_MAX`, as there.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

# the live pool's bound (`runtime.live.endpoints`; a test holds them equal): importing the
# live runtime here would load its HTTP stack into every simulation
GROUPS_REMEMBERED_MAX = 65536


class Router:
    """Group-affine, least-loaded placement over `servers` servers."""

    def __init__(self, servers: int) -> None:
        if servers < 1:
            raise ValueError(f"a router needs at least one server (got {servers})")
        self.servers = servers
        self._groups: OrderedDict[str, int] = OrderedDict()

    def place(self, group_id: str, load: Callable[[int], int]) -> int:
        """The group's server; a new group goes to the server of least `load(index)`."""
        server = self._groups.get(group_id)
        if server is not None:
            self._groups.move_to_end(group_id)
            return server
        server = min(range(self.servers), key=lambda index: (load(index), index))
        self._groups[group_id] = server
        while len(self._groups) > GROUPS_REMEMBERED_MAX:
            self._groups.popitem(last=False)
        return server

    def forget(self, group_id: str) -> None:
        """Drop a scored group's affinity."""
        self._groups.pop(group_id, None)
