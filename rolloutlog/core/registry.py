"""Which episodes a log ever dispatched: one small count per group, kept after it closes.

The deciders recognise a late arrival by its absence from the in-flight set and keep no
history of ids (their memory is bounded by what is open). A log that reports a completion
for an episode that was never dispatched would therefore pass as "late"; replay and
verify refuse it as inconsistent, and this registry is how they tell the two apart.
Episode ids are `g<n>/<member>` (docs/contract.md § Events), so a count per group number is
enough: member m of group n was dispatched iff m < count[n].
"""

from __future__ import annotations


class DispatchRegistry:
    """Members dispatched per group number, for every group a log ever opened."""

    def __init__(self) -> None:
        self.members: list[int] = [0]  # index 0 stands for no group: g1 is the first

    def opened(self) -> None:
        """The next group (in opening order) was opened."""
        self.members.append(0)

    def dispatched(self, group_number: int) -> None:
        """One more member of group `g<group_number>` went to inference."""
        self.members[group_number] += 1

    def knows(self, episode_id: str) -> bool:
        """Whether `episode_id` names a member that was dispatched at some point."""
        group_id, _, member = episode_id.rpartition("/")
        number = group_id[1:]
        if not (group_id[:1] == "g" and _decimal(number) and _decimal(member)):
            return False
        return 0 < int(number) < len(self.members) and int(member) < self.members[int(number)]


def _decimal(text: str) -> bool:
    """ASCII digits only: `int()` would also accept other scripts' digits and spaces."""
    return text.isascii() and text.isdecimal()


def group_number(group_id: str) -> int:
    """The n of `g<n>`; the deciders have checked the form of every id they opened."""
    return int(group_id[1:])
